import Foundation

extension Process {
    /// `run()`, one launch at a time in the whole test process: Foundation's `Process.run()` on
    /// Linux crashed (a bad pointer in a memmove inside it) when suites launched processes at
    /// once. The lock is a file lock, so the launches of the other test modules
    /// (`CirrusCLITests` has the same helper) wait for the same one.
    func runOneAtATime() throws {
        let lock = open("/tmp/cirrus-tests-process-launch.lock", O_CREAT | O_RDWR, 0o666)
        guard lock >= 0 else { return try self.run() }
        defer { close(lock) }
        _ = flock(lock, LOCK_EX)
        defer { _ = flock(lock, LOCK_UN) }
        try self.run()
    }

    /// Runs to its end with standard output and error in one pipe and no input; returns its exit
    /// status and what it printed. Blocks the calling thread.
    func runCapturingOutput() throws -> (status: Int32, output: String) {
        let output = Pipe()
        self.standardOutput = output
        self.standardError = output
        self.standardInput = FileHandle.nullDevice
        try self.runOneAtATime()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        self.waitUntilExit()
        return (self.terminationStatus, String(decoding: data, as: UTF8.self))
    }
}

/// Runs the `cirrusd` binary with `arguments` to completion, on a thread of its own (not the
/// cooperative pool); returns its exit status and what it printed (standard output and error
/// together).
func runCirrusd(_ arguments: [String], environment: [String: String]? = nil) async throws -> (status: Int32, output: String) {
    try await withCheckedThrowingContinuation { continuation in
        DispatchQueue.global().async {
            continuation.resume(
                with: Result {
                    let process = Process()
                    process.executableURL = CirrusdProcess.binary
                    process.arguments = arguments
                    if let environment { process.environment = environment }
                    return try process.runCapturingOutput()
                })
        }
    }
}
