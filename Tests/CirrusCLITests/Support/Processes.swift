import CirrusTestSupport
import Foundation
import Testing

/// Paths of this checkout.
enum Paths {
    static let root: String = {
        var parts = #filePath.split(separator: "/", omittingEmptySubsequences: false)
        parts.removeLast(4)  // Support/Processes.swift, CirrusCLITests, Tests
        return parts.joined(separator: "/")
    }()

    static func certificate(_ name: String) -> String { root + "/Certs/" + name }

    /// A binary of this build (next to the test bundle).
    static func binary(_ name: String) -> URL {
        let buildDirectory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        let binary = buildDirectory.appendingPathComponent(name)
        if FileManager.default.fileExists(atPath: binary.path) { return binary }
        return buildDirectory.deletingLastPathComponent().appendingPathComponent(name)
    }

    /// A fresh temporary directory.
    static func temporaryDirectory() throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("cirrus-cli-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }
}

/// A real `cirrusd` on 127.0.0.1, port 0, with a temporary data directory.
final class CirrusdProcess {
    let process = ChildProcess()
    let port: Int
    private let output = Pipe()
    let dataDirectory: String
    /// `http://HOST:PORT/metrics` when started with `--metrics-address`.
    private(set) var metricsURL: URL?

    /// - parameter extraArguments: more flags for `cirrusd` (e.g. `--metrics-address 127.0.0.1:0`).
    /// - parameter fileSizeLimitKiB: started under `ulimit -f` with this limit: every file it
    ///   writes fails with EFBIG past it, as on a disk that filled up.
    init(extraArguments: [String] = [], fileSizeLimitKiB: Int? = nil) throws {
        self.dataDirectory = try Paths.temporaryDirectory()
        let arguments = [
            "--host", "127.0.0.1", "--port", "0", "--data-dir", self.dataDirectory,
            "--cert", Paths.certificate("server.pem"), "--key", Paths.certificate("server-key.pem"),
            "--client-ca", Paths.certificate("ca.pem"), "--log-level", "error",
        ] + extraArguments
        if let fileSizeLimitKiB {
            self.process.executableURL = URL(fileURLWithPath: "/bin/bash")
            self.process.arguments = ["-c", "ulimit -f \(fileSizeLimitKiB) && exec \"$0\" \"$@\"", Paths.binary("cirrusd").path] + arguments
        } else {
            self.process.executableURL = Paths.binary("cirrusd")
            self.process.arguments = arguments
        }
        self.process.standardOutput = self.output
        self.process.standardError = FileHandle.nullDevice
        try self.process.run()
        let line = try Self.nextLine(of: self.output)
        guard line.hasPrefix("listening on "), let port = line.split(separator: ":").last.flatMap({ Int($0) }) else {
            self.process.terminate()
            throw CirrusdDidNotStart(firstLine: line)
        }
        self.port = port
        if extraArguments.contains("--metrics-address") {
            // "metrics on http://127.0.0.1:PORT/metrics"
            let announced = try Self.nextLine(of: self.output)
            self.metricsURL = URL(string: String(announced.dropFirst("metrics on ".count)))
        }
    }

    private static func nextLine(of output: Pipe) throws -> String {
        var bytes: [UInt8] = []
        while let byte = try output.fileHandleForReading.read(upToCount: 1)?.first, byte != UInt8(ascii: "\n") {
            bytes.append(byte)
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    func stop() {
        if self.process.isRunning { self.process.terminate() }
        self.process.waitUntilExit()
    }

    deinit {
        self.stop()
        try? FileManager.default.removeItem(atPath: self.dataDirectory)
    }
}

struct CirrusdDidNotStart: Error { var firstLine: String }

/// What a `cirrus` run printed and how it ended.
struct CLIRun {
    var status: Int32
    var stdout: String
    var stderr: String
    var killed = false
}

/// Runs the `cirrus` binary.
enum CLI {
    /// The connection flags for `server` as alice.
    static func connection(_ server: CirrusdProcess) -> [String] {
        [
            "--server", "127.0.0.1:\(server.port)", "--ca", Paths.certificate("ca.pem"),
            "--cert", Paths.certificate("alice.pem"), "--key", Paths.certificate("alice-key.pem"),
        ]
    }

    /// Runs `cirrus arguments` to its end (in `directory`, with an environment without CIRRUS_*).
    static func run(_ arguments: [String], in directory: String? = nil) throws -> CLIRun {
        let process = try self.start(arguments, in: directory)
        return process.wait()
    }

    static func start(_ arguments: [String], in directory: String? = nil) throws -> RunningCLI {
        try RunningCLI(arguments: arguments, directory: directory)
    }
}

/// A `cirrus` process (or another binary of this build) whose output is collected in files
/// (no pipe can fill up).
final class RunningCLI {
    let process = ChildProcess()
    private let outPath: String
    private let errPath: String

    init(arguments: [String], directory: String?, executable: String = "cirrus") throws {
        let base = FileManager.default.temporaryDirectory.appendingPathComponent("cirrus-out-\(UUID().uuidString)").path
        self.outPath = base + ".out"
        self.errPath = base + ".err"
        _ = FileManager.default.createFile(atPath: self.outPath, contents: nil)
        _ = FileManager.default.createFile(atPath: self.errPath, contents: nil)
        self.process.executableURL = Paths.binary(executable)
        self.process.arguments = arguments
        self.process.environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("CIRRUS_") }
        if let directory { self.process.currentDirectoryURL = URL(fileURLWithPath: directory) }
        self.process.standardOutput = FileHandle(forWritingAtPath: self.outPath)
        self.process.standardError = FileHandle(forWritingAtPath: self.errPath)
        self.process.standardInput = FileHandle.nullDevice
        try self.process.run()
    }

    /// What it printed on stdout so far.
    var outputSoFar: String { (try? String(contentsOfFile: self.outPath, encoding: .utf8)) ?? "" }

    func kill() {
        if self.process.isRunning { self.process.signal(SIGKILL) }
    }

    func wait() -> CLIRun {
        self.process.waitUntilExit()
        defer {
            try? FileManager.default.removeItem(atPath: self.outPath)
            try? FileManager.default.removeItem(atPath: self.errPath)
        }
        return CLIRun(
            status: self.process.terminationStatus,
            stdout: (try? String(contentsOfFile: self.outPath, encoding: .utf8)) ?? "",
            stderr: (try? String(contentsOfFile: self.errPath, encoding: .utf8)) ?? "",
            killed: self.process.terminationReason == .uncaughtSignal)
    }
}
