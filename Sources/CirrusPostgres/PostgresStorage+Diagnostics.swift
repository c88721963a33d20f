import CirrusStore
import PostgresNIO

extension PostgresStorage {
    /// How many rows one of the engine's tables holds (for tests and diagnostics).
    ///
    /// - throws: ``StoreError`` `.invalidArguments` for a table this engine does not have.
    package func rowCount(of table: String) async throws -> Int {
        let known = [
            "databases", "zones", "records", "tombstones", "cascade_references", "users", "user_lookup",
            "user_discoverability", "bearer_tokens", "long_lived_operations", "long_lived_events", "server_secret",
            "subscriptions", "notification_feeds", "notifications", "record_values",
            "query_preimages", "shares", "share_participants", "assets", "asset_references", "asset_commits",
            "record_words",
        ]
        guard known.contains(table) else { throw StoreError(.invalidArguments, "unknown table \(table)") }
        let logger = self.logger
        return try await connection { connection in
            let rows = try await connection.query(PostgresQuery(unsafeSQL: "SELECT count(*) FROM \(table)"), logger: logger)
            var count: Int64 = 0
            for try await value in rows.decode(Int64.self) { count = value }
            return Int(count)
        }
    }

    /// How many records have words for full-text search (`record_words`): what the SQLite
    /// engine's `record_text` holds a row for.
    package func recordsWithWords() async throws -> Int {
        let logger = self.logger
        return try await connection { connection in
            let rows = try await connection.query(
                "SELECT count(*) FROM (SELECT DISTINCT container, owner, scope, zone_id, record_name FROM record_words) w",
                logger: logger)
            var count: Int64 = 0
            for try await value in rows.decode(Int64.self) { count = value }
            return Int(count)
        }
    }
}

extension PostgresStorage {
    /// Checks that the storage can serve: a pooled connection answers a statement within the
    /// lease timeout.
    ///
    /// For example, a readiness probe: `try await storage.checkHealth()`.
    ///
    /// - throws: ``StoreError`` `.unavailable` when the server cannot be reached.
    public func checkHealth() async throws {
        let logger = self.logger
        try await connection { connection in
            _ = try await connection.query("SELECT 1", logger: logger).collect()
        }
    }
}
