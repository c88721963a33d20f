import CirrusWire
import Synchronization
import Testing

@testable import CirrusStore

/// Several nodes (or processes) on one storage changing the user directory at once end in the
/// state ``UserStorage`` and ``TokenStorage`` document: one owner per lookup value, one user
/// per name, one token per ID, and `alreadyExists` for every loser that is told.
@Suite("User directory: concurrent writers")
struct DirectoryConcurrencyTests {
    private let contenders = 16

    /// How many calls succeeded and how many failed with which code.
    private final class Tally: Sendable {
        private let counts = Mutex<[String: Int]>([:])
        func add(_ key: String) { counts.withLock { $0[key, default: 0] += 1 } }
        var value: [String: Int] { counts.withLock { $0 } }
    }

    private func record(_ tally: Tally, _ body: () async throws -> Void) async {
        do {
            try await body()
            tally.add("ok")
        } catch let error as StoreError {
            tally.add("\(error.code)")
        } catch {
            tally.add("other: \(error)")
        }
    }

    @Test func manyWritersOnTwoNodesEndWithOneOwnerPerValue() async throws {
        try await withDirectoryStores(nodes: 2) { nodes, engine in
            let now = Wire.Timestamp(seconds: 1_700_000_000, nanos: 0)
            for index in 0..<contenders { _ = try await nodes[0].createUser("_admin\(index)", at: now) }
            let registrations = Tally()
            let creations = Tally()
            let phones = Tally()
            let tokens = Tally()
            await withTaskGroup(of: Void.self) { group in
                for index in 0..<contenders {
                    let node = nodes[index % nodes.count]
                    // The contested addresses in both orders: claiming them must not deadlock.
                    let contested = ["contested-a@example.com", "contested-b@example.com"]
                    let emails = (index % 2 == 0 ? contested : contested.reversed()) + ["u\(index)@example.com"]
                    group.addTask {
                        await record(registrations) {
                            _ = try await node.registerUser("_u\(index)", verifiedEmails: emails, at: now)
                            _ = try await node.registerUser("_same", verifiedEmails: ["same@example.com"], at: now)
                        }
                    }
                    group.addTask { await record(creations) { _ = try await node.createUser("_created", at: now) } }
                    group.addTask {
                        await record(phones) {
                            _ = try await node.updateUser("_admin\(index)", .addPhone("+1 555 0100 999"), at: now)
                        }
                    }
                    group.addTask {
                        await record(tokens) {
                            try await node.saveToken(
                                StoredToken(
                                    id: "contested", hash: [UInt8(index)], user: "_holder\(index)", label: "\(index)",
                                    createdAt: now))
                        }
                    }
                }
            }
            #expect(registrations.value == ["ok": contenders], "\(engine): registering never fails")
            #expect(creations.value == ["ok": 1, "alreadyExists": contenders - 1], "\(engine)")
            #expect(phones.value == ["ok": 1, "alreadyExists": contenders - 1], "\(engine)")
            #expect(tokens.value == ["ok": 1, "alreadyExists": contenders - 1], "\(engine)")

            for node in nodes {
                let users = try await node.allUsers()
                for value in ["contested-a@example.com", "contested-b@example.com", "same@example.com"] {
                    #expect(users.filter { $0.emailAddresses.contains(value) }.count == 1, "\(engine): \(value)")
                }
                #expect(users.filter { $0.phoneNumbers == ["+15550100999"] }.count == 1, "\(engine)")
                for index in 0..<contenders {
                    #expect(users.first { $0.name == "_u\(index)" }?.emailAddresses.contains("u\(index)@example.com") == true)
                }
                #expect(users.filter { $0.name == "_same" }.map(\.emailAddresses) == [["same@example.com"]])
                #expect(users.contains { $0.name == "_created" })
                let saved = try await node.tokens(of: nil)
                #expect(saved.count == 1, "\(engine)")
                let holders = users.filter { $0.name.hasPrefix("_holder") }.map(\.name)
                #expect(holders == saved.map(\.user), "\(engine): only the saved token's user is registered")
            }
        }
    }
}
