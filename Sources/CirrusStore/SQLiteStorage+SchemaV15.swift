import GRDB

extension SQLiteStorage {
    /// Schema v15: a long-lived operation's client cancelled it
    /// (``OperationJournal/requestLongLivedCancellation(_:)``).
    ///
    /// - `long_lived_operations.cancel_requested`: 1 once its client cancelled it while it ran;
    ///   the process running it (or the next one, after a crash) completes it as cancelled.
    ///
    /// One process serves a SQLite data directory, but the journal keeps the same mark as the
    /// PostgreSQL one (where a cancel reaches whichever node runs the operation), so both
    /// engines pass the same conformance tests and a cancel survives a crash before its
    /// completion was journaled.
    static func migrateToV15(_ db: Database) throws {
        try db.execute(
            sql: "ALTER TABLE long_lived_operations ADD COLUMN cancel_requested INTEGER NOT NULL DEFAULT 0")
    }
}
