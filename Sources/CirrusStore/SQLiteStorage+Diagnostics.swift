import GRDB

/// Introspection for tests and for checking query plans (internal).
extension SQLiteStorage {
    /// The number of rows of one of the store's tables.
    func rowCount(of table: String) async throws -> Int {
        let known = ["databases", "zones", "records", "tombstones", "record_fields", "cascade_references", "assets", "asset_references"]
        guard known.contains(table) else { throw StoreError(.invalidArguments, "unknown table \(table)") }
        return try await read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM \(table)") ?? 0 }
    }

    /// SQLite's plan for `sql`, one line per step (EXPLAIN QUERY PLAN `detail`).
    func queryPlan(_ sql: String) async throws -> [String] {
        try await read { db in
            try Row.fetchAll(db, sql: "EXPLAIN QUERY PLAN " + sql).map { row in row["detail"] as String }
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
