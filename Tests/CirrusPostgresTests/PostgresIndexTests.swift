import CirrusStore
import CirrusTestSupport
import CirrusWire
import Logging
import PostgresNIO
import Testing

@testable import CirrusPostgres

/// What queries find records by on PostgreSQL (schema v7): the index rows written with a
/// record, replaced when it is saved again, gone with it, and made by the migration for the
/// records stored before.
@Suite("PostgreSQL record index")
struct PostgresIndexTests {
    private static let at = Wire.Timestamp(seconds: 1_700_000_000, nanos: 250)

    private func note(_ name: String, zone: String = "_defaultZone", _ fields: [Wire.RecordField]) -> Wire.Record {
        Wire.Record(
            recordID: Wire.RecordID(recordName: name, zoneID: zoneID(zone)), recordType: "Note", fields: fields)
    }

    private func field(_ key: String, _ kind: Wire.FieldValue.Kind) -> Wire.RecordField {
        Wire.RecordField(key: key, value: Wire.FieldValue(kind: kind))
    }

    /// The index rows of `database`, one line each: name|key|index|kind|int|real|real2|bytes (hex).
    private func indexRows(_ database: String) throws -> [String] {
        let rows = try TemporaryPostgres.shared().psql(
            """
            SELECT record_name, key, list_index, kind, int_value, real_value, real_value2, encode(bytes_value, 'hex')
            FROM record_values ORDER BY record_name, key, list_index
            """,
            database: database)
        return lines(of: rows)
    }

    private func hex(_ text: String) -> String { text.utf8.map { String(format: "%02x", $0) }.joined() }

    @Test func aSaveWritesOneRowPerValueAndTheSystemFields() async throws {
        let url = try newDatabase()
        let storage = try await PostgresStorage(url: url, maximumConnections: 2, clock: { Self.at })
        let reference = Wire.Reference(recordID: Wire.RecordID(recordName: "b", zoneID: zoneID("_defaultZone")))
        let saved = try await storage.modifyRecords(
            RecordModification(saving: [
                note(
                    "a",
                    [
                        field("title", .stringValue("nul\u{0}inside")), field("count", .int64Value(7)),
                        field("ratio", .doubleValue(0.5)), field("tags", .stringList(Wire.StringList(values: ["p", "q"]))),
                        field("none", .int64List(Wire.Int64List(values: []))),
                        field("at", .locationValue(Wire.Location(latitude: 1.5, longitude: -2.5))),
                        field("ref", .referenceValue(reference)), field("raw", .bytesValue([0, 255])),
                        field("when", .dateValue(Wire.Timestamp(seconds: 2, nanos: 3))),
                    ]),
                note("b", [field("title", .stringValue("b"))]),
            ]),
            in: alice, by: "_alice")
        #expect(!saved.hasFailures)
        #expect(
            try indexRows(url.database) == [
                "a|at|-1|7||1.5|-2.5|", "a|count|-1|2|7|||", "a|none|-1|18||||",
                "a|ratio|-1|3||0.5||", "a|raw|-1|4||||00ff", "a|ref|-1|6||||\(hex("b"))",
                "a|tags|0|17||||\(hex("p"))", "a|tags|1|17||||\(hex("q"))",
                "a|title|-1|1||||\(hex("nul\u{0}inside"))", "a|when|-1|5|2000000003|||",
                "b|title|-1|1||||\(hex("b"))",
            ])
        let system = try TemporaryPostgres.shared().psql(
            "SELECT name, created_ns, modified_ns, modifier FROM records ORDER BY name", database: url.database)
        let ns = RecordCodec.nanoseconds(Self.at)
        #expect(lines(of: system) == ["a|\(ns)|\(ns)|_alice", "b|\(ns)|\(ns)|_alice"])

