import CirrusPostgres
import CirrusStore
import CirrusTestSupport
import CirrusWire
import Synchronization
import Testing

/// The database (zone) change feed on PostgreSQL, as `ChangeFeedTests` has it for zones.
@Suite("PostgreSQL zone change feed")
struct PostgresZoneFeedTests {
    @Test func theDatabaseFeedReportsZoneCreationsAndDeletionsInOrder() async throws {
        try await withPostgresStore { storage in
            let empty = try await storage.zoneChanges(in: alice, since: 0, limit: 10)
            #expect(empty.entries.isEmpty && empty.lastSeq == 0 && !empty.moreComing)

            _ = try await storage.modifyZones(saving: [.init(zoneID: zoneID("A")), .init(zoneID: zoneID("B"))], deleting: [], in: alice)
            let first = try await storage.zoneChanges(in: alice, since: 0, limit: 10)
            #expect(first.changed == [zoneID("A"), zoneID("B")])
            #expect(first.lastSeq == 2 && first.headSeq == 2)

            _ = try await storage.modifyZones(saving: [], deleting: [zoneID("B")], in: alice)
            let second = try await storage.zoneChanges(in: alice, since: first.lastSeq, limit: 10)
            #expect(second.entries == [ZoneFeedEntry(zoneID: zoneID("B"), wasDeleted: true)])
            #expect(second.lastSeq == 3)

            // Deleted and created again: deleted, then changed, in feed order.
            _ = try await storage.modifyZones(saving: [], deleting: [zoneID("A")], in: alice)
            _ = try await storage.modifyZones(saving: [.init(zoneID: zoneID("A"))], deleting: [], in: alice)
            let third = try await storage.zoneChanges(in: alice, since: second.lastSeq, limit: 10)
            #expect(
                third.entries == [
                    ZoneFeedEntry(zoneID: zoneID("A"), wasDeleted: true), ZoneFeedEntry(zoneID: zoneID("A"), wasDeleted: false),
                ])

            let paged = try await storage.zoneChanges(in: alice, since: 0, limit: 1)
            #expect(paged.moreComing)
            #expect(paged.entries == [ZoneFeedEntry(zoneID: zoneID("B"), wasDeleted: true)])
            #expect(paged.lastSeq == 3)
            let bounded = try await storage.zoneChanges(in: alice, since: 0, floor: 0, through: 3, limit: 10)
            #expect(bounded.lastSeq == 3 && bounded.headSeq == 5 && !bounded.moreComing)
        }
    }

    @Test func badPositionsAreRefused() async throws {
        try await withPostgresStore { storage in
            await #expect(throws: StoreError.self) { try await storage.zoneChanges(in: alice, since: -1, limit: 10) }
            await #expect(throws: StoreError.self) { try await storage.zoneChanges(in: alice, since: 0, limit: 0) }
            await #expect {
                try await storage.zoneChanges(in: alice, since: 3, limit: 10)
            } throws: { ($0 as? StoreError)?.code == .changeTokenExpired }
            _ = try await storage.modifyZones(saving: [.init(zoneID: zoneID("A"))], deleting: [], in: alice)
            await #expect {
                try await storage.zoneChanges(in: alice, since: 2, limit: 10)
            } throws: { ($0 as? StoreError)?.code == .changeTokenExpired }
        }
    }

    @Test func prunedZoneTombstonesExpireOlderSequences() async throws {
        let now = Mutex(Wire.Timestamp(seconds: 1_700_000_000))
        let storage = try await PostgresStorage(url: newDatabase(), clock: { now.withLock { $0 } })
        _ = try await storage.modifyZones(saving: [.init(zoneID: zoneID("A")), .init(zoneID: zoneID("B"))], deleting: [], in: alice)
        _ = try await storage.modifyZones(saving: [], deleting: [zoneID("A")], in: alice)  // seq 3, at …000
        now.withLock { $0 = Wire.Timestamp(seconds: 1_700_000_005) }
        _ = try await storage.modifyZones(saving: [], deleting: [zoneID("B")], in: alice)  // seq 4, at …005
        try await storage.pruneTombstones(deletedBefore: Wire.Timestamp(seconds: 1_700_000_002))

        let fromStart = try await storage.zoneChanges(in: alice, since: 0, limit: 10)
        #expect(fromStart.prunedSeq == 3)
        #expect(fromStart.entries == [ZoneFeedEntry(zoneID: zoneID("B"), wasDeleted: true)])
        await #expect {
            try await storage.zoneChanges(in: alice, since: 1, limit: 10)
        } throws: { ($0 as? StoreError)?.code == .changeTokenExpired }
        // At or after the pruned tombstone, or carrying the floor of a fetch from the start: valid.
        #expect(try await storage.zoneChanges(in: alice, since: 3, limit: 10).deleted == [zoneID("B")])
        #expect(try await storage.zoneChanges(in: alice, since: 1, floor: 3, through: nil, limit: 10).lastSeq == 4)
        await storage.close()
    }

    @Test func twoNodesWritingOneDatabaseLeaveNoGapOrDuplicateInItsFeed() async throws {
        let url = try newDatabase()
        let nodes = [try await PostgresStorage(url: url), try await PostgresStorage(url: url)]
        let perNode = 25
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (index, node) in nodes.enumerated() {
                group.addTask {
                    for number in 0..<perNode {
                        let zone = zoneID("n\(index)-\(number)")
                        _ = try await node.modifyZones(saving: [.init(zoneID: zone)], deleting: [], in: alice)
                        if number.isMultiple(of: 5) {
                            _ = try await node.modifyZones(saving: [], deleting: [zone], in: alice)
                        }
                    }
                }
            }
            try await group.waitForAll()
        }
        // 50 creations and 10 deletions: sequences 1 ... 60, each change reported once.
        var since: Int64 = 0
        var entries: [ZoneFeedEntry] = []
        while true {
            let batch = try await nodes[1].zoneChanges(in: alice, since: since, limit: 7)
            entries += batch.entries
            since = batch.lastSeq
            if !batch.moreComing { break }
        }
        #expect(since == 60)
        #expect(entries.filter(\.wasDeleted).count == 10)
        // A deleted zone's creation is no longer in the feed (its row moved to its deletion).
        #expect(entries.filter { !$0.wasDeleted }.count == 40)
        #expect(Set(entries.map(\.zoneID)).count == 50)
        let server = try TemporaryPostgres.shared()
        let seqs = try server.psql("SELECT db_seq FROM zones WHERE name <> '_defaultZone' ORDER BY db_seq", database: url.database)
        let deletionAndCreationSeqs = seqs.split(separator: "\n").compactMap { Int($0) }
        #expect(deletionAndCreationSeqs.count == 50 && Set(deletionAndCreationSeqs).count == 50)
        for node in nodes { await node.close() }
    }
}
