import GRDB

extension Database {
    /// Runs `body` in an immediate transaction and commits it; rolls back and rethrows when
    /// `body` or the commit throws. What GRDB's `inTransaction(.immediate)` does, with `BEGIN`
    /// and `COMMIT` taken from the connection's statement cache: GRDB's `beginTransaction` and
    /// `commit` execute their SQL text, which SQLite parses and compiles again for every
    /// transaction (2 % of `cirrusd`'s CPU under single-record saves, which commit 17 at a
    /// time). The statements still run through GRDB, which tracks the transaction from them as
    /// it does from its own.
    ///
    /// GRDB's block also makes each of its statements check that SQLite did not end the
    /// transaction on its own (after a full disk or an I/O error, which a caller could catch
    /// and go on from); here the caller checks, with ``checkTransactionOpen()``, wherever it
    /// goes on after an error it caught. A commit after such an end fails either way.
    ///
    /// For example:
    /// ```swift
    /// try db.inWriteTransaction { try db.execute(sql: "INSERT INTO t (a) VALUES (1)") }
    /// ```
    func inWriteTransaction(_ body: () throws -> Void) throws {
        try cachedStatement(sql: "BEGIN IMMEDIATE TRANSACTION").execute()
        do {
            try body()
            try checkTransactionOpen()
            try cachedStatement(sql: "COMMIT TRANSACTION").execute()
        } catch {
            // GRDB's rollback: a ROLLBACK only while a transaction is open (SQLite may have
            // ended it itself); the first error is the one thrown.
            try? rollback()
            throw error
        }
    }

    /// Throws `SQLITE_ABORT`, as GRDB's transaction block does, when SQLite rolled the
    /// transaction back on its own: what runs next would otherwise run outside it, each
    /// statement committed alone.
    func checkTransactionOpen() throws {
        guard isInsideTransaction else {
            throw DatabaseError(resultCode: .SQLITE_ABORT, message: "Transaction was aborted")
        }
    }
}
