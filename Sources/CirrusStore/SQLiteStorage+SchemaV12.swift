import GRDB

extension SQLiteStorage {
    /// Schema v12: the full-text table keeps no per-row token counts.
    ///
    /// By default FTS5 stores each row's token count in `record_text_docsize`, which only
    /// ranking (`bm25`, `rank`) reads and no query of the store does: one more B-tree insert
    /// for every saved record that has text, about 2 µs of the single writer's time per
    /// record. `columnsize = 0` leaves it out; matching (`MATCH`, the `rowid` lookups of
    /// ``QueryPlanner`` and ``QueryRun``) is unchanged. FTS5 cannot change the option of a
    /// table, so the table is built again under a new name from the old one's rows, then
    /// takes its name; the `records` delete trigger that names it is dropped around the
    /// swap and created again as schema v7 wrote it.
    static func migrateToV12(_ db: Database) throws {
        try db.execute(sql: """
            CREATE VIRTUAL TABLE record_text_v12 USING fts5(
                body, tokenize = 'unicode61 remove_diacritics 2', columnsize = 0);
            INSERT INTO record_text_v12 (rowid, body) SELECT rowid, body FROM record_text;
            DROP TRIGGER records_drop_index;
            DROP TABLE record_text;
            ALTER TABLE record_text_v12 RENAME TO record_text;
            CREATE TRIGGER records_drop_index AFTER DELETE ON records BEGIN
                DELETE FROM record_text WHERE rowid = OLD.id;
                DELETE FROM record_values WHERE record_id = OLD.id;
            END;
            """)
    }
}
