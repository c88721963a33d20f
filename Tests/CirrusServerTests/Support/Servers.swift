import CirrusServer
import CirrusTLS
import CirrusTestSupport
import Foundation
import NIOCore
import Synchronization
import Testing

/// Runs an in-process server on a free loopback port for the length of `body`.
func withServer<R>(
    clientCertificates: TLSConfiguration.ClientCertificateVerification = .optional,
    configure: (inout ServerConfiguration) -> Void = { _ in },
    _ body: (CirrusServer, Int) async throws -> R
) async throws -> R {
    var configuration = ServerConfiguration(
        tls: .server(
            certificateChainPath: TestCertificates.path("server.pem"),
            privateKeyPath: TestCertificates.path("server-key.pem"),
            clientCATrustRootsPath: TestCertificates.path("ca.pem"),
            clientCertificateVerification: clientCertificates
        )
    )
    configuration.port = 0
    // The whole suite runs in one process on two cores: a TLS handshake plus `Hello` can take
    // longer than the production 10 s there. Tests of the timeout itself set their own.
    configuration.connection.handshakeTimeout = .seconds(60)
    configure(&configuration)
    let server = CirrusServer(configuration: configuration)
    let address = try await server.start()
    let port = try #require(address.port)
    do {
        let result = try await body(server, port)
        await server.shutdownGracefully()
        return result
    } catch {
        await server.shutdownGracefully()
        throw error
    }
}

/// A real `cirrusd` process, started from the build folder next to the test bundle.
/// `@unchecked Sendable`: a test owns it and calls it from one task at a time; `launch` and
/// `killed` only hand it to a helper thread and wait, so no two threads use it at once.
final class CirrusdProcess: @unchecked Sendable {
    let process = ChildProcess()
    let port: Int
    private let output: Pipe
    /// The temporary data directory this process was given, removed when it is released.
    private(set) var dataDirectory: String?

    /// Starts `cirrusd` with `arguments` (plus `--port 0` unless a port is given) and waits for
    /// its `listening on HOST:PORT` line.
    /// The `cirrusd` binary of this build.
    static var binary: URL {
        let buildDirectory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        let binary = buildDirectory.appendingPathComponent("cirrusd")
        if FileManager.default.fileExists(atPath: binary.path) { return binary }
        // `swift test` may run the bundle from inside a `.xctest` directory.
        return buildDirectory.deletingLastPathComponent().appendingPathComponent("cirrusd")
    }

    /// - parameter standardErrorPath: a file that receives the process's log
    ///   (standard error); nil discards it.
    /// - parameter environment: the process's environment; nil = this process's.
    init(
        arguments: [String] = [], workingDirectory: String? = nil, standardErrorPath: String? = nil,
        environment: [String: String]? = nil
    ) throws {
        self.process.executableURL = Self.binary
        if let environment { self.process.environment = environment }
        var arguments = arguments
        // The whole suite shares two cores with this process: a handshake plus `Hello` can take
        // longer than the production 10 s (as for in-process servers, see `withServer`).
        if !arguments.contains("--handshake-timeout") {
            arguments += ["--handshake-timeout", "60s"]
        }
        if workingDirectory == nil {
            if !arguments.contains("--port") {
                arguments += ["--port", "0"]
            }
            if !arguments.contains("--data-dir") {
                let directory = FileManager.default.temporaryDirectory
                    .appendingPathComponent("cirrusd-test-\(UUID().uuidString)").path
                self.dataDirectory = directory
                arguments += ["--data-dir", directory]
            }
        }
        self.process.arguments = arguments
        if let workingDirectory {
            self.process.currentDirectoryURL = URL(fileURLWithPath: workingDirectory)
        }
        self.output = Pipe()
        self.process.standardOutput = self.output
        if let standardErrorPath {
            _ = FileManager.default.createFile(atPath: standardErrorPath, contents: nil)
            self.process.standardError = FileHandle(forWritingAtPath: standardErrorPath) ?? FileHandle.nullDevice
        } else {
            self.process.standardError = FileHandle.nullDevice
        }
        let process = self.process
        try process.run()
        let line = try Self.readLine(from: self.output.fileHandleForReading)
        guard line.hasPrefix("listening on "), let port = line.split(separator: ":").last.flatMap({ Int($0) }) else {
            self.process.terminate()
            throw CirrusdDidNotStart(firstLine: line)
        }
        self.port = port
    }

    /// The next line the process writes to standard output (after `listening on`).
    func nextOutputLine() throws -> String {
        try Self.readLine(from: self.output.fileHandleForReading)
    }

    private static func readLine(from handle: FileHandle) throws -> String {
        var bytes: [UInt8] = []
        while true {
            let byte = try handle.read(upToCount: 1) ?? Data()
            guard let first = byte.first else { break }
            if first == UInt8(ascii: "\n") { break }
            bytes.append(first)
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Anonymous resident memory of the process (heap and stacks), in KiB, from /proc: what the
    /// server holds. Not `VmRSS`, which also counts the pages of the SQLite file that reads
    /// touched through its memory map, however many a run happened to touch.
    var residentKiB: Int? {
        guard let status = try? String(contentsOfFile: "/proc/\(self.process.processIdentifier)/status", encoding: .utf8)
        else { return nil }
        for line in status.split(separator: "\n") where line.hasPrefix("RssAnon:") {
            return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "")
        }
        return nil
    }

    /// Starts `cirrusd` as `init` does, on a thread of its own: waiting for the `listening on`
    /// line blocks a thread, and the tests' cooperative pool has one thread per core, so two
    /// such waits at once would stall every other test in the process (their servers' handshake
    /// timers then fire). Suites that start many processes use this.
    static func launch(
        arguments: [String] = [], workingDirectory: String? = nil, standardErrorPath: String? = nil,
        environment: [String: String]? = nil
    ) async throws -> CirrusdProcess {
        try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async {
                continuation.resume(
                    with: Result {
                        try CirrusdProcess(
                            arguments: arguments, workingDirectory: workingDirectory, standardErrorPath: standardErrorPath,
                            environment: environment)
                    })
            }
        }
    }

    /// SIGKILL, waited for on a thread of its own (see ``launch(arguments:standardErrorPath:)``).
    func killed() async {
        // The signal goes at once, from the caller: sent after the hop, it let a loaded machine's
        // process run on long enough to finish the work a test meant to interrupt.
        self.process.signal(SIGKILL)
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            DispatchQueue.global().async {
                self.kill()
                continuation.resume()
            }
        }
    }

    /// Kills the process with SIGKILL (no chance to clean up) and waits for it.
    func kill() {
        if self.process.isRunning {
            self.process.signal(SIGKILL)
        }
        self.process.waitUntilExit()
    }

    /// Sends SIGTERM and waits for the process to exit; returns its exit status.
    @discardableResult
    func stop() -> Int32 {
        if self.process.isRunning {
            self.process.terminate()
        }
        self.process.waitUntilExit()
        return self.process.terminationStatus
    }

    deinit {
        if self.process.isRunning {
            self.process.interrupt()
            self.process.terminate()
        }
        if let dataDirectory {
            try? FileManager.default.removeItem(atPath: dataDirectory)
        }
    }
}

struct CirrusdDidNotStart: Error { var firstLine: String }
