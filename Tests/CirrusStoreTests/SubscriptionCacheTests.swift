import CirrusWire
import Foundation
import GRDB
import Testing

@testable import CirrusStore

/// Writes reuse the subscriptions they compiled while the database's
/// `subscriptions_generation` stays the same (``SubscriptionCache``); every
/// change to the subscriptions, committed or rolled back, is seen by the next write.
@Suite("Compiled subscriptions cached per database")
struct SubscriptionCacheTests {
    private func generation(_ storage: SQLiteStorage) async throws -> Int64? {
        try await storage.read { db in
            try Int64.fetchOne(
                db, sql: "SELECT subscriptions_generation FROM databases WHERE container = ? AND scope = ? AND owner = ?",
                arguments: [alice.container, alice.scope.rawValue, alice.owner])
        }
    }

    @Test func everySubscriptionChangeIsSeenByTheNextWrite() async throws {
        try await withSQLiteStore { storage, _ in
            // The first writes compile an empty set and keep it.
            try await storage.saveAll([note("a", [])])
            let empty = try await generation(storage)
            try await storage.saveAll([note("b", [])])
            #expect(try await storage.notifications().isEmpty)

            try await storage.subscribe([S.query("q")])
            let subscribed = try await generation(storage)
            #expect(subscribed != empty)
            try await storage.saveAll([note("c", [])])
            #expect(try await storage.notifications().map(\.summary) == ["q:created:c"])

            // Replacing it with one that never fires on creation.
            try await storage.subscribe([S.query("q", creation: false)])
            #expect(try await generation(storage) != subscribed)
            try await storage.saveAll([note("d", [])])
            #expect(try await storage.notifications().map(\.summary) == ["q:created:c"])

            // Deleted: nothing fires any more.
            _ = try await storage.modifySubscriptions(saving: [], deleting: ["q"], in: alice, by: "_alice")
            let e = try await storage.saveAll([note("e", [])])
            try await storage.saveAll(e)
            #expect(try await storage.notifications().map(\.summary) == ["q:created:c"])
        }
    }

    @Test func aSubscriptionDeletedByFiringOnceIsNotKeptCompiled() async throws {
        try await withSQLiteStore { storage, _ in
            try await storage.subscribe([S.query("once", once: true)])
            try await storage.saveAll([note("a", [])])
            try await storage.saveAll([note("b", [])])
            #expect(try await storage.notifications().map(\.summary) == ["once:created:a"])
        }
    }

    @Test func aRolledBackSubscriptionChangeLeavesNothingBehind() async throws {
        try await withSQLiteStore { storage, _ in
            try await storage.saveAll([note("a", [])])
            let databaseID = try #require(try await storage.read { db in try StoreRows.databaseID(db, alice) })
            let cache = storage.subscriptionCache
            let body = Data(S.database("ghost").serializedBytes())
            // A transaction saves a subscription, compiles the set holding it, and rolls back.
            await #expect(throws: StoreError.self) {
                try await storage.write(weight: 1) { db in
                    try db.execute(
                        sql: """
                            INSERT INTO subscriptions (database_id, owner, subscription_id, kind, record_type, zone_name,
                                body, created_ns, position)
                            VALUES (?, '_alice', 'ghost', 3, '', NULL, ?, 0, 1)
                            """,
                        arguments: [databaseID, body])
                    #expect(try cache.subscriptions(db, databaseID: databaseID).entries.count == 1)
                    throw StoreError(.invalidArguments, "rolled back on purpose")
                }
            }
            let after = try await storage.write(weight: 1) { db in
                try cache.subscriptions(db, databaseID: databaseID).entries.count
            }
            #expect(after == 0)
            try await storage.saveAll([note("b", [])])
            #expect(try await storage.notifications().isEmpty)
        }
    }
}
