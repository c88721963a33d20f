@testable import CirrusServer
import CirrusStore
import CirrusTestSupport
import CirrusWire
import Foundation
import Testing

/// The user directory on a real server: SQLite storage, mutual TLS on loopback, raw frames.
/// How a server answered `Hello`.
enum HelloAnswer {
    case accepted(Wire.HelloAck)
    case refused(Wire.ConnectionError)
}

@Suite("User directory: registration, disabled users, bearer tokens")
struct UserDirectoryTests {
    /// A server with a user directory over its storage, as `cirrusd` runs it.
    private func withDirectoryServer(
        _ body: (CirrusServer, Int, SQLiteStorage, UserDirectory) async throws -> Void
    ) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cirrus-users-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let storage = try SQLiteStorage(directory: directory)
        defer { try? storage.close() }
        let users = UserDirectory(storage: storage)
        try await users.load()
        try await withServer(configure: {
            $0.executor = StorageExecutor(storage: storage, users: users)
            $0.users = users
        }) { server, port in
            try await body(server, port, storage, users)
        }
    }

    @Test func aUserWhoConnectsIsRegisteredWithTheEmailsTheirCertificateVouchesFor() async throws {
        try await withDirectoryServer { _, port, storage, _ in
            let (alice, ack) = try await TestClient.conformant(port: port, user: "alice-mail")
            #expect(ack.userRecordName == "_alice")
            try await eventually("alice is registered") { try await storage.user("_alice") != nil }
            let user = try #require(try await storage.user("_alice"))
            #expect(user.emailAddresses == ["alice.work@example.com", "alice@example.com"])
            #expect(user.lastSeenAt != nil)
            #expect(!user.isDisabled)
            await alice.close()
        }
    }

    @Test func aDisabledUsersOpenConnectionsCloseAndNewOnesAreRefused() async throws {
        try await withDirectoryServer { server, port, storage, users in
            let (bob, _) = try await TestClient.conformant(port: port, user: "bob")
            let (alice, _) = try await TestClient.conformant(port: port, user: "alice")
            try await eventually("bob is registered") { try await storage.user("_bob") != nil }
            // What `cirrusd users disable bob` does, then what the server's watch does.
            try await storage.updateUser("_bob", .setDisabled(true), at: SQLiteStorage.systemClock())
            #expect(try await users.refresh().disabledUsers == ["_bob"])
            server.closeConnections(of: "_bob")
            let closed = try await bob.waitForClose()
            #expect(closed?.code == .notAuthenticated, "\(String(describing: closed))")
            // Alice goes on.
            try await alice.expectNothingPending()
            // A new connection of bob's is refused at Hello.
            let again = try await TestClient.connect(port: port, user: "bob")
            try await again.send(Wire.Frame(streamID: 0, kind: .hello(TestClient.hello(maxFrameBytes: 0))))
            let refused = try await again.waitForClose()
            #expect(refused?.code == .notAuthenticated)
            #expect(refused?.message.contains("disabled") == true)
            // Enabled again, he connects.
            try await storage.updateUser("_bob", .setDisabled(false), at: SQLiteStorage.systemClock())
            #expect(try await users.refresh().disabledUsers == [])
            let (back, ack) = try await TestClient.conformant(port: port, user: "bob")
            #expect(ack.userRecordName == "_bob")
            await back.close()
            await alice.close()
        }
    }

    @Test func theDirectoryRefusesMalformedAndConflictingChanges() async throws {
        let storage = try SQLiteStorage.temporary()
        defer { try? storage.destroy() }
        let now = SQLiteStorage.systemClock()
        try await storage.createUser("_alice", at: now)
        try await storage.createUser("_bob", at: now)
        await #expect(throws: StoreError.self) { try await storage.createUser("_alice", at: now) }
        await #expect(throws: StoreError.self) { try await storage.createUser("alice", at: now) }
        await #expect(throws: StoreError.self) { try await storage.updateUser("_nobody", .setDisabled(true), at: now) }
        await #expect(throws: StoreError.self) { try await storage.updateUser("_alice", .addEmail("not an email"), at: now) }
        await #expect(throws: StoreError.self) { try await storage.updateUser("_alice", .addPhone("call me"), at: now) }
        try await storage.updateUser("_alice", .addEmail("Alice@Example.com"), at: now)
        // An address belongs to one user.
        do {
            try await storage.updateUser("_bob", .addEmail("alice@example.com"), at: now)
            Issue.record("bob took alice's address")
        } catch let error as StoreError {
            #expect(error.code == .alreadyExists)
        }
        // A certificate claiming another user's address does not take it either.
        let bob = try await storage.registerUser("_bob", verifiedEmails: ["alice@example.com", "bob@example.com"], at: now)
        #expect(bob.emailAddresses == ["bob@example.com"])
        #expect(try await storage.user("_alice")?.emailAddresses == ["alice@example.com"])
        let alice = try await storage.updateUser("_alice", .addPhone("+1 (555) 123-4567"), at: now)
        #expect(alice.phoneNumbers == ["+15551234567"])
    }

    /// Opens a connection without a certificate that says `Hello` with `token`; its `HelloAck`
    /// or the error it is refused with.
    private func helloWithToken(_ token: String, port: Int) async throws -> (TestClient, HelloAnswer) {
        let client = try await TestClient.connect(port: port, user: nil)
        try await client.send(
            Wire.Frame(streamID: 0, kind: .hello(Wire.Hello(protocolVersion: Wire.protocolVersion, bearerToken: token))))
        let frame = try await client.nextFrame()
        switch frame.kind {
        case .helloAck(let ack): return (client, .accepted(ack))
        case .error(let error): return (client, .refused(error))
        default: throw UnexpectedFrame(frame: frame)
        }
    }

    @Test func aRevokedTokensLiveConnectionClosesAndBadTokensAreRefusedAlike() async throws {
        try await withDirectoryServer { server, port, storage, users in
            let (issued, _) = try await users.issueToken(for: "_bob", label: "test", lifetime: nil)
            let (bob, answer) = try await helloWithToken(issued.token, port: port)
            guard case .accepted(let ack) = answer else {
                Issue.record("bob's token was refused: \(answer)")
                return
            }
            #expect(ack.userRecordName == "_bob")
            let (alice, _) = try await TestClient.conformant(port: port, user: "alice")

            // Wrong secret, unknown ID, malformed: refused alike.
            var wrongSecret = issued.token
            wrongSecret.removeLast()
            wrongSecret.append(issued.token.last == "0" ? "1" : "0")
            let unknownID = BearerToken.generate().token
            var refusals: [String] = []
            for bad in [wrongSecret, unknownID, "cirrus_nope", String(repeating: "x", count: 4096)] {
                let (client, answer) = try await helloWithToken(bad, port: port)
                guard case .refused(let error) = answer else {
                    Issue.record("\(bad.prefix(20)) was accepted")
                    continue
                }
                #expect(error.code == .notAuthenticated)
                refusals.append(error.message)
                await client.close()
            }
            #expect(Set(refusals).count == 1, "\(refusals)")

            // What `cirrusd tokens revoke` does, then what the server's watch does.
            try await storage.revokeToken(issued.id, at: SQLiteStorage.systemClock())
            let revocations = try await users.refresh()
            #expect(revocations.tokenIDs == [issued.id])
            server.closeConnections(usingToken: issued.id)
            let closed = try await bob.waitForClose()
            #expect(closed?.code == .notAuthenticated)
            try await alice.expectNothingPending()
            let (again, refused) = try await helloWithToken(issued.token, port: port)
            guard case .refused(let error) = refused else {
                Issue.record("a revoked token was accepted")
                return
            }
            #expect(error.code == .notAuthenticated)
            await again.close()
            await alice.close()
            #expect(try await storage.tokens(of: "_bob").first?.revokedAt != nil)
            await #expect(throws: StoreError.self) { try await storage.revokeToken("0000000000000000", at: SQLiteStorage.systemClock()) }
        }
    }

    @Test func endedTokensArePrunedAfterTheirRetentionAndActiveOnesKept() async throws {
        let storage = try SQLiteStorage.temporary()
        defer { try? storage.destroy() }
        func at(_ seconds: Int64) -> Wire.Timestamp { Wire.Timestamp(seconds: seconds, nanos: 0) }
        func token(_ id: String, expires: Int64?) -> StoredToken {
            StoredToken(id: id, hash: [1], user: "_alice", label: id, createdAt: at(100), expiresAt: expires.map(at))
        }
        try await storage.saveToken(token("expired-long-ago", expires: 200))
        try await storage.saveToken(token("expired-lately", expires: 900))
        try await storage.saveToken(token("revoked-long-ago", expires: nil))
        try await storage.saveToken(token("never-expires", expires: nil))
        try await storage.revokeToken("revoked-long-ago", at: at(300))
        await #expect(throws: StoreError.self) { try await storage.saveToken(token("never-expires", expires: nil)) }
        #expect(Set(try await storage.activeTokens(at: at(500)).map(\.id)) == ["never-expires", "expired-lately"])
        #expect(try await storage.pruneTokens(endedBefore: at(500)) == 2)
        #expect(Set(try await storage.tokens(of: "_alice").map(\.id)) == ["expired-lately", "never-expires"])
        #expect(try await storage.activeTokens(at: at(1000)).map(\.id) == ["never-expires"])
    }
}
