import GRDB

extension SQLiteStorage {
    /// Schema v7: one typed value table instead of `record_fields`.
    ///
    /// `record_fields` cost four B-tree inserts per field value: the rowid
    /// table, `record_fields_by_record`, one of four partial value indexes
    /// and `record_fields_by_kind`, plus a foreign-key probe of `records`.
    /// `record_values` costs two:
    ///
    /// - the table itself, `WITHOUT ROWID`, keyed (record_id, key,
    ///   list_index): what a filter or a sort reads for one record;
    /// - `record_values_by_value` (zone_id, record_type, key, kind, value):
    ///   what a predicate seeks, and what tells which kinds a field holds.
    ///
    /// `value` has no declared type, so SQLite keeps what is bound: integers
    /// (int64, dates as ns since the epoch), reals (doubles, a location's
    /// latitude), text (strings, a reference's record name), blobs (bytes);
    /// NULL for assets and empty lists. Integers and reals compare as numbers,
    /// as `coalesce(int_value, real_value)` did. `value2` is a location's
    /// longitude. Values go with their record through the `records` delete
    /// trigger (a zone delete cascades to records, which fires it) instead of
    /// a foreign key, which probed `records` on every insert.
    ///
    /// `databases.subscriptions_generation` changes, to a random value, with
    /// every insert, update or delete of the database's subscriptions
    /// (triggers, so no write path can forget it): a write reuses the
    /// subscriptions it compiled for the same generation (``SubscriptionCache``)
    /// instead of decoding and compiling all of them again. Random rather than
    /// counted, so a rolled-back change can never give an old generation back
    /// to different subscriptions.
    static func migrateToV7(_ db: Database) throws {
        try db.execute(sql: """
            CREATE TABLE record_values (
                record_id INTEGER NOT NULL,
                key TEXT NOT NULL,
                list_index INTEGER NOT NULL,
                kind INTEGER NOT NULL,
                zone_id INTEGER NOT NULL,
                record_type TEXT NOT NULL,
                value,
                value2 REAL,
                PRIMARY KEY (record_id, key, list_index)
            ) WITHOUT ROWID;
            INSERT INTO record_values
                SELECT record_id, key, list_index, kind, zone_id, record_type,
                       coalesce(int_value, real_value, text_value, blob_value), real_value2
                FROM record_fields;
            DROP TABLE record_fields;
            CREATE INDEX record_values_by_value ON record_values(zone_id, record_type, key, kind, value);
            DROP TRIGGER records_drop_text;
            CREATE TRIGGER records_drop_index AFTER DELETE ON records BEGIN
                DELETE FROM record_text WHERE rowid = OLD.id;
                DELETE FROM record_values WHERE record_id = OLD.id;
            END;
            ALTER TABLE databases ADD COLUMN subscriptions_generation INTEGER NOT NULL DEFAULT 0;
            UPDATE databases SET subscriptions_generation = random()
                WHERE id IN (SELECT database_id FROM subscriptions);
            CREATE TRIGGER subscriptions_generation_on_insert AFTER INSERT ON subscriptions BEGIN
                UPDATE databases SET subscriptions_generation = random() WHERE id = NEW.database_id;
            END;
            CREATE TRIGGER subscriptions_generation_on_update AFTER UPDATE ON subscriptions BEGIN
                UPDATE databases SET subscriptions_generation = random()
                    WHERE id IN (OLD.database_id, NEW.database_id);
            END;
            CREATE TRIGGER subscriptions_generation_on_delete AFTER DELETE ON subscriptions BEGIN
                UPDATE databases SET subscriptions_generation = random() WHERE id = OLD.database_id;
            END;
            """)
    }
}
