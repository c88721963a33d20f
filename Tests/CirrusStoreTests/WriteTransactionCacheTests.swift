import CirrusWire
import Dispatch
import Foundation
import Synchronization
import Testing

@testable import CirrusStore
import CirrusTestSupport

/// Record writes of one group-commit transaction share database and zone rows and change
/// sequences (``WriteTransactionCache``): what other jobs of the transaction change, and what
/// a job that fails leaves, must never reach them.
@Suite("Group commit: what the record writes of one transaction share")
struct WriteTransactionCacheTests {
    struct Boom: Error {}

    /// Runs `jobs` in one transaction, in this order: a first write holds the writer until
    /// every job is queued behind it. Each job's outcome, in order.
    private func inOneTransaction(
        _ storage: SQLiteStorage, _ jobs: [@Sendable () async throws -> Void]
    ) async throws -> [Result<Void, any Error>] {
        let gate = DispatchSemaphore(value: 0)
        let holding = Atomic(false)
        let blocker = Task { try await storage.write(weight: 1) { _ in holding.store(true, ordering: .sequentiallyConsistent); gate.wait() } }
        // Never leave the writer held (a failed wait would hang the store's close).
        var released = false
        defer { if !released { gate.signal() } }
        try await eventually(timeout: .seconds(60)) { holding.load(ordering: .sequentiallyConsistent) }
        var tasks: [Task<Void, any Error>] = []
        for (i, job) in jobs.enumerated() {
            tasks.append(Task { try await job() })
            try await eventually(timeout: .seconds(60)) { storage.writer.pendingCount == i + 1 }
        }
        gate.signal()
        released = true
        try await blocker.value
        var outcomes: [Result<Void, any Error>] = []
        for task in tasks { outcomes.append(await task.result) }
        return outcomes
    }

    @Test func aZoneDeletedAndCreatedAgainBetweenTwoSavesIsTheNewZone() async throws {
        try await withSQLiteStore { storage, _ in
            try await storage.createZone("Z")
            let outcomes = try await inOneTransaction(storage, [
                { try await storage.saveAll([note("r1", zone: "Z")]) },
                { _ = try await storage.modifyZones(saving: [], deleting: [zoneID("Z")], in: alice) },
                { try await storage.createZone("Z") },
                { try await storage.saveAll([note("r2", zone: "Z")]) },
            ])
            for outcome in outcomes { try outcome.get() }
            #expect(try await storage.fetch(recordID("r2", zone: "Z")).value != nil)
            #expect(try await storage.fetch(recordID("r1", zone: "Z")).failure?.code == .unknownItem)
            let changes = try await storage.recordChanges(in: zoneID("Z"), of: alice, since: 0, limit: 10, desiredKeys: nil)
            #expect(changes.changed.map { $0.recordID?.recordName } == ["r2"])
            #expect(changes.lastSeq == 1)
        }
    }

    @Test func aFailingRecordWriteLeavesNoSequenceBehind() async throws {
        try await withSQLiteStore { storage, _ in
            try await storage.createZone("Y")
            let databaseID = try #require(try await storage.read { db in try StoreRows.databaseID(db, alice) })
            let cache = storage.writer.transactionCache
            let outcomes = try await inOneTransaction(storage, [
                { try await storage.saveAll([note("r1")]) },
                {
                    // Takes a sequence of zone Y and marks it changed, then fails.
                    try await storage.write(weight: 1, sharesCache: true) { db in
                        guard let zone = try cache.liveZone(db, databaseID, "Y") else { throw StoreError(.zoneNotFound, "Y") }
                        _ = try cache.nextSeq(db, zone.id)
                        cache.touch(zone.id, of: databaseID)
                        throw Boom()
                    }
                },
                { try await storage.saveAll([note("r2")]) },
            ])
            #expect(throws: StoreError.self) { try outcomes[1].get() }
            try outcomes[0].get()
            try outcomes[2].get()
            let home = try await storage.recordChanges(in: zoneID("_defaultZone"), of: alice, since: 0, limit: 10, desiredKeys: nil)
            #expect(home.changed.map { $0.recordID?.recordName } == ["r1", "r2"])
            #expect(home.lastSeq == 2)
            let untouched = try await storage.recordChanges(in: zoneID("Y"), of: alice, since: 0, limit: 10, desiredKeys: nil)
            #expect(untouched.headSeq == 0)
            // Only the default zone moved in the database's feed after Y's creation.
            let feed = try await storage.zoneChanges(in: alice, since: 0, limit: 10)
            #expect(feed.entries.last?.zoneID.zoneName == "_defaultZone")
        }
    }

