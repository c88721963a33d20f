import CirrusStore
import CirrusTestSupport
import Testing

@testable import CirrusPostgres

/// The server secret nodes on one database share (what seals change tokens and cursors).
@Suite("PostgreSQL server secret")
struct PostgresServerSecretTests {
    @Test func nodesRacingToCreateTheSecretAllGetOneAndAReopenKeepsIt() async throws {
        let url = try newDatabase()
        var secrets: [[UInt8]] = []
        try await withPostgresStore(url) { first in
            try await withPostgresStore(url) { second in
                secrets = try await withThrowingTaskGroup(of: [UInt8].self) { group in
                    for node in [first, second, first, second, first, second] {
                        group.addTask { try await node.loadOrCreateServerSecret() }
                    }
                    return try await group.reduce(into: []) { $0.append($1) }
                }
                #expect(try await first.rowCount(of: "server_secret") == 1)
            }
        }
        let secret = try #require(secrets.first)
        #expect(secret.count == ServerSecretRules.length)
        #expect(Set(secrets).count == 1, "every node got the stored secret")
        #expect(Set(secret).count > 1, "random bytes")

        try await withPostgresStore(url) { reopened in
            let again = try await reopened.loadOrCreateServerSecret()
            #expect(again == secret)
        }
        // Another database has a secret of its own.
        try await withPostgresStore { other in
            let own = try await other.loadOrCreateServerSecret()
            #expect(own != secret)
        }
    }
}
