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
}