    @Test func manySavesOfOneTransactionTakeConsecutiveSequences() async throws {
        try await withSQLiteStore { storage, _ in
            let outcomes = try await inOneTransaction(
                storage, (0..<20).map { i in { try await storage.saveAll([note("n\(i)")]) } })
            for outcome in outcomes { try outcome.get() }
            let changes = try await storage.recordChanges(in: zoneID("_defaultZone"), of: alice, since: 0, limit: 100, desiredKeys: nil)
            #expect(changes.changed.map { $0.recordID?.recordName ?? "" } == (0..<20).map { "n\($0)" })
            #expect(changes.lastSeq == 20)
            #expect(changes.headSeq == 20)
        }
    }

    /// A zone's saves skip looking for tombstones while the transaction knows it holds none
    /// (``WriteTransactionCache/mayHoldTombstones(_:zoneID:)``): a delete later in the same
    /// transaction must end that, or the name saved again would stay deleted in the feed.
    @Test func aRecordDeletedAndSavedAgainInOneTransactionLosesItsTombstone() async throws {
        try await withSQLiteStore { storage, _ in
            try await storage.createZone("T")
            try await storage.saveAll([note("back", zone: "T")])
            let outcomes = try await inOneTransaction(storage, [
                // The zone has no tombstone yet: this save learns it.
                { try await storage.saveAll([note("first", zone: "T")]) },
                { _ = try await storage.modifyRecords(RecordModification(deleting: [recordID("back", zone: "T")]), in: alice, by: "_alice") },
                { try await storage.saveAll([note("back", zone: "T", [field("title", .stringValue("again"))])]) },
            ])
            for outcome in outcomes { try outcome.get() }
            let tombstones = try await storage.read { db in
                try Int64.fetchOne(db, sql: "SELECT COUNT(*) FROM tombstones WHERE name = 'back'")
            }
            #expect(tombstones == 0)
            let changes = try await storage.recordChanges(in: zoneID("T"), of: alice, since: 0, limit: 10, desiredKeys: nil)
            #expect(changes.deleted.isEmpty)
            #expect(changes.changed.map { $0.recordID?.recordName } == ["first", "back"])
            #expect(try await storage.fetch(recordID("back", zone: "T")).value != nil)
        }
    }

    /// A zone that holds tombstones from earlier transactions: a save of a deleted name still
    /// supersedes its tombstone, and one of a new name does not touch the others.
    @Test func aSaveInAZoneWithTombstonesSupersedesOnlyItsOwn() async throws {
        try await withSQLiteStore { storage, _ in
            try await storage.createZone("U")
            try await storage.saveAll([note("a", zone: "U"), note("b", zone: "U")])
            _ = try await storage.modifyRecords(
                RecordModification(deleting: [recordID("a", zone: "U"), recordID("b", zone: "U")]), in: alice, by: "_alice")
            try await storage.saveAll([note("a", zone: "U"), note("c", zone: "U")])
            let remaining = try await storage.read { db in
                try String.fetchAll(db, sql: "SELECT name FROM tombstones ORDER BY name")
            }
            #expect(remaining == ["b"])
        }
    }

