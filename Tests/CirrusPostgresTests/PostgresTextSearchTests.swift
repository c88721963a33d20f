import CirrusStore
import CirrusTestSupport
import CirrusWire
import Logging
import PostgresNIO
import Testing

@testable import CirrusPostgres

/// What full-text search finds records by on PostgreSQL (schema v10, `record_words`): the
/// words of a record written with it, replaced when it is saved again, gone with it, made by
/// the migration for the records stored before, and what a search reads. (What searches and
/// distance sorts return is the query conformance suite's, run against both engines in
/// `CirrusStoreTests`.)
@Suite("PostgreSQL full-text search")
struct PostgresTextSearchTests {
    private func note(_ name: String, _ fields: [(String, Wire.FieldValue.Kind)]) -> Wire.Record {
        Wire.Record(
            recordID: Wire.RecordID(recordName: name, zoneID: zoneID("_defaultZone")), recordType: "Note",
            fields: fields.map { Wire.RecordField(key: $0.0, value: Wire.FieldValue(kind: $0.1)) })
    }

    /// The words of `database`, one line each: name|word.
    private func words(_ database: String) throws -> [String] {
        let rows = try TemporaryPostgres.shared().psql(
            "SELECT record_name, word FROM record_words ORDER BY record_name, word", database: database)
        return lines(of: rows)
    }

    private func search(_ storage: PostgresStorage, _ text: String) async throws -> QueryPage {
        let query = Wire.Query(
            recordType: "Note",
            predicate: Wire.QueryPredicate(node: .textSearch(Wire.TextSearchPredicate(text: text))), sortDescriptors: [])
        return try await storage.queryRecords(query, in: zoneID("_defaultZone"), of: alice, desiredKeys: nil, limit: 100)
    }

    @Test func aSaveWritesTheWordsOfItsStringsFoldedAndASaveAgainReplacesThem() async throws {
        let url = try newDatabase()
        try await withPostgresStore(url) { storage in
            let saved = try await storage.modifyRecords(
                RecordModification(saving: [
                    note(
                        "a",
                        [
                            ("title", .stringValue("Crème Brûlée, crème!")), ("tags", .stringList(Wire.StringList(values: ["FRENCH"]))),
                            ("count", .int64Value(42)), ("ref", .bytesValue(Array("bytes".utf8))),
                        ]),
                    note("b", [("count", .int64Value(1))]),
                ]),
                in: alice, by: "_alice")
            #expect(!saved.hasFailures)
            #expect(try words(url.database) == ["a|brulee", "a|creme", "a|french"])
            #expect(try await storage.recordsWithWords() == 1)

            let again = note("a", [("title", .stringValue("crème fraîche")), ("notes", .stringValue("Zoë"))])
            let replaced = try await storage.modifyRecords(
                RecordModification(saving: [again], savePolicy: .allKeys), in: alice, by: "_alice")
            #expect(!replaced.hasFailures)
            #expect(try words(url.database) == ["a|creme", "a|fraiche", "a|zoe"])

            _ = try await storage.modifyRecords(
                RecordModification(deleting: [Wire.RecordID(recordName: "a", zoneID: zoneID("_defaultZone"))]),
                in: alice, by: "_alice")
            #expect(try words(url.database) == [])
            #expect(try await storage.rowCount(of: "record_words") == 0)
        }
    }

    @Test func aSearchReadsTheRecordsHoldingItsWordsNotTheZone() async throws {
        try await withPostgresStore { storage in
            let records = (0..<300).map { i in
                note(String(format: "r%03d", i), [("title", .stringValue(i % 100 == 7 ? "a rare Wörd" : "common words \(i)"))])
            }
            #expect(!(try await storage.modifyRecords(RecordModification(saving: records), in: alice, by: "_alice")).hasFailures)
            let page = try await search(storage, "WORD rare")
            #expect(page.records.map { $0.recordID?.recordName } == ["r007", "r107", "r207"])
            #expect(page.recordsExamined == 3)
            let none = try await search(storage, "rare absent")
            #expect(none.records.isEmpty)
            #expect(none.recordsExamined == 0)
        }
    }

    @Test func migratingFromTheVersionBeforeGivesTheRecordsStoredBeforeTheirWords() async throws {
        let url = try newDatabase()
        let logger = Logger(label: "test")
        let connection = try await PostgresConnection.connect(
            on: PostgresClient.defaultEventLoopGroup.any(), configuration: try url.connectionConfiguration(), id: 1,
            logger: logger)
        #expect(PostgresStorage.recordWordsVersion > 7)
        try await PostgresStorage.migrate(connection, logger: logger, through: PostgresStorage.recordWordsVersion - 1)
        let scope = Wire.DatabaseScope.private.rawValue
        try await connection.query(
            "INSERT INTO databases (container, owner, scope, change_seq) VALUES (\(container), '_alice', \(scope), 1)",
            logger: logger)
        try await connection.query(
            """
            INSERT INTO zones (container, owner, scope, name, db_seq, change_seq)
            VALUES (\(container), '_alice', \(scope), '_defaultZone', 1, 3)
            """,
            logger: logger)
        // Records as the version before stored them: no words.
        for (i, (name, title)) in [("a", "Tarte Tatin"), ("b", "Crème brûlée"), ("c", "")].enumerated() {
            let record = note(name, [("title", .stringValue(title))])
            let data = ByteBuffer(bytes: record.serializedBytes())
            try await connection.query(
                """
                INSERT INTO records (container, owner, scope, zone_id, name, record_type, change_tag, change_seq, creator, data)
                SELECT \(container), '_alice', \(scope), id, \(name), 'Note', 't', \(Int64(i + 1)), '_alice', \(data) FROM zones
                """,
                logger: logger)
        }
        try await connection.close()

        try await withPostgresStore(url) { storage async throws in
            #expect(try words(url.database) == ["a|tarte", "a|tatin", "b|brulee", "b|creme"])
            #expect(try await search(storage, "CREME").records.map { $0.recordID?.recordName } == ["b"])
        }
    }
}
