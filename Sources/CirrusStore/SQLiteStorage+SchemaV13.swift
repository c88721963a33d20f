import GRDB

extension SQLiteStorage {
    /// Schema v13: the shares generation lives in the database, so every process that opens
    /// the data directory sees the same one.
    ///
    /// - `share_generation`: one row whose `value` triggers move with every row inserted,
    ///   changed or deleted in `shares` or `share_participants` — whoever writes them (this
    ///   store, another process opening the same file, `cirrusd` maintenance commands, a zone
    ///   deletion's cascade), in the transaction that writes them. An access policy compiled
    ///   from the shares is kept while the value stays the same (``sharesGeneration``).
    ///
    /// Until v12 the generation was a count kept per process, bumped by a transaction
    /// observer: a second process that removed a participant left the first one's cached
    /// access in place.
    static func migrateToV13(_ db: Database) throws {
        var sql = """
            CREATE TABLE share_generation (
                id INTEGER PRIMARY KEY CHECK (id = 1),
                value INTEGER NOT NULL
            );
            INSERT INTO share_generation (id, value) VALUES (1, 0);

            """
        for table in ["shares", "share_participants"] {
            for event in ["INSERT", "UPDATE", "DELETE"] {
                sql += """
                    CREATE TRIGGER \(table)_\(event.lowercased())_moves_generation AFTER \(event) ON \(table) BEGIN
                        UPDATE share_generation SET value = value + 1 WHERE id = 1;
                    END;

                    """
            }
        }
        try db.execute(sql: sql)
    }
}
