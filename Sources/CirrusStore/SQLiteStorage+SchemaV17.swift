import GRDB

extension SQLiteStorage {
    /// Schema v17: the record's own columns are indexed once a query needs them
    /// (``FieldIndexing/system``).
    ///
    /// - `records.sys_indexed`: 1 when the row is in `records_by_type`, `records_by_created`,
    ///   `records_by_modified` and `records_by_creator`, which become partial indexes of those
    ///   rows. Rows written before take 1 (the column's default; adding it rewrites nothing), so
    ///   every index keeps what it had.
    /// - Every zone and type that has records now is marked ``FieldIndexing/system``: its
    ///   records were written with those columns indexed, and its saves go on so.
    static func migrateToV17(_ db: Database) throws {
        try db.execute(
            sql: """
                ALTER TABLE records ADD COLUMN sys_indexed INTEGER NOT NULL DEFAULT 1;
                DROP INDEX records_by_type;
                DROP INDEX records_by_creator;
                DROP INDEX records_by_created;
                DROP INDEX records_by_modified;
                CREATE INDEX records_by_type ON records(zone_id, record_type) WHERE sys_indexed = 1;
                CREATE INDEX records_by_creator ON records(zone_id, record_type, creator) WHERE sys_indexed = 1;
                CREATE INDEX records_by_created ON records(zone_id, record_type, created_ns) WHERE sys_indexed = 1;
                CREATE INDEX records_by_modified ON records(zone_id, record_type, modified_ns) WHERE sys_indexed = 1;
                """)
        try db.execute(
            sql: """
                INSERT OR IGNORE INTO indexed_fields (zone_id, record_type, key, built_through)
                    SELECT DISTINCT zone_id, record_type, ?, NULL FROM records
                """,
            arguments: [FieldIndexing.system])
    }
}
