import CirrusStore
import CirrusTestSupport
import CirrusWire
import Logging
import PostgresNIO
import Synchronization
import Testing

@testable import CirrusPostgres

/// Records on PostgreSQL beyond the storage conformance suite (which runs against this
/// engine in `CirrusStoreTests`): several nodes on one database, the schema migration that
/// brought records, and what the engine refuses because it does not keep it yet.
@Suite("PostgreSQL records")
struct PostgresRecordTests {
    private func note(_ name: String, zone: String = "_defaultZone", _ fields: [Wire.RecordField] = []) -> Wire.Record {
        Wire.Record(
            recordID: Wire.RecordID(recordName: name, zoneID: zoneID(zone)), recordType: "Note", fields: fields)
    }

    private func field(_ key: String, _ kind: Wire.FieldValue.Kind) -> Wire.RecordField {
        Wire.RecordField(key: key, value: Wire.FieldValue(kind: kind))
    }

    /// Every change of `zone` after `since`, paging `limit` at a time as a device does; the
    /// position reached.
    private func changes(
        _ storage: PostgresStorage, in zone: String = "_defaultZone", since: Int64 = 0, limit: Int = 7
    ) async throws -> (records: [Wire.Record], deleted: [RecordTombstone], seq: Int64) {
        var records: [Wire.Record] = []
        var deleted: [RecordTombstone] = []
        var seq = since
        var through: Int64?
        while true {
            let batch = try await storage.recordChanges(
                in: zoneID(zone), of: alice, since: seq, floor: 0, through: through, limit: limit, desiredKeys: nil)
            records += batch.changed
            deleted += batch.deleted
            seq = batch.lastSeq
            through = through ?? batch.headSeq
            if !batch.moreComing { return (records, deleted, seq) }
        }
    }

    @Test func twoNodesSavingIntoOneZoneLeaveNoGapsAndAFollowerMissesNothing() async throws {
        let url = try newDatabase()
        let nodes = [
            try await PostgresStorage(url: url, maximumConnections: 4),
            try await PostgresStorage(url: url, maximumConnections: 4),
        ]
        let writesPerNode = 40
        let writing = Flag()
        // A device following the feed on a third node while the two write: a change committed
        // after a position it read must come after that position, or the device never sees it.
        let follower = try await PostgresStorage(url: url, maximumConnections: 2)
        async let followed: [String] = {
            var seen: [String] = []
            var seq: Int64 = 0
            while true {
                let done = !writing.isSet
                let batch = try await changes(follower, since: seq)
                seen += batch.records.compactMap { $0.recordID?.recordName }
                seq = batch.seq
                if done { return seen }
            }
        }()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (n, node) in nodes.enumerated() {
                for task in 0..<2 {
                    group.addTask {
                        for i in 0..<(writesPerNode / 2) {
                            let record = note("n\(n)t\(task)i\(i)", [field("v", .int64Value(Int64(i)))])
                            let result = try await node.modifyRecords(RecordModification(saving: [record]), in: alice, by: "_alice")
                            #expect(!result.hasFailures)
                        }
                    }
                }
            }
            try await group.waitForAll()
        }
        writing.clear()
        let seen = try await followed
        let total = nodes.count * writesPerNode
        #expect(seen.count == total, "the follower saw every record once")
        #expect(Set(seen).count == total)

