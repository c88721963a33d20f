import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A child process started with `posix_spawn`, with the part of `Foundation.Process`'s API the
/// tests use (same names, so a test reads as it would with `Process`).
///
/// The tests do not use `Foundation.Process`: on Linux its `run()` scans `/proc/self/fd` and
/// copies a fixed 256 bytes of each directory entry's name, reading past the end of the
/// `readdir` buffer (swift-corelibs-foundation issue 5472). When that buffer ends next to an
/// unmapped page the whole test process dies with SIGSEGV. Whether it does depends on how many
/// descriptors the process has open at that moment (the suite holds hundreds of sockets), not
/// on timing, so launching one process at a time did not prevent it; AddressSanitizer reports
/// the over-read on every launch.
///
/// The child gets standard input, output and error as set (a `Pipe`, a `FileHandle`, or nil for
/// `/dev/null`) and no other descriptor of the test process: every other one is closed in the
/// child, as `Process` does, so no listening socket or SQLite file of another test leaks into it.
///
/// For example:
/// ```swift
/// let process = ChildProcess()
/// process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
/// process.arguments = ["true"]
/// try process.run()
/// process.waitUntilExit()
/// ```
public final class ChildProcess: @unchecked Sendable {
    // @unchecked Sendable: the launch configuration is set by one test before `run()` and not
    // changed after; the exit status, written when the child is reaped, is guarded by `lock`.

    /// Why the process ended.
    public enum TerminationReason: Sendable {
        case exit
        case uncaughtSignal
    }

    /// A launch that could not happen.
    public struct LaunchError: Error, CustomStringConvertible {
        public var operation: String
        public var errno: Int32
        public var description: String { "\(operation) failed: \(String(cString: strerror(errno)))" }
    }

    public var executableURL: URL?
    public var arguments: [String] = []
    /// The child's environment; nil = this process's.
    public var environment: [String: String]?
    public var currentDirectoryURL: URL?
    /// A `Pipe` (the child reads its read end), a `FileHandle`, or nil (or
    /// `FileHandle.nullDevice`) for `/dev/null`.
    public var standardInput: Any?
    /// A `Pipe` (the child writes its write end), a `FileHandle`, or nil (or
    /// `FileHandle.nullDevice`) for `/dev/null`.
    public var standardOutput: Any?
    /// As `standardOutput`.
    public var standardError: Any?

    private let lock = NSLock()
    private var pid: pid_t = 0
    /// The raw `waitpid` status once the child was reaped.
    private var status: Int32?

    public init() {}

    /// The child's process ID (0 before `run()`).
    public var processIdentifier: Int32 { self.lock.withLock { self.pid } }

    /// Starts the child.
    ///
    /// - throws: ``LaunchError`` when it cannot be started.
    public func run() throws {
        guard let executable = self.executableURL?.path else {
            throw LaunchError(operation: "run (no executableURL)", errno: ENOENT)
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }

        let null = open("/dev/null", O_RDWR | O_CLOEXEC)
        guard null >= 0 else { throw LaunchError(operation: "open /dev/null", errno: errno) }
        defer { close(null) }
        let descriptors = [
            Self.descriptor(self.standardInput, reading: true) ?? null,
            Self.descriptor(self.standardOutput, reading: false) ?? null,
            Self.descriptor(self.standardError, reading: false) ?? null,
        ]
        // Each goes to a number above every source first, then to 0, 1, 2: no source (one may
        // be 0, 1 or 2 itself) is overwritten before it is copied, and the copies lose FD_CLOEXEC.
        let spare = max(descriptors.max() ?? 2, 2) + 1
        for (index, source) in descriptors.enumerated() {
            posix_spawn_file_actions_adddup2(&actions, source, spare + Int32(index))
        }
        for index in descriptors.indices {
            posix_spawn_file_actions_adddup2(&actions, spare + Int32(index), Int32(index))
        }
        try Self.closeEverythingFrom(3, in: &actions)
        if let directory = self.currentDirectoryURL?.path {
            try Self.changeDirectory(directory, in: &actions)
        }

        let argv = [executable] + self.arguments
        let environment = (self.environment ?? ProcessInfo.processInfo.environment).map { "\($0.key)=\($0.value)" }
        // No signal blocked or ignored in the child (a test thread may block some, and what is
        // ignored survives exec), as Process does.
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        var allSignals = sigset_t()
        sigfillset(&allSignals)
        posix_spawnattr_setsigdefault(&attributes, &allSignals)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

        var child: pid_t = 0
        let result = Self.withCStrings(argv) { argv in
            Self.withCStrings(environment) { envp in
                posix_spawn(&child, executable, &actions, &attributes, argv, envp)
            }
        }
        guard result == 0 else { throw LaunchError(operation: "posix_spawn \(executable)", errno: result) }
        self.lock.withLock { self.pid = child }
        // As Process does: the parent's copies of the child's pipe ends go, so a reader sees
        // end-of-file when the child exits.
        if let pipe = self.standardInput as? Pipe { try? pipe.fileHandleForReading.close() }
        if let pipe = self.standardOutput as? Pipe { try? pipe.fileHandleForWriting.close() }
        if let pipe = self.standardError as? Pipe, (self.standardOutput as? Pipe) !== pipe {
            try? pipe.fileHandleForWriting.close()
        }
    }

