import Foundation
import CirrusStore
import CirrusTestSupport
import CirrusWire
import Testing

@testable import CirrusPostgres

/// A new database's tables are analyzed once a node has written enough into them, so a record
/// lookup by name goes through the primary key instead of reading its zone.
@Suite("PostgreSQL: planner statistics of a new database")
struct PostgresColdStatisticsTests {
    private func note(_ name: String) -> Wire.Record {
        Wire.Record(
            recordID: Wire.RecordID(recordName: name, zoneID: zoneID("_defaultZone")), recordType: "Note",
            fields: [Wire.RecordField(key: "v", value: Wire.FieldValue(kind: .int64Value(1)))])
    }

    /// How PostgreSQL plans the lookup of one record by name, as the engine runs it.
    private func lookupPlan(_ server: TemporaryPostgres, database: String) throws -> String {
        try server.psql(
            """
            EXPLAIN SELECT name, data FROM records
            WHERE container = '\(container)' AND owner = '_alice' AND scope = 2 AND zone_id = 1
                AND name = ANY(ARRAY['n-7']::text[])
            """, database: database)
    }

    @Test func theTablesAreAnalyzedOnceANodeHasWrittenEnoughAndLookupsUseThePrimaryKey() async throws {
        let server = try TemporaryPostgres.shared()
        let url = try newDatabase()
        let storage = try await PostgresStorage(url: url, maximumConnections: 4)
        func analyzed() throws -> Bool {
            try server.psql(
                "SELECT count(*) FROM pg_stat_user_tables WHERE relname = 'records' AND last_analyze IS NOT NULL",
                database: url.database
            ).trimmingCharacters(in: .whitespacesAndNewlines) == "1"
        }
        #expect(try analyzed() == false)
        // Autovacuum stays away from this table, so only the engine can analyze it here.
        try server.psql("ALTER TABLE records SET (autovacuum_enabled = false)", database: url.database)
        for batch in 0..<2 {
            let records = (0..<300).map { note("n-\(batch * 300 + $0)") }
            let result = try await storage.modifyRecords(RecordModification(saving: records), in: alice, by: "_alice")
            #expect(!result.hasFailures)
        }
        try await eventually(timeout: .seconds(120), "the records table is analyzed", every: .milliseconds(200)) {
            (try? analyzed()) == true
        }
        let plan = try lookupPlan(server, database: url.database)
        #expect(plan.contains("records_pkey"), "\(plan)")
        // Once only: an analysis already made is not made again.
        let statistics = PostgresColdStatistics(client: storage.client, leaseTimeout: .seconds(10), logger: storage.logger)
        #expect(await statistics.analyzeNeverAnalyzed().contains("records") == false)
        await storage.close()
    }
}
