import Foundation
import GRDB
import GRDBSQLite
import Testing

@testable import CirrusStore

/// ``RawStatement/runUnlessUniqueViolated()``, on which a save taken to be new relies: a UNIQUE
/// violation is `false` with nothing written and the transaction going on; any other failure
/// throws as ``RawStatement/run()`` does.
@Suite("Raw statements")
struct RawStatementTests {
    @Test func aUniqueViolationWritesNothingAndOtherFailuresThrow() throws {
        try withTemporaryFile("raw.sqlite") { path in
            let queue = try DatabaseQueue(path: path)
            try queue.write { db in
                try db.execute(sql: "CREATE TABLE t (id INTEGER PRIMARY KEY, k TEXT NOT NULL UNIQUE, v TEXT NOT NULL)")
                try db.execute(sql: "CREATE INDEX t_by_v ON t(v)")
            }
            try queue.write { db in
                func insert(_ k: String, _ v: String?) throws -> Bool {
                    let statement = try RawStatement(db, sql: "INSERT INTO t (k, v) VALUES (?, ?)")
                    statement.bind(1, k)
                    statement.bind(2, v)
                    return try statement.runUnlessUniqueViolated()
                }
                #expect(try insert("a", "1"))
                #expect(try !insert("a", "2"))
                // Not a UNIQUE violation (NOT NULL): thrown, with SQLite's code.
                #expect {
                    _ = try insert("b", nil)
                } throws: { error in
                    (error as? DatabaseError)?.resultCode == .SQLITE_CONSTRAINT
                }
                // The transaction went on: a later insert lands, and the refused ones left nothing.
                #expect(try insert("c", "3"))
                let rows = try Row.fetchAll(db, sql: "SELECT k, v FROM t ORDER BY k").map { [$0["k"] as String, $0["v"] as String] }
                #expect(rows == [["a", "1"], ["c", "3"]])
                #expect(try Int.fetchOne(db, sql: "SELECT count(*) FROM t INDEXED BY t_by_v WHERE v > ''") == 2)
            }
            #expect(try queue.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM t") } == 2)
        }
    }

    /// Texts and a blob bound in place read back as bound (empty, NULL, short, long, not ASCII),
    /// the buffers are reused for the next row, and no parameter points at them afterwards: the
    /// statement stepped again as it stands writes NULLs only (every binding was cleared).
    @Test func borrowedBindingsWriteWhatWasBoundAndLeaveNothingBehind() throws {
        try withTemporaryFile("borrowed.sqlite") { path in
            let queue = try DatabaseQueue(path: path)
            try queue.write { db in
                try db.execute(sql: "CREATE TABLE t (n INTEGER, a TEXT, b TEXT, c TEXT, d BLOB)")
                let sql = "INSERT INTO t (n, a, b, c, d) VALUES (?, ?, ?, ?, ?)"
                var texts = BorrowedTexts()
                let rows: [(String?, String?, String?, [UInt8])] = [
                    ("", nil, "short", []),
                    (String(repeating: "long-name-", count: 40), "Ünïcödé ✓", "x", Array(0...255)),
                    (nil, "a", "", [7]),
                ]
                for (n, row) in rows.enumerated() {
                    let insert = try RawStatement(db, sql: sql)
                    texts.removeAll()
                    texts.append(2, row.0)
                    texts.append(3, row.1)
                    texts.append(4, row.2)
                    insert.bind(1, n)
                    try insert.withBorrowedBindings(texts, blob: row.3, at: 5) { try insert.run() }
                }
                // The same statement stepped again without binding anything.
                let statement = try db.cachedStatement(sql: sql)
                #expect(sqlite3_step(statement.sqliteStatement) == SQLITE_DONE)
                sqlite3_reset(statement.sqliteStatement)

                let read = try Row.fetchAll(db, sql: "SELECT n, a, b, c, d FROM t ORDER BY rowid")
                #expect(read.count == 4)
                for (n, row) in rows.enumerated() {
                    #expect(read[n]["n"] as Int? == n)
                    #expect(read[n]["a"] as String? == row.0)
                    #expect(read[n]["b"] as String? == row.1)
                    #expect(read[n]["c"] as String? == row.2)
                    #expect((read[n]["d"] as Data?).map(Array.init) == row.3)
                }
                let last = read[3]
                #expect(last["n"] as Int? == nil)
                #expect(last["a"] as String? == nil && last["b"] as String? == nil && last["c"] as String? == nil)
                #expect(last["d"] as Data? == nil)
            }
        }
    }
}