    /// The subscriptions' generation is read once per transaction: a `firesOnce` subscription
    /// that one save fires (and deletes) fires for no later save of the transaction, and a
    /// subscription saved between two saves (a write of its own, not sharing the cache) fires
    /// for the second.
    @Test func subscriptionChangesInsideATransactionReachItsLaterSaves() async throws {
        try await withSQLiteStore { storage, _ in
            try await storage.subscribe([S.query("once", once: true), S.query("always")])
            let outcomes = try await inOneTransaction(storage, [
                { try await storage.saveAll([note("a", [])]) },
                { try await storage.saveAll([note("b", [])]) },
                { try await storage.subscribe([S.query("later")]) },
                { try await storage.saveAll([note("c", [])]) },
            ])
            for outcome in outcomes { try outcome.get() }
            #expect(try await storage.notifications().map(\.summary) == [
                "once:created:a", "always:created:a", "always:created:b", "always:created:c", "later:created:c",
            ])
        }
    }

    /// Alice's zone Trip shared whole with bob, who accepted and subscribed to his shared
    /// database; then `steps`: save "a" in Trip, delete the share, save "b" in Trip. Bob's
    /// notification feed head afterwards.
    private func bobsFeedAfterTheShareGoes(
        _ run: (SQLiteStorage, [@Sendable () async throws -> Void]) async throws -> Void
    ) async throws -> Int64 {
        var head: Int64 = -1
        try await withSQLiteStore { storage, _ in
            let token = try await storage.zoneShared(with: ["_bob"])
            #expect(try await storage.acceptShare(withToken: token, in: container, by: "_bob") != nil)
            _ = try await storage.modifySubscriptions(
                saving: [Wire.Subscription(subscriptionID: "db", kind: .database(Wire.DatabaseSubscription()))],
                deleting: [], in: DatabaseKey.shared(container: container, user: "_bob"), by: "_bob")
            try await run(storage, [
                { try await storage.saveAll([note("a", zone: "Trip")]) },
                {
                    _ = try await storage.modifyRecords(
                        RecordModification(deleting: [recordID(ShareRules.zoneShareName, zone: "Trip")]), in: alice,
                        by: "_alice")
                },
                { try await storage.saveAll([note("b", zone: "Trip")]) },
            ])
            head = try await storage.notificationFeedHead(NotificationFeedKey(container: container, user: "_bob"))
        }
        return head
    }

    /// What `scenario` leaves when its steps run one by one, each write its own transaction
    /// (what the writes of one transaction must do), and when they run in one transaction.
    private func apartAndTogether<Outcome>(
        _ scenario: ((SQLiteStorage, [@Sendable () async throws -> Void]) async throws -> Void) async throws -> Outcome
    ) async throws -> (apart: Outcome, together: Outcome) {
        let apart = try await scenario { _, steps in
            for step in steps { try await step() }
        }
        let together = try await scenario { storage, steps in
            for outcome in try await inOneTransaction(storage, steps) { try outcome.get() }
        }
        return (apart, together)
    }

    @Test func aShareDeletedInsideATransactionNoLongerReachesItsLaterSaves() async throws {
        let (apart, together) = try await apartAndTogether(bobsFeedAfterTheShareGoes)
        // "a" reached bob while Trip was shared; "b", saved after the share went, must not,
        // though the transaction read Trip as shared before.
        #expect(apart > 0)
        #expect(together == apart)
    }

    /// Alice's zone Trip, not shared; then: save "photo", share Trip whole, delete "photo".
    /// The shares the deleted record was in, as its tombstone keeps them.
    private func sharesHoldingAPhotoDeletedAfterTheZoneWasShared(
        _ run: (SQLiteStorage, [@Sendable () async throws -> Void]) async throws -> Void
    ) async throws -> [String: Set<String>] {
        var holding: [String: Set<String>] = [:]
        try await withSQLiteStore { storage, _ in
            try await storage.createZone("Trip")
            let share = Wire.Record(
                recordID: recordID(ShareRules.zoneShareName, zone: "Trip"), recordType: ShareRules.shareType,
                shareFields: Wire.ShareFields())
            try await run(storage, [
                { try await storage.saveAll([note("photo", zone: "Trip")]) },
                { try await storage.saveAll([share]) },
                {
                    _ = try await storage.modifyRecords(
                        RecordModification(deleting: [recordID("photo", zone: "Trip")]), in: alice, by: "_alice")
                },
            ])
            holding = try await storage.sharesOfDeletedRecords(["photo"], inZone: "Trip", of: "_alice", in: container)
        }
        return holding
    }

    @Test func aShareSavedInsideATransactionHoldsItsLaterDeletions() async throws {
        let (apart, together) = try await apartAndTogether(sharesHoldingAPhotoDeletedAfterTheZoneWasShared)
        // The transaction read Trip as not shared at the first save; the deletion comes after
        // the share and must find the record in it.
        #expect(apart == ["photo": [ShareRules.zoneShareName]])
        #expect(together == apart)
    }

    /// A record write's row buffers are lent by the cache and come back empty with their room,
    /// unless that room is larger than ``WriteTransactionCache/rowBufferRetainedBytes``; rows
    /// written from reused buffers read back as they were saved.
    @Test func rowBuffersComeBackEmptyWithTheirRoomUnlessTheyGrewLarge() async throws {
        try await withSQLiteStore { storage, _ in
            let cache = storage.writer.transactionCache
            let long = String(repeating: "é", count: 20)
            _ = try await storage.saveAll([note("a", [field("title", .stringValue(long))])])
            var kept = cache.borrowRowBuffers()
            #expect(kept.bytes.isEmpty && kept.bytes.capacity > 0)
            #expect(kept.texts.capacity > 0)
            cache.returnRowBuffers(kept)

            _ = try await storage.saveAll([note("b", [field("title", .stringValue("short"))])])
            let huge = String(repeating: "x", count: WriteTransactionCache.rowBufferRetainedBytes * 2)
            _ = try await storage.saveAll([note("c", [field("title", .stringValue(huge))])])
            kept = cache.borrowRowBuffers()
            #expect(kept.bytes.capacity == 0)
            cache.returnRowBuffers(kept)

            _ = try await storage.saveAll([note("d", [field("title", .stringValue("after"))])])
            for (name, title) in [("a", long), ("b", "short"), ("c", huge), ("d", "after")] {
                let saved = try #require(try await storage.fetch(recordID(name)).value)
                #expect(saved.value("title") == .stringValue(title))
                #expect(saved.recordID?.recordName == name)
            }
        }
    }
}