        // Saved again with other fields: the rows are the new record's only.
        let again = note("a", [field("count", .int64Value(8)), field("tags", .stringList(Wire.StringList(values: ["r"])))])
        let replaced = try await storage.modifyRecords(
            RecordModification(saving: [again], savePolicy: .allKeys), in: alice, by: "_alice")
        #expect(!replaced.hasFailures)
        #expect(
            try indexRows(url.database) == [
                "a|count|-1|2|8|||", "a|tags|0|17||||\(hex("r"))", "b|title|-1|1||||\(hex("b"))",
            ])

        // Deleted: its rows go with it.
        _ = try await storage.modifyRecords(
            RecordModification(deleting: [Wire.RecordID(recordName: "a", zoneID: zoneID("_defaultZone"))]),
            in: alice, by: "_alice")
        #expect(try indexRows(url.database) == ["b|title|-1|1||||\(hex("b"))"])
        #expect(try await storage.rowCount(of: "record_values") == 1)
        await storage.close()
    }

    @Test func migratingFromVersion6IndexesTheRecordsStoredBefore() async throws {
        let url = try newDatabase()
        let logger = Logger(label: "test")
        let connection = try await PostgresConnection.connect(
            on: PostgresClient.defaultEventLoopGroup.any(), configuration: try url.connectionConfiguration(), id: 1,
            logger: logger)
        try await PostgresStorage.migrate(connection, logger: logger, through: 6)
        let scope = Wire.DatabaseScope.private.rawValue
        try await connection.query(
            "INSERT INTO databases (container, owner, scope, change_seq) VALUES (\(container), '_alice', \(scope), 1)",
            logger: logger)
        try await connection.query(
            "INSERT INTO zones (container, owner, scope, name, db_seq) VALUES (\(container), '_alice', \(scope), '_defaultZone', 1)",
            logger: logger)
        // Records as version 6 stored them: no index, no system-field columns.
        for (i, name) in ["a", "b"].enumerated() {
            var record = note(name, [field("count", .int64Value(Int64(i))), field("title", .stringValue(name))])
            record.creationDate = Wire.Timestamp(seconds: Int64(10 + i))
            record.modificationDate = Wire.Timestamp(seconds: Int64(20 + i))
            record.lastModifiedUserRecordID = ZoneResolution.userRecordID("_bob")
            let data = ByteBuffer(bytes: record.serializedBytes())
            try await connection.query(
                """
                INSERT INTO records (container, owner, scope, zone_id, name, record_type, change_tag, change_seq, creator, data)
                SELECT \(container), '_alice', \(scope), id, \(name), 'Note', 't', \(Int64(i + 1)), '_alice', \(data) FROM zones
                """,
                logger: logger)
        }
        try await connection.close()

        let storage = try await PostgresStorage(url: url, maximumConnections: 2)
        #expect(
            try indexRows(url.database) == [
                "a|count|-1|2|0|||", "a|title|-1|1||||\(hex("a"))", "b|count|-1|2|1|||", "b|title|-1|1||||\(hex("b"))",
            ])
        let system = try TemporaryPostgres.shared().psql(
            "SELECT name, created_ns, modified_ns, modifier FROM records ORDER BY name", database: url.database)
        #expect(
            lines(of: system) == [
                "a|10000000000|20000000000|_bob", "b|11000000000|21000000000|_bob",
            ])
        await storage.close()
    }
}

/// Queries on PostgreSQL beyond the query conformance suite (which runs against this engine in
/// `CirrusStoreTests`): cursors across nodes, and what a page reads.
@Suite("PostgreSQL queries")
struct PostgresQueryTests {
    private func note(_ name: String, _ n: Int64) -> Wire.Record {
        Wire.Record(
            recordID: Wire.RecordID(recordName: name, zoneID: zoneID("_defaultZone")), recordType: "Note",
            fields: [Wire.RecordField(key: "n", value: Wire.FieldValue(kind: .int64Value(n)))])
    }

    private func sortedByN(_ ascending: Bool = true) -> Wire.Query {
        Wire.Query(recordType: "Note", predicate: nil, sortDescriptors: [Wire.QuerySortDescriptor(key: "n", ascending: ascending)])
    }

