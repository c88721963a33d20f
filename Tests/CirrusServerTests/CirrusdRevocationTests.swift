import CirrusTestSupport
import CirrusWire
import Foundation
import Testing

/// `--client-crl` and SIGHUP against the real `cirrusd` process: a leaked
/// client key is shut out without a restart.
@Suite("cirrusd revocation and reload", .serialized)
struct CirrusdRevocationTests {
    /// A scratch directory holding the CRL file cirrusd is pointed at.
    private final class Scratch {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cirrusd-crl-\(UUID().uuidString)").path
        var crl: String { self.directory + "/crl.pem" }
        var logPath: String { self.directory + "/cirrusd.log" }

        init(crl source: String) throws {
            try FileManager.default.createDirectory(atPath: self.directory, withIntermediateDirectories: true)
            try self.install(source)
        }

        /// Replaces the CRL file with a copy of `source` from Certs/.
        func install(_ source: String) throws {
            try Data(contentsOf: URL(fileURLWithPath: TestCertificates.path(source))).write(to: URL(fileURLWithPath: self.crl))
        }

        func log() -> String {
            (try? String(contentsOfFile: self.logPath, encoding: .utf8)) ?? ""
        }

        deinit {
            try? FileManager.default.removeItem(atPath: self.directory)
        }
    }

    private func start(_ scratch: Scratch) async throws -> CirrusdProcess {
        try await CirrusdProcess.launch(
            arguments: ["--client-auth", "required", "--client-crl", scratch.crl, "--log-level", "info"],
            standardErrorPath: scratch.logPath
        )
    }

    /// Whether `user` gets a HelloAck: its certificate passed the handshake.
    private func isAccepted(port: Int, user: String) async -> Bool {
        guard let client = try? await TestClient.connect(port: port, user: user) else {
            return false
        }
        let ack = try? await client.handshake()
        await client.close()
        return ack != nil
    }

    /// Polls (bounded) until `condition` holds; a loaded machine may take a while.
    private func eventually(_ condition: () async -> Bool) async throws -> Bool {
        let deadline = ContinuousClock.now + .seconds(30)
        while ContinuousClock.now < deadline {
            if await condition() {
                return true
            }
            try await Task.sleep(for: .milliseconds(200))
        }
        return false
    }

    @Test func aRevokedCertificateIsRefusedFromTheStart() async throws {
        let scratch = try Scratch(crl: "ca-crl-carol.pem")
        let server = try await self.start(scratch)
        defer { server.kill() }

        #expect(await !self.isAccepted(port: server.port, user: "carol"))
        #expect(await self.isAccepted(port: server.port, user: "alice"))
    }

    @Test func sighupWithARevokingListShutsOutNewConnectionsAndKeepsOpenOnes() async throws {
        let scratch = try Scratch(crl: "ca-crl.pem")
        let server = try await self.start(scratch)
        defer { server.kill() }
        #expect(await self.isAccepted(port: server.port, user: "carol"))

        let open = try await TestClient.connect(port: server.port, user: "carol")
        _ = try await open.handshake()

        try scratch.install("ca-crl-carol.pem")
        kill(server.process.processIdentifier, SIGHUP)
        let refused = try await self.eventually { await !self.isAccepted(port: server.port, user: "carol") }
        #expect(refused, "carol was still accepted 30 s after SIGHUP; log: \(scratch.log())")
        #expect(scratch.log().contains("reloaded the TLS certificate"))
        #expect(await self.isAccepted(port: server.port, user: "alice"))

        // The connection made before the reload goes on.
        try await open.send(Wire.Frame(streamID: 0, kind: .ping(Wire.Ping(nonce: 7))))
        #expect(try await open.nextFrame().kind == .pong(Wire.Pong(nonce: 7)))
        await open.close()
        #expect(server.process.isRunning)
    }

    @Test func aBadFileOnReloadKeepsThePreviousContextAndSaysWhy() async throws {
        let scratch = try Scratch(crl: "ca-crl-carol.pem")
        let server = try await self.start(scratch)
        defer { server.kill() }

        try Data("not a revocation list\n".utf8).write(to: URL(fileURLWithPath: scratch.crl))
        kill(server.process.processIdentifier, SIGHUP)
        let logged = try await self.eventually { scratch.log().contains("TLS reload failed") }
        #expect(logged, "no reload error in the log: \(scratch.log())")
        #expect(scratch.log().contains(scratch.crl))

        // Still serving, with the revocation list it had.
        #expect(server.process.isRunning)
        #expect(await self.isAccepted(port: server.port, user: "alice"))
        #expect(await !self.isAccepted(port: server.port, user: "carol"))
    }

    @Test func aBadRevocationListAtStartIsAClearError() async throws {
        let scratch = try Scratch(crl: "ca-crl.pem")
        try Data("garbage".utf8).write(to: URL(fileURLWithPath: scratch.crl))
        await #expect(throws: CirrusdDidNotStart.self) { try await self.start(scratch) }
        #expect(scratch.log().contains(scratch.crl), "\(scratch.log())")
    }
}
