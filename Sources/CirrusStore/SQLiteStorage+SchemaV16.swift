import GRDB

extension SQLiteStorage {
    /// Schema v16: fields are indexed for queries once a query names them (``FieldIndexing``).
    ///
    /// - `indexed_fields` (zone, record type, key): what saves to the zone index for records of
    ///   the type; `key` is a field name, "" for the full-text index, or "*" for everything;
    ///   `built_through` is NULL once every record is indexed, else the last row ID a build
    ///   reached. It goes with its zone (purged zones cascade; a zone's delete removes it).
    /// - Every zone and type that has records now is marked "*": its records were written with
    ///   every value and their text, and its saves go on writing them.
    static func migrateToV16(_ db: Database) throws {
        try db.execute(sql: """
            CREATE TABLE indexed_fields (
                zone_id INTEGER NOT NULL REFERENCES zones(id) ON DELETE CASCADE,
                record_type TEXT NOT NULL,
                key TEXT NOT NULL,
                built_through INTEGER,
                PRIMARY KEY (zone_id, record_type, key)
            ) WITHOUT ROWID;
            INSERT INTO indexed_fields (zone_id, record_type, key, built_through)
                SELECT DISTINCT zone_id, record_type, '*', NULL FROM records;
            """)
    }
}
