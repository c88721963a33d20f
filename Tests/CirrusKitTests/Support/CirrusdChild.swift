import CirrusTestSupport
import Foundation

/// A real `cirrusd` process of this build, started with `arguments` (and `environment`, else
/// this process's), its port read from its first line (`listening on HOST:PORT`).
struct CirrusdChild {
    let process: ChildProcess
    let port: Int

    struct DidNotStart: Error { var firstLine: String }

    static func launch(_ arguments: [String], environment: [String: String]? = nil) async throws -> CirrusdChild {
        let buildDirectory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        var binary = buildDirectory.appendingPathComponent("cirrusd")
        if !FileManager.default.fileExists(atPath: binary.path) {
            binary = buildDirectory.deletingLastPathComponent().appendingPathComponent("cirrusd")
        }
        let process = ChildProcess()
        process.executableURL = binary
        process.arguments = arguments
        if let environment { process.environment = environment }
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        // Its first line, read on a thread of its own: it blocks.
        let handle = output.fileHandleForReading
        let line: String = await withCheckedContinuation { continuation in
            Thread.detachNewThread {
                var bytes: [UInt8] = []
                while let byte = try? handle.read(upToCount: 1), let first = byte.first, first != 10 {
                    bytes.append(first)
                }
                continuation.resume(returning: String(decoding: bytes, as: UTF8.self))
            }
        }
        guard line.hasPrefix("listening on "), let port = line.split(separator: ":").last.flatMap({ Int($0) }) else {
            process.signal(SIGKILL)
            process.waitUntilExit()
            throw DidNotStart(firstLine: line)
        }
        return CirrusdChild(process: process, port: port)
    }

    /// SIGKILL (no chance to release anything), waited for.
    func kill() {
        if process.isRunning { process.signal(SIGKILL) }
        process.waitUntilExit()
    }

    /// SIGTERM, waited for.
    func stop() {
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
    }
}