    @Test func aCursorFromOneNodeContinuesOnAnotherAndNowhereElse() async throws {
        let url = try newDatabase()
        let a = try await PostgresStorage(url: url, maximumConnections: 2)
        let b = try await PostgresStorage(url: url, maximumConnections: 2)
        let records = (0..<9).map { note(String(format: "r%02d", $0), Int64(9 - $0)) }
        #expect(!(try await a.modifyRecords(RecordModification(saving: records), in: alice, by: "_alice")).hasFailures)
        let first = try await a.queryRecords(sortedByN(), in: zoneID("_defaultZone"), of: alice, desiredKeys: nil, limit: 4)
        #expect(first.records.map { $0.recordID?.recordName } == ["r08", "r07", "r06", "r05"])
        let cursor = try #require(first.cursor)
        // Node b reads the next pages, with a change made on node a in between.
        _ = try await a.modifyRecords(
            RecordModification(deleting: [Wire.RecordID(recordName: "r04", zoneID: zoneID("_defaultZone"))]), in: alice,
            by: "_alice")
        let second = try await b.continueQuery(cursor, in: alice, desiredKeys: .sameAsQuery, limit: 4)
        #expect(second.records.map { $0.recordID?.recordName } == ["r03", "r02", "r01", "r00"])
        #expect(second.cursor == nil)
        // Another database, or one bit changed, is refused as unknown on either node.
        await #expect(throws: QueryCursor.unknown) {
            try await b.continueQuery(cursor, in: bob, desiredKeys: .sameAsQuery, limit: 4)
        }
        var altered = cursor
        altered[altered.count / 2] ^= 1
        await #expect(throws: QueryCursor.unknown) {
            try await a.continueQuery(altered, in: alice, desiredKeys: .sameAsQuery, limit: 4)
        }
        await a.close()
        await b.close()
    }

    @Test func aFirstPageInCreationOrderReadsAboutAPageOfAZone() async throws {
        try await withPostgresStore { storage in
            let records = (0..<300).map { note(String(format: "r%03d", $0), Int64($0)) }
            #expect(!(try await storage.modifyRecords(RecordModification(saving: records), in: alice, by: "_alice")).hasFailures)
            let query = Wire.Query(
                recordType: "Note", predicate: nil, sortDescriptors: [Wire.QuerySortDescriptor(key: "creationDate", ascending: false)])
            let page = try await storage.queryRecords(query, in: zoneID("_defaultZone"), of: alice, desiredKeys: nil, limit: 10)
            #expect(page.records.count == 10)
            #expect(page.cursor != nil)
            // The page and the one more match that shows another follows; a batch at most.
            #expect(page.recordsExamined <= 11)
            let unsorted = try await storage.queryRecords(
                Wire.Query(recordType: "Note", predicate: nil, sortDescriptors: []),
                in: zoneID("_defaultZone"), of: alice, desiredKeys: nil, limit: 10)
            #expect(unsorted.records.map { $0.recordID?.recordName } == (0..<10).map { String(format: "r%03d", $0) })
            #expect(unsorted.recordsExamined <= 11)
        }
    }

    @Test func aComparisonOfAStringFieldReadsItsMatchesNotTheZone() async throws {
        try await withPostgresStore { storage in
            let records = (0..<300).map { i in
                Wire.Record(
                    recordID: Wire.RecordID(recordName: String(format: "r%03d", i), zoneID: zoneID("_defaultZone")),
                    recordType: "Note",
                    fields: [Wire.RecordField(key: "title", value: Wire.FieldValue(kind: .stringValue("t\(i % 100)")))])
            }
            #expect(!(try await storage.modifyRecords(RecordModification(saving: records), in: alice, by: "_alice")).hasFailures)
            let predicate = Wire.QueryPredicate(
                node: .comparison(
                    Wire.ComparisonPredicate(
                        key: "title", comparisonOperator: .equals, value: Wire.FieldValue(kind: .stringValue("t42")))))
            let page = try await storage.queryRecords(
                Wire.Query(recordType: "Note", predicate: predicate, sortDescriptors: []), in: zoneID("_defaultZone"),
                of: alice, desiredKeys: nil, limit: 10)
            #expect(page.records.map { $0.recordID?.recordName } == ["r042", "r142", "r242"])
            #expect(page.recordsExamined == 3)
        }
    }

    @Test func writesKeepTheVersionsTheyReplaceUntilPruned() async throws {
        let at = Wire.Timestamp(seconds: 5_000, nanos: 0)
        let storage = try await PostgresStorage(url: try newDatabase(), maximumConnections: 2, clock: { at })
        let saved = try await storage.modifyRecords(
            RecordModification(saving: [note("a", 1), note("b", 2)]), in: alice, by: "_alice")
        #expect(!saved.hasFailures)
        #expect(try await storage.rowCount(of: "query_preimages") == 0)  // new records replace nothing
        _ = try await storage.modifyRecords(
            RecordModification(saving: [note("a", 3)], savePolicy: .allKeys), in: alice, by: "_alice")
        _ = try await storage.modifyRecords(
            RecordModification(deleting: [Wire.RecordID(recordName: "b", zoneID: zoneID("_defaultZone"))]), in: alice,
            by: "_alice")
        #expect(try await storage.rowCount(of: "query_preimages") == 2)
        #expect(try await storage.pruneQueryCursors(createdBefore: at) == 0)
        #expect(try await storage.pruneQueryCursors(createdBefore: Wire.Timestamp(seconds: 5_001, nanos: 0)) == 2)
        #expect(try await storage.rowCount(of: "query_preimages") == 0)
        await storage.close()
    }

    @Test func aDistanceSortReadsTheRowsOfAPageNotOfTheZone() async throws {
        try await withPostgresStore { storage in
            let records = (0..<300).map { i in
                Wire.Record(
                    recordID: Wire.RecordID(recordName: String(format: "r%03d", i), zoneID: zoneID("_defaultZone")),
                    recordType: "Note",
                    fields: [
                        Wire.RecordField(
                            key: "at",
                            value: Wire.FieldValue(kind: .locationValue(Wire.Location(latitude: Double(i) / 10, longitude: 0))))
                    ])
            }
            #expect(!(try await storage.modifyRecords(RecordModification(saving: records), in: alice, by: "_alice")).hasFailures)
            let byDistance = Wire.Query(
                recordType: "Note", predicate: nil,
                sortDescriptors: [
                    Wire.QuerySortDescriptor(key: "at", ascending: true, relativeLocation: Wire.Location(latitude: 30, longitude: 0))
                ])
            let page = try await storage.queryRecords(byDistance, in: zoneID("_defaultZone"), of: alice, desiredKeys: nil, limit: 5)
            #expect(page.records.map { $0.recordID?.recordName } == ["r299", "r298", "r297", "r296", "r295"])
            // The sort keys of every record, the rows of a batch only: the page and the one more match.
            #expect(page.recordsExamined <= 6)
            let next = try await storage.continueQuery(try #require(page.cursor), in: alice, desiredKeys: .sameAsQuery, limit: 5)
            #expect(next.records.map { $0.recordID?.recordName } == ["r294", "r293", "r292", "r291", "r290"])
        }
    }
}
