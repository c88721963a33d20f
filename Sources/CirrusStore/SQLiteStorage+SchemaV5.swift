import GRDB

extension SQLiteStorage {
    /// Schema v5: the write path without a trigger on `records`.
    ///
    /// `records_supersede_tombstones` deleted a record's tombstone when the
    /// record was inserted again. A trigger makes SQLite open a statement
    /// journal for every insert into `records`; the writer now deletes the
    /// tombstone itself, in the same transaction (`RecordWriter.apply`).
    static func migrateToV5(_ db: Database) throws {
        try db.execute(sql: "DROP TRIGGER records_supersede_tombstones")
    }
}
