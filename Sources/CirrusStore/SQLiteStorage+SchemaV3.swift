import GRDB

extension SQLiteStorage {
    /// Schema v3: long-lived operations (see ``OperationJournal``).
    ///
    /// - `long_lived_operations`: one row per operation, keyed by (owner, operation ID) since
    ///   the ID is the client's; `container` is the `Open`'s, for listing per container. `open` is the original `Wire.Open`; `last_seq` the seq of the
    ///   last journaled event; `checkpoint` what the executor needs to continue after a
    ///   restart, written with each append; `complete` the final `Wire.Complete`, set (with
    ///   `completed_ns`) when the operation finished. Times are ns since the epoch.
    /// - `long_lived_events`: the journal, one serialized `Wire.Event` per (operation, seq).
    static func migrateToV3(_ db: Database) throws {
        try db.execute(sql: """
            CREATE TABLE long_lived_operations (
                owner TEXT NOT NULL,
                operation_id TEXT NOT NULL,
                container TEXT NOT NULL,
                open BLOB NOT NULL,
                last_seq INTEGER NOT NULL DEFAULT 0,
                created_ns INTEGER NOT NULL,
                completed_ns INTEGER,
                checkpoint BLOB,
                complete BLOB,
                PRIMARY KEY (owner, operation_id)
            ) WITHOUT ROWID;
            CREATE INDEX long_lived_operations_by_completion ON long_lived_operations(completed_ns);
            CREATE INDEX long_lived_operations_by_container ON long_lived_operations(owner, container, created_ns);
            CREATE TABLE long_lived_events (
                owner TEXT NOT NULL,
                operation_id TEXT NOT NULL,
                seq INTEGER NOT NULL,
                event BLOB NOT NULL,
                PRIMARY KEY (owner, operation_id, seq)
            ) WITHOUT ROWID;
            """)
    }
}
