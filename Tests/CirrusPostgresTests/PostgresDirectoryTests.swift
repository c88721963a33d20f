import CirrusStore
import CirrusTestSupport
import CirrusWire
import Logging
import PostgresNIO
import Testing

@testable import CirrusPostgres

/// The user directory and bearer tokens on PostgreSQL beyond the conformance suite (which runs
/// against this engine in `CirrusStoreTests`): the migration that brought them, how their
/// tables are keyed, and stored bytes that do not decode.
@Suite("PostgreSQL user directory")
struct PostgresDirectoryTests {
    @Test func migratingFromVersion3KeepsTheRecordsAndAddsTheDirectory() async throws {
        let url = try newDatabase()
        let logger = Logger(label: "test")
        let connection = try await PostgresConnection.connect(
            on: PostgresClient.defaultEventLoopGroup.any(), configuration: try url.connectionConfiguration(), id: 1,
            logger: logger)
        try await PostgresStorage.migrate(connection, logger: logger, through: 3)
        try await connection.close()
        let server = try TemporaryPostgres.shared()
        #expect(try server.psql("SELECT to_regclass('users') IS NULL", database: url.database).hasPrefix("t"))
        // A node of version 3 stored a record.
        let before = try await PostgresStorage(url: url, maximumConnections: 2)
        let record = Wire.Record(
            recordID: Wire.RecordID(recordName: "kept", zoneID: zoneID("_defaultZone")), recordType: "Note")
        #expect(!(try await before.modifyRecords(RecordModification(saving: [record]), in: alice, by: "_alice")).hasFailures)
        await before.close()
        // The storage above migrated to the current version on open; the directory's tables came
        // in version 4 and start empty.
        let versions = try server.psql("SELECT version FROM cirrus_schema ORDER BY version", database: url.database)
        #expect(lines(of: versions) == allSchemaVersions())
        #expect(PostgresStorage.schemaVersion >= 4)

        let storage = try await PostgresStorage(url: url, maximumConnections: 2)
        #expect(try await storage.allUsers().isEmpty)
        _ = try await storage.registerUser("_alice", verifiedEmails: ["alice@example.com"], at: Wire.Timestamp(seconds: 1))
        #expect(try await storage.user("_alice")?.emailAddresses == ["alice@example.com"])
        let fetched = try await storage.fetchRecords([try #require(record.recordID)], desiredKeys: nil, in: alice)
        #expect(fetched.first?.value?.recordID?.recordName == "kept")
        await storage.close()
    }

    @Test func discoverabilityIsKeyedByContainerFirstAndLookupValuesByThemselves() async throws {
        let url = try newDatabase()
        await (try PostgresStorage(url: url, maximumConnections: 1)).close()
        let server = try TemporaryPostgres.shared()
        func primaryKey(_ table: String) throws -> String {
            try server.psql(
                """
                SELECT string_agg(a.attname, ',' ORDER BY k.ordinality)
                FROM pg_index i CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, ordinality)
                JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
                WHERE i.indrelid = '\(table)'::regclass AND i.indisprimary
                """, database: url.database
            ).trimmingCharacters(in: .whitespacesAndNewlines)
        }
        #expect(try primaryKey("user_discoverability") == "container,user_name")
        #expect(try primaryKey("user_lookup") == "kind,value")
        #expect(try primaryKey("users") == "name")
        #expect(try primaryKey("bearer_tokens") == "id")
    }

    @Test func aStoredNameThatDoesNotDecodeIsCorruptData() async throws {
        let url = try newDatabase()
        let storage = try await PostgresStorage(url: url, maximumConnections: 2)
        _ = try await storage.createUser("_alice", at: Wire.Timestamp(seconds: 1))
        try TemporaryPostgres.shared().psql(
            "UPDATE users SET name_components = '\\xffffffff' WHERE name = '_alice'", database: url.database)
        let error = await #expect(throws: StoreError.self) { try await storage.user("_alice") }
        #expect(error?.code == .corruptData, "\(String(describing: error))")
        #expect(try await storage.disabledUsers().isEmpty, "the rest of the directory still reads")
        await storage.close()
    }
}
