@testable import CirrusServer
import CirrusStore
import CirrusWire
import Foundation
import Testing

/// The user directory on a real server: SQLite storage, mutual TLS on loopback, raw frames.
@Suite("User directory: registration, disabled users")
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
            #expect(try await users.refresh() == ["_bob"])
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
            #expect(try await users.refresh() == [])
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
}