    /// Whether the child was started and has not exited.
    public var isRunning: Bool {
        self.lock.withLock { self.pid != 0 && !self.reapIfExited() }
    }

    /// Blocks until the child exits.
    public func waitUntilExit() {
        while true {
            let (pid, exited) = self.lock.withLock { (self.pid, self.pid == 0 || self.reapIfExited()) }
            if exited { return }
            // Waits without reaping it, so a concurrent `isRunning` reaps it under the lock.
            var info = siginfo_t()
            _ = waitid(P_PID, id_t(pid), &info, WEXITED | WNOWAIT)
        }
    }

    /// Sends SIGTERM.
    public func terminate() { self.signal(SIGTERM) }

    /// Sends SIGINT.
    public func interrupt() { self.signal(SIGINT) }

    /// Sends `signal` unless the child has been reaped already.
    public func signal(_ signal: Int32) {
        self.lock.withLock {
            guard self.pid != 0, self.status == nil else { return }
            _ = kill(self.pid, signal)
        }
    }

    /// The exit status, or the signal that ended it (after `waitUntilExit()`).
    public var terminationStatus: Int32 {
        self.lock.withLock {
            guard let status = self.status else { return 0 }
            let signal = status & 0x7f
            return signal == 0 ? (status >> 8) & 0xff : signal
        }
    }

    public var terminationReason: TerminationReason {
        self.lock.withLock { (self.status ?? 0) & 0x7f == 0 ? .exit : .uncaughtSignal }
    }

    /// Reaps the child if it has exited; whether it has. Under `lock`.
    private func reapIfExited() -> Bool {
        if self.status != nil { return true }
        var status: Int32 = 0
        let result = waitpid(self.pid, &status, WNOHANG)
        if result == self.pid {
            self.status = status
            return true
        }
        return false
    }

    private static func descriptor(_ value: Any?, reading: Bool) -> Int32? {
        switch value {
        case let pipe as Pipe: reading ? pipe.fileHandleForReading.fileDescriptor : pipe.fileHandleForWriting.fileDescriptor
        case let handle as FileHandle where handle !== FileHandle.nullDevice && handle.fileDescriptor >= 0: handle.fileDescriptor
        default: nil
        }
    }

    private static func withCStrings<R>(_ strings: [String], _ body: (UnsafePointer<UnsafeMutablePointer<CChar>?>) -> R) -> R {
        let pointers = strings.map { strdup($0) } + [nil]
        defer { for pointer in pointers { free(pointer) } }
        return pointers.withUnsafeBufferPointer { body($0.baseAddress!) }
    }

    /// `posix_spawn_file_actions_addclosefrom_np` (glibc 2.34+) is declared only under
    /// `_GNU_SOURCE`, which Swift's Glibc module does not set: looked up at run time.
    private static func closeEverythingFrom(_ first: Int32, in actions: inout posix_spawn_file_actions_t) throws {
        typealias CloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addclosefrom_np") else {
            throw LaunchError(operation: "posix_spawn_file_actions_addclosefrom_np (glibc 2.34 or later)", errno: ENOSYS)
        }
        let result = unsafeBitCast(symbol, to: CloseFrom.self)(&actions, first)
        guard result == 0 else { throw LaunchError(operation: "posix_spawn_file_actions_addclosefrom_np", errno: result) }
    }

    /// `posix_spawn_file_actions_addchdir_np` (glibc 2.29+), looked up as above.
    private static func changeDirectory(_ path: String, in actions: inout posix_spawn_file_actions_t) throws {
        typealias ChangeDirectory = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, UnsafePointer<CChar>) -> Int32
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addchdir_np") else {
            throw LaunchError(operation: "posix_spawn_file_actions_addchdir_np (glibc 2.29 or later)", errno: ENOSYS)
        }
        let result = path.withCString { unsafeBitCast(symbol, to: ChangeDirectory.self)(&actions, $0) }
        guard result == 0 else { throw LaunchError(operation: "posix_spawn_file_actions_addchdir_np", errno: result) }
    }
}

extension ChildProcess {
    /// Runs to its end with standard output and error in one pipe and no input; returns its exit
    /// status and what it printed. Blocks the calling thread.
    public func runCapturingOutput() throws -> (status: Int32, output: String) {
        let output = Pipe()
        self.standardOutput = output
        self.standardError = output
        self.standardInput = nil
        try self.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        self.waitUntilExit()
        return (self.terminationStatus, String(decoding: data, as: UTF8.self))
    }
}
