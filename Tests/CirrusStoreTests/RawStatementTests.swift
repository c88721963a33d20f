import Foundation
import GRDB
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
}
