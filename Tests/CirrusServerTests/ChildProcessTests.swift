import CirrusTestSupport
import Foundation
import Testing

/// The tests' process launcher (posix_spawn; see ``ChildProcess`` for why not `Process`).
@Suite("ChildProcess: the tests' process launcher")
struct ChildProcessTests {
    private static func shell(_ script: String) -> ChildProcess {
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", script]
        return process
    }

    @Test func capturesOutputAndErrorAndTheExitStatus() throws {
        let (status, output) = try Self.shell("echo out; echo err >&2; exit 3").runCapturingOutput()
        #expect(status == 3)
        #expect(output.split(separator: "\n").sorted() == ["err", "out"])
    }

    @Test func theChildGetsNoOtherDescriptorOfTheTestProcess() throws {
        // Descriptors this process holds open (without close-on-exec) while it launches.
        let held = (0..<20).map { _ in open("/dev/null", O_RDONLY) }
        defer { for descriptor in held { close(descriptor) } }
        #expect(held.allSatisfy { $0 >= 0 })
        let (status, output) = try Self.shell("ls /proc/$$/fd").runCapturingOutput()
        #expect(status == 0)
        // The shell's 0, 1 and 2; `ls` runs in a child of the shell and lists the shell's table.
        #expect(output.split(separator: "\n").sorted() == ["0", "1", "2"], "\(output)")
    }

    @Test func environmentAndWorkingDirectoryAreTheChildsOwn() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("child-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let process = Self.shell("pwd; echo \"$GREETING\"")
        process.environment = ["GREETING": "hello", "PATH": "/usr/bin:/bin"]
        process.currentDirectoryURL = directory
        let (status, output) = try process.runCapturingOutput()
        #expect(status == 0)
        #expect(output == "\(directory.resolvingSymlinksInPath().path)\nhello\n")
    }

    @Test func terminateEndsItWithTheSignal() throws {
        let process = Self.shell("exec sleep 600")
        try process.run()
        #expect(process.isRunning)
        process.terminate()
        process.waitUntilExit()
        #expect(!process.isRunning)
        #expect(process.terminationReason == .uncaughtSignal)
        #expect(process.terminationStatus == SIGTERM)
    }

    @Test func aMissingExecutableIsALaunchError() {
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: "/nonexistent/binary")
        #expect(throws: ChildProcess.LaunchError.self) { try process.run() }
    }
}
