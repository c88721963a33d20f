import GRDB

extension SQLiteStorage {
    /// The schema, one migration per version; never edit a shipped migration.
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            // One row per (container, scope, owner). change_seq is the database
            // change sequence over its zones; zone tombstones at or below
            // pruned_seq are gone.
            try db.execute(sql: """
                CREATE TABLE databases (
                    id INTEGER PRIMARY KEY,
                    container TEXT NOT NULL,
                    scope INTEGER NOT NULL,
                    owner TEXT NOT NULL,
                    change_seq INTEGER NOT NULL DEFAULT 0,
                    pruned_seq INTEGER NOT NULL DEFAULT 0,
                    UNIQUE (container, scope, owner)
                );
                """)
            // A zone; a deleted zone stays as a tombstone (deleted_at set) for
            // the database change feed. id is never reused (AUTOINCREMENT), so
            // it also names the zone's incarnation.
            try db.execute(sql: """
                CREATE TABLE zones (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    database_id INTEGER NOT NULL REFERENCES databases(id),
                    name TEXT NOT NULL,
                    encryption_scope INTEGER NOT NULL DEFAULT 0,
                    change_seq INTEGER NOT NULL DEFAULT 0,
                    pruned_seq INTEGER NOT NULL DEFAULT 0,
                    client_change_token BLOB,
                    db_seq INTEGER NOT NULL,
                    deleted_at REAL
                );
                CREATE UNIQUE INDEX zones_by_name ON zones(database_id, name) WHERE deleted_at IS NULL;
                CREATE INDEX zones_by_db_seq ON zones(database_id, db_seq);
                """)
            // A record's latest version. data = the Wire.Record as the server
            // has it (system fields included, asset content stripped).
            try db.execute(sql: """
                CREATE TABLE records (
                    id INTEGER PRIMARY KEY,
                    zone_id INTEGER NOT NULL REFERENCES zones(id) ON DELETE CASCADE,
                    name TEXT NOT NULL,
                    record_type TEXT NOT NULL,
                    change_tag TEXT NOT NULL,
                    change_seq INTEGER NOT NULL,
                    creator TEXT NOT NULL,
                    data BLOB NOT NULL,
                    UNIQUE (zone_id, name)
                );
                CREATE INDEX records_by_seq ON records(zone_id, change_seq);
                """)
            // Deleted records, kept for change feeds until pruned.
            try db.execute(sql: """
                CREATE TABLE tombstones (
                    zone_id INTEGER NOT NULL REFERENCES zones(id) ON DELETE CASCADE,
                    name TEXT NOT NULL,
                    record_type TEXT NOT NULL,
                    seq INTEGER NOT NULL,
                    deleted_at REAL NOT NULL,
                    PRIMARY KEY (zone_id, name)
                );
                CREATE INDEX tombstones_by_seq ON tombstones(zone_id, seq);
                CREATE INDEX tombstones_by_time ON tombstones(deleted_at);
                -- A record saved again supersedes its tombstone.
                CREATE TRIGGER records_supersede_tombstones AFTER INSERT ON records BEGIN
                    DELETE FROM tombstones WHERE zone_id = NEW.zone_id AND name = NEW.name;
                END;
                """)
            // Every field value again, typed, for queries that must not scan a
            // zone: one row per scalar, one per list element (list_index >= 0).
            // Strings, references (record name) → text; int64, dates (ns since
            // epoch) → integer; doubles, location latitude → real (longitude in
            // real_value2); bytes → blob. Assets and encrypted fields are not indexed.
            try db.execute(sql: """
                CREATE TABLE record_fields (
                    record_id INTEGER NOT NULL REFERENCES records(id) ON DELETE CASCADE,
                    zone_id INTEGER NOT NULL,
                    record_type TEXT NOT NULL,
                    key TEXT NOT NULL,
                    list_index INTEGER NOT NULL,
                    int_value INTEGER,
                    real_value REAL,
                    real_value2 REAL,
                    text_value TEXT,
                    blob_value BLOB
                );
                CREATE INDEX record_fields_by_record ON record_fields(record_id);
                CREATE INDEX record_fields_int ON record_fields(zone_id, record_type, key, int_value)
                    WHERE int_value IS NOT NULL;
                CREATE INDEX record_fields_real ON record_fields(zone_id, record_type, key, real_value)
                    WHERE real_value IS NOT NULL;
                CREATE INDEX record_fields_text ON record_fields(zone_id, record_type, key, text_value)
                    WHERE text_value IS NOT NULL;
                CREATE INDEX record_fields_blob ON record_fields(zone_id, record_type, key, blob_value)
                    WHERE blob_value IS NOT NULL;
                """)
            // deleteSelf references: deleting (target zone, target name) in the
            // database deletes the source record.
            try db.execute(sql: """
                CREATE TABLE cascade_references (
                    source_id INTEGER NOT NULL REFERENCES records(id) ON DELETE CASCADE,
                    database_id INTEGER NOT NULL,
                    target_zone TEXT NOT NULL,
                    target_name TEXT NOT NULL
                );
                CREATE INDEX cascade_references_by_target
                    ON cascade_references(database_id, target_zone, target_name);
                CREATE INDEX cascade_references_by_source ON cascade_references(source_id);
                """)
            // Asset contents, once per checksum.
            try db.execute(sql: """
                CREATE TABLE assets (
                    sha256 BLOB PRIMARY KEY,
                    size INTEGER NOT NULL,
                    content BLOB NOT NULL
                ) WITHOUT ROWID;
                """)
            // Which record holds which asset; an asset no record holds can go.
            try db.execute(sql: """
                CREATE TABLE asset_references (
                    record_id INTEGER NOT NULL REFERENCES records(id) ON DELETE CASCADE,
                    sha256 BLOB NOT NULL,
                    PRIMARY KEY (record_id, sha256)
                ) WITHOUT ROWID;
                CREATE INDEX asset_references_by_sha ON asset_references(sha256);
                """)
        }
        migrator.registerMigration("v2", migrate: migrateToV2)
        migrator.registerMigration("v3-long-lived", migrate: migrateToV3)
        migrator.registerMigration("v4-subscriptions", migrate: migrateToV4)
        migrator.registerMigration("v5-write-path", migrate: migrateToV5)
        migrator.registerMigration("v6-keyset-cursors", migrate: migrateToV6)
        migrator.registerMigration("v7-typed-values", migrate: migrateToV7)
        migrator.registerMigration("v8-users", migrate: migrateToV8)
        migrator.registerMigration("v9-notification-reads", migrate: migrateToV9)
        migrator.registerMigration("v10-shares", migrate: migrateToV10)
        migrator.registerMigration("v11-shared-tombstones", migrate: migrateToV11)
        migrator.registerMigration("v12-text-without-sizes", migrate: migrateToV12)
        migrator.registerMigration("v13-share-generation", migrate: migrateToV13)
        migrator.registerMigration("v14-long-lived-leases", migrate: migrateToV14)
        migrator.registerMigration("v15-long-lived-cancel", migrate: migrateToV15)
        migrator.registerMigration("v16-indexed-fields", migrate: migrateToV16)
        migrator.registerMigration("v17-indexed-system-fields", migrate: migrateToV17)
        return migrator
    }
}