        let all = try await changes(nodes[1])
        #expect(all.records.count == total)
        #expect(all.seq == Int64(total))
        // Each save took the zone's next sequence: the change tags name 1 ... total once each.
        let seqs = all.records.compactMap { $0.recordChangeTag.split(separator: "-").last.flatMap { Int64($0, radix: 36) } }
        #expect(seqs == Array(1...Int64(total)))
        // And each write of the zone moved it along the database feed: once per save, or once
        // for the saves of a node that shared statements.
        let feed = try await nodes[0].zoneChanges(in: alice, since: 0, limit: 10)
        #expect(feed.changed == [zoneID("_defaultZone")])
        #expect(feed.headSeq >= 2 && feed.headSeq <= Int64(total), "\(feed.headSeq)")
        for node in nodes { await node.close() }
        await follower.close()
    }

    @Test func migratingFromVersion1KeepsTheZonesAndAddsRecords() async throws {
        let url = try newDatabase()
        let logger = Logger(label: "test")
        let connection = try await PostgresConnection.connect(
            on: PostgresClient.defaultEventLoopGroup.any(), configuration: try url.connectionConfiguration(), id: 1,
            logger: logger)
        try await PostgresStorage.migrate(connection, logger: logger, through: 1)
        // A zone as version 1 stored it.
        try await connection.query(
            "INSERT INTO databases (container, owner, scope, change_seq) VALUES (\(container), '_alice', \(Wire.DatabaseScope.private.rawValue), 2)",
            logger: logger)
        for (name, seq) in [("_defaultZone", 0), ("Notes", 2)] {
            try await connection.query(
                "INSERT INTO zones (container, owner, scope, name, db_seq) VALUES (\(container), '_alice', \(Wire.DatabaseScope.private.rawValue), \(name), \(seq))",
                logger: logger)
        }
        try await connection.close()
        let server = try TemporaryPostgres.shared()
        #expect(try server.psql("SELECT to_regclass('records') IS NULL", database: url.database).hasPrefix("t"))

        let storage = try await PostgresStorage(url: url, maximumConnections: 2)
        let versions = try server.psql("SELECT version FROM cirrus_schema ORDER BY version", database: url.database)
        #expect(lines(of: versions) == allSchemaVersions())
        #expect(try await storage.fetchAllZones(in: alice).map(\.zoneID?.zoneName) == ["_defaultZone", "Notes"])
        let saved = try await storage.modifyRecords(RecordModification(saving: [note("a", zone: "Notes")]), in: alice, by: "_alice")
        #expect(!saved.hasFailures)
        let feed = try await storage.zoneChanges(in: alice, since: 2, limit: 10)
        #expect(feed.changed == [zoneID("Notes")])
        #expect(feed.lastSeq == 3)
        #expect(try await changes(storage, in: "Notes").records.map(\.recordID?.recordName) == ["a"])
        await storage.close()
    }

    @Test func countingATableTheEngineDoesNotHaveIsRefused() async throws {
        try await withPostgresStore { storage in
            do {
                _ = try await storage.rowCount(of: "records; DROP TABLE zones")
                Issue.record("an unknown table was counted")
            } catch {
                #expect((error as? StoreError)?.code == .invalidArguments)
            }
            let zones = try await storage.rowCount(of: "zones")
            #expect(zones == 0)
        }
    }

    @Test func deletingAZoneLeavesNoRowsOfItsRecords() async throws {
        try await withPostgresStore { storage in
            _ = try await storage.modifyZones(saving: [.init(zoneID: zoneID("Z"))], deleting: [], in: alice)
            _ = try await storage.modifyRecords(
                RecordModification(saving: [note("a", zone: "Z"), note("b", zone: "Z")]), in: alice, by: "_alice")
            _ = try await storage.modifyRecords(
                RecordModification(deleting: [Wire.RecordID(recordName: "a", zoneID: zoneID("Z"))]), in: alice, by: "_alice")
            #expect(try await storage.rowCount(of: "records") == 1)
            #expect(try await storage.rowCount(of: "tombstones") == 1)
            _ = try await storage.modifyZones(saving: [], deleting: [zoneID("Z")], in: alice)
            #expect(try await storage.rowCount(of: "records") == 0)
            #expect(try await storage.rowCount(of: "tombstones") == 0)
            // The zone created again starts empty, as a new incarnation.
            _ = try await storage.modifyZones(saving: [.init(zoneID: zoneID("Z"))], deleting: [], in: alice)
            let batch = try await storage.recordChanges(in: zoneID("Z"), of: alice, since: 0, limit: 10, desiredKeys: nil)
            #expect(batch.changed.isEmpty && batch.deleted.isEmpty)
        }
    }
}

/// A flag one task clears and another reads.
private final class Flag: Sendable {
    private let state = Mutex(true)
    var isSet: Bool { state.withLock { $0 } }
    func clear() { state.withLock { $0 = false } }
}
