import CirrusPostgres
import CirrusStore
import CirrusTestSupport
import Testing

@Suite("PostgreSQL schema")
struct PostgresSchemaTests {
    @Test func nodesOpeningAFreshDatabaseTogetherMigrateItOnce() async throws {
        let url = try newDatabase()
        let storages = try await withThrowingTaskGroup(of: PostgresStorage.self) { group in
            for _ in 0..<3 { group.addTask { try await PostgresStorage(url: url, maximumConnections: 2) } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(storages.count == 3)
        for storage in storages { await storage.close() }
        let server = try TemporaryPostgres.shared()
        let versions = try server.psql("SELECT version FROM cirrus_schema ORDER BY version", database: url.database)
        #expect(lines(of: versions) == allSchemaVersions())
        let tables = try server.psql(
            "SELECT count(*) FROM information_schema.tables WHERE table_name IN ('databases', 'zones')",
            database: url.database)
        #expect(tables.trimmingCharacters(in: .whitespacesAndNewlines) == "2")
    }

    @Test func reopeningKeepsTheData() async throws {
        let url = try newDatabase()
        let first = try await PostgresStorage(url: url)
        _ = try await first.modifyZones(saving: [.init(zoneID: zoneID("Kept"))], deleting: [], in: alice)
        await first.close()
        let second = try await PostgresStorage(url: url)
        #expect(try await second.fetchAllZones(in: alice).map(\.zoneID?.zoneName) == ["_defaultZone", "Kept"])
        await second.close()
    }

    @Test func aSchemaNewerThanThisBuildIsRefused() async throws {
        let url = try newDatabase()
        await (try PostgresStorage(url: url)).close()
        let server = try TemporaryPostgres.shared()
        try server.psql("INSERT INTO cirrus_schema (version) VALUES (\(PostgresStorage.schemaVersion + 1))", database: url.database)
        await #expect {
            try await PostgresStorage(url: url)
        } throws: { error in
            (error as? StoreError)?.code == .storageFailure && "\(error)".contains("newer than this cirrusd")
        }
    }

    @Test func aUnixSocketDirectoryIsAHost() async throws {
        let server = try TemporaryPostgres.shared()
        let tcp = try newDatabase()
        let url = try PostgresURL(
            "postgres://\(TemporaryPostgres.user)@localhost:\(server.port)/\(tcp.database)?host=\(server.directory)")
        #expect(url.host == server.directory)
        let storage = try await PostgresStorage(url: url)
        _ = try await storage.modifyZones(saving: [.init(zoneID: zoneID("OverTheSocket"))], deleting: [], in: alice)
        #expect(try await storage.fetchAllZones(in: alice).count == 2)
        await storage.close()
    }

    @Test func aWrongPasswordIsAClearErrorThatDoesNotQuoteIt() async throws {
        var url = try newDatabase()
        url.password = "not-the-password"
        await #expect {
            try await PostgresStorage(url: url)
        } throws: { error in
            (error as? StoreError)?.code == .storageFailure && !"\(error)".contains("not-the-password")
                && "\(error)".contains("password authentication failed")
        }
    }
}
