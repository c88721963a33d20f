import CirrusWire
import GRDB

/// Introspection for tests and for checking query plans (internal).
extension SQLiteStorage {
    /// The number of rows of one of the store's tables.
    func rowCount(of table: String) async throws -> Int {
        let known = [
            "databases", "zones", "records", "tombstones", "record_values", "cascade_references", "assets",
            "asset_references", "record_text", "query_preimages", "store_secrets", "shares", "share_participants",
            "indexed_fields",
        ]
        guard known.contains(table) else { throw StoreError(.invalidArguments, "unknown table \(table)") }
        return try await read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM \(table)") ?? 0 }
    }

    /// SQLite's plan for `sql`, one line per step (EXPLAIN QUERY PLAN `detail`).
    func queryPlan(_ sql: String) async throws -> [String] {
        try await read { db in
            try Row.fetchAll(db, sql: "EXPLAIN QUERY PLAN " + sql).map { row in row["detail"] as String }
        }
    }

    /// SQLite's plan for the statement listing a query's candidates, with its
    /// arguments bound; [] when the query needs no statement (nothing can match).
    func queryPlan(
        for query: Wire.Query, in zone: Wire.RecordZoneID, of database: DatabaseKey, pageLimit: Int? = nil
    ) async throws -> [String] {
        let compiled = try QueryValidation.compile(query)
        // The fields a query names are indexed before it reads, as `queryRecords` does.
        let needs = FieldIndexing.Needs(compiled)
        let missing = try await read { db -> (Int64, FieldIndexing.Needs)? in
            guard let databaseID = try StoreRows.databaseID(db, database),
                let zone = try StoreRows.liveZone(db, databaseID, zone.zoneName),
                let missing = try FieldIndexing.missing(db, zoneID: zone.id, recordType: compiled.recordType, needs)
            else { return nil }
            return (zone.id, missing)
        }
        if let (zoneID, missing) = missing { try await buildIndex(missing, zoneID: zoneID, recordType: compiled.recordType) }
        return try await read { db in
            guard let databaseID = try StoreRows.databaseID(db, database),
                let zone = try StoreRows.liveZone(db, databaseID, zone.zoneName),
                let statement = try QueryPlanner(db: db, query: compiled, zoneID: zone.id, pageLimit: pageLimit)
                    .candidates(upTo: Int64.max, after: nil)
            else { return [] }
            return try Row.fetchAll(db, sql: "EXPLAIN QUERY PLAN " + statement.sql, arguments: statement.statementArguments)
                .map { row in row["detail"] as String }
        }
    }

    /// The writer connection's `PRAGMA synchronous` (2 = FULL) and journal mode.
    func durabilitySettings() async throws -> (synchronous: Int, journalMode: String) {
        try await pool.writeWithoutTransaction { db in
            (try Int.fetchOne(db, sql: "PRAGMA synchronous") ?? -1,
             try String.fetchOne(db, sql: "PRAGMA journal_mode") ?? "")
        }
    }
}
