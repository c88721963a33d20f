import CirrusTestSupport
import CirrusWire
import Foundation
import Testing

/// `cirrusd users …` against the data directory of a `cirrusd` that is running.
@Suite("cirrusd users and tokens, against a running server", .serialized)
struct CirrusdUsersCommandTests {
    @Test func disablingAUserClosesTheirConnectionAndEnablingLetsThemBack() async throws {
        let server = try await CirrusdProcess.launch(arguments: ["--user-refresh-interval", "1s"])
        defer { server.stop() }
        let directory = try #require(server.dataDirectory)
        let bob = try await TestClient.connect(port: server.port, user: "bob")
        _ = try await bob.handshake()
        let alice = try await TestClient.connect(port: server.port, user: "alice-mail")
        _ = try await alice.handshake()

        // Both were registered by connecting; alice with her certificate's addresses.
        try await eventually("both listed") {
            let (status, output) = try await runCirrusd(["users", "list", "--data-dir", directory])
            return status == 0 && output.contains("_bob") && output.contains("_alice")
        }
        let (_, listing) = try await runCirrusd(["users", "list", "--data-dir", directory])
        #expect(listing.contains("email=alice.work@example.com,alice@example.com"), "\(listing)")

        let (status, output) = try await runCirrusd(["users", "disable", "bob", "--data-dir", directory])
        #expect(status == 0, "\(output)")
        #expect(output.contains("_bob  disabled"), "\(output)")
        let closed = try await bob.waitForClose(timeout: .seconds(60))
        #expect(closed?.code == .notAuthenticated, "\(String(describing: closed))")
        try await alice.expectNothingPending()

        #expect(try await runCirrusd(["users", "enable", "_bob", "--data-dir", directory]).status == 0)
        try await eventually("bob is let back in") {
            let client = try await TestClient.connect(port: server.port, user: "bob")
            defer { Task { await client.close() } }
            try await client.send(Wire.Frame(streamID: 0, kind: .hello(TestClient.hello(maxFrameBytes: 0))))
            guard case .helloAck = try await client.nextFrame().kind else { return false }
            return true
        }
        await alice.close()
    }

    @Test func badInputIsAClearErrorAndChangesNothing() async throws {
        let server = try await CirrusdProcess.launch()
        defer { server.stop() }
        let directory = try #require(server.dataDirectory)
        let cases: [([String], String)] = [
            (["users", "disable", "nobody", "--data-dir", directory], "no user _nobody"),
            (["users", "add", "bad name", "--data-dir", directory], "is not a user name"),
            (["users", "list", "--data-dir", directory + "-missing"], "no Cirrus data"),
        ]
        for (arguments, message) in cases {
            let (status, output) = try await runCirrusd(arguments)
            #expect(status != 0, "\(arguments): \(output)")
            #expect(output.contains(message), "\(arguments): \(output)")
        }
        #expect(try await runCirrusd(["users", "add", "erin", "--data-dir", directory]).status == 0)
        let (status, output) = try await runCirrusd(["users", "add-email", "erin", "not-an-address", "--data-dir", directory])
        #expect(status != 0)
        #expect(output.contains("is not an email address"), "\(output)")
        let (_, listing) = try await runCirrusd(["users", "list", "--data-dir", directory])
        #expect(listing.contains("_erin  enabled"), "\(listing)")
        #expect(!listing.contains("not-an-address"))
        #expect(!FileManager.default.fileExists(atPath: directory + "-missing"))
    }

    @Test func anIssuedTokenWorksAndRevokingItClosesItsConnection() async throws {
        let server = try await CirrusdProcess.launch(arguments: ["--user-refresh-interval", "1s"])
        defer { server.stop() }
        let directory = try #require(server.dataDirectory)
        let (status, output) = try await runCirrusd(
            ["tokens", "issue", "bob", "--expires-in", "30d", "--label", "laptop", "--data-dir", directory])
        #expect(status == 0, "\(output)")
        let lines = output.split(separator: "\n").map(String.init)
        let token = try #require(lines.first)
        let idField: Substring? = lines.dropFirst().first?.split(separator: " ").first
        let id = String(try #require(idField))
        #expect(token.hasPrefix("cirrus_\(id)_"), "\(output)")

        // Within the refresh interval the running server accepts it.
        var connected: TestClient?
        try await eventually("the token is accepted") {
            let client = try await TestClient.connect(port: server.port, user: nil)
            try await client.send(
                Wire.Frame(streamID: 0, kind: .hello(Wire.Hello(protocolVersion: Wire.protocolVersion, bearerToken: token))))
            guard case .helloAck(let ack) = try await client.nextFrame().kind, ack.userRecordName == "_bob" else {
                await client.close()
                return false
            }
            connected = client
            return true
        }
        let bob = try #require(connected)
        let (_, listing) = try await runCirrusd(["tokens", "list", "--user", "bob", "--data-dir", directory])
        #expect(listing.contains("\(id)  _bob  active"), "\(listing)")
        #expect(!listing.contains(token))

        #expect(try await runCirrusd(["tokens", "revoke", id, "--data-dir", directory]).status == 0)
        let closed = try await bob.waitForClose(timeout: .seconds(60))
        #expect(closed?.code == .notAuthenticated, "\(String(describing: closed))")
        let (_, after) = try await runCirrusd(["tokens", "list", "--data-dir", directory])
        #expect(after.contains("\(id)  _bob  revoked="), "\(after)")

        let (badStatus, badOutput) = try await runCirrusd(["tokens", "revoke", "0000000000000000", "--data-dir", directory])
        #expect(badStatus != 0)
        #expect(badOutput.contains("no token 0000000000000000"), "\(badOutput)")
    }
}
