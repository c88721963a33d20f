import Foundation
import GRDB
import Testing

@testable import CirrusStore

/// SQLite's page cache, wrapped so that the locking page's number stays out of it
/// (`Sources/CSQLiteWAL/page_cache.c`).
@Suite("SQLite page cache")
struct SQLitePageCacheTests {
    /// Random inserts, updates and deletes into a table with two indexes, on 1 KiB pages and a
    /// cache of 40 pages (pages leave it and come back), make SQLite split and rebalance its
    /// B-trees, which parks pages under the locking page's number (1,048,577 here); some
    /// transactions and savepoints roll back. Every row is as written, on the writing
    /// connection, on a reader, and after the database is closed and opened again, and SQLite
    /// finds the file sound. Where the wrapper is the process's cache (SQLite was not initialized
    /// before the first store; another test of this process may open a database first), the
    /// parked pages went through it.
    @Test func rebalancedPagesKeepTheirContentThroughTheWrappedCache() throws {
        let wrapped = SQLitePageCache.isWrapped
        let parkedBefore = SQLitePageCache.parkedMoves
        try withTemporaryFile("pages.sqlite") { path in
            // The page size is set before the database becomes a write-ahead-log one (it cannot
            // change after).
            let creating = try DatabaseQueue(path: path)
            try creating.writeWithoutTransaction { db in
                try db.execute(
                    sql: """
                        PRAGMA page_size = 1024;
                        CREATE TABLE t (id INTEGER PRIMARY KEY, k TEXT NOT NULL UNIQUE, body TEXT NOT NULL);
                        CREATE INDEX t_by_body ON t(body);
                        """)
            }
            try creating.close()
            var configuration = Configuration()
            configuration.prepareDatabase { db in try db.execute(sql: "PRAGMA cache_size = 40") }
            let pool = try DatabasePool(path: path, configuration: configuration)
            #expect(try pool.read { db in try Int.fetchOne(db, sql: "PRAGMA page_size") } == 1024)
            var generator = SystemRandomNumberGenerator()
            var model: [String: String] = [:]
            func body() -> String {
                String(repeating: String(UInt64.random(in: 0...UInt64.max, using: &generator), radix: 36), count: Int.random(in: 1...20))
            }
            struct RolledBack: Error {}
            for round in 0..<150 {
                var next = model
                do {
                    try pool.write { db in
                        for _ in 0..<25 {
                            let key = String(UInt64.random(in: 0...UInt64.max, using: &generator), radix: 36)
                            let value = body()
                            try db.execute(sql: "INSERT OR REPLACE INTO t (k, body) VALUES (?, ?)", arguments: [key, value])
                            next[key] = value
                        }
                        for key in next.keys.shuffled().prefix(6) {
                            if Bool.random() {
                                try db.execute(sql: "DELETE FROM t WHERE k = ?", arguments: [key])
                                next[key] = nil
                            } else {
                                let value = body()
                                try db.execute(sql: "UPDATE t SET body = ? WHERE k = ?", arguments: [value, key])
                                next[key] = value
                            }
                        }
                        // A savepoint whose inserts are undone.
                        try db.inSavepoint {
                            for _ in 0..<10 {
                                try db.execute(
                                    sql: "INSERT INTO t (k, body) VALUES (?, ?)",
                                    arguments: [
                                        "undone-" + String(UInt64.random(in: 0...UInt64.max, using: &generator), radix: 36), body(),
                                    ])
                            }
                            return .rollback
                        }
                        if round % 7 == 3 { throw RolledBack() }
                    }
                    model = next
                } catch is RolledBack {}
                if round % 10 == 9 {
                    let stored = try pool.read { db in
                        try Dictionary(
                            uniqueKeysWithValues: Row.fetchAll(db, sql: "SELECT k, body FROM t").map {
                                ($0["k"] as String, $0["body"] as String)
                            })
                    }
                    #expect(stored == model, "round \(round)")
                }
            }
            try pool.write { db in
                let stored = try Dictionary(
                    uniqueKeysWithValues: Row.fetchAll(db, sql: "SELECT k, body FROM t").map { ($0["k"] as String, $0["body"] as String) })
                #expect(stored == model)
                let byBody = try Int.fetchOne(db, sql: "SELECT count(*) FROM t INDEXED BY t_by_body WHERE body > ''")
                #expect(byBody == model.count)
            }
            try pool.close()
            let reopened = try DatabaseQueue(path: path)
            try reopened.read { db in
                let stored = try Dictionary(
                    uniqueKeysWithValues: Row.fetchAll(db, sql: "SELECT k, body FROM t").map { ($0["k"] as String, $0["body"] as String) })
                #expect(stored == model)
                #expect(try String.fetchOne(db, sql: "PRAGMA integrity_check") == "ok")
            }
            try reopened.close()
        }
        if wrapped {
            #expect(SQLitePageCache.parkedMoves > parkedBefore)
        }
    }
}
