import CirrusWire
import Foundation
import GRDB
import Testing

@testable import CirrusStore

@Suite("In-place readers")
struct InPlaceReadersTests {
    /// A database with one committed row, and readers on it.
    private static func withReaders(limit: Int, _ body: (DatabasePool, InPlaceReaders) throws -> Void) throws {
        try withTemporaryFile("readers.sqlite") { path in
            let pool = try DatabasePool(path: path)
            try pool.write { db in
                try db.execute(sql: "CREATE TABLE t (id INTEGER PRIMARY KEY, body TEXT)")
                try db.execute(sql: "INSERT INTO t (body) VALUES ('first')")
            }
            let readers = InPlaceReaders(path: path, configuration: Configuration(), limit: limit)
            try body(pool, readers)
            try readers.close()
            try pool.close()
        }
    }

    /// A read sees what was committed before it began, on another connection than the writer's.
    @Test func aReadSeesEveryCommitBeforeIt() throws {
        try Self.withReaders(limit: 2) { pool, readers in
            for round in 0..<3 {
                try pool.write { db in try db.execute(sql: "INSERT INTO t (body) VALUES (?)", arguments: ["r\(round)"]) }
                let count = try readers.readIfFree { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM t") }
                #expect(count == .some(round + 2))
            }
        }
    }

    /// A read is one snapshot: a commit during it is not seen until the next.
    @Test func aReadIsOneSnapshot() throws {
        try Self.withReaders(limit: 1) { pool, readers in
            let counts = try readers.readIfFree { db -> [Int] in
                let before = try Int.fetchOne(db, sql: "SELECT count(*) FROM t") ?? -1
                try pool.write { db in try db.execute(sql: "INSERT INTO t (body) VALUES ('during')") }
                let after = try Int.fetchOne(db, sql: "SELECT count(*) FROM t") ?? -1
                return [before, after]
            }
            #expect(counts == [1, 1])
            let later = try readers.readIfFree { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM t") }
            #expect(later == .some(2))
        }
    }

    /// A read that throws ends its transaction: the connection serves the next read.
    @Test func aFailedReadLeavesItsConnectionUsable() throws {
        struct Failure: Error {}
        try Self.withReaders(limit: 1) { _, readers in
            #expect(throws: Failure.self) {
                _ = try readers.readIfFree { db -> Int in
                    _ = try Int.fetchOne(db, sql: "SELECT count(*) FROM t")
                    throw Failure()
                }
            }
            let count = try readers.readIfFree { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM t") }
            #expect(count == .some(1))
        }
    }

    /// With every connection busy, a read does not wait: it gets nil and goes elsewhere (the
    /// storage's pool). One comes back when its read ends.
    @Test func aReadNeverWaitsForABusyConnection() throws {
        try Self.withReaders(limit: 1) { _, readers in
            let inner = try readers.readIfFree { _ in
                try readers.readIfFree { _ in "second" }
            }
            #expect(inner == .some(nil))
            let again = try readers.readIfFree { _ in "again" }
            #expect(again == "again")
        }
    }

    /// Read-only: a write through one fails and changes nothing.
    @Test func theConnectionsCannotWrite() throws {
        try Self.withReaders(limit: 1) { pool, readers in
            #expect(throws: DatabaseError.self) {
                _ = try readers.readIfFree { db in try db.execute(sql: "INSERT INTO t (body) VALUES ('no')") }
            }
            let count = try pool.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM t") }
            #expect(count == 1)
        }
    }

    /// After `close`, no read runs on them, and one busy during the close is closed as it
    /// comes back.
    @Test func closedReadersRunNothing() throws {
        try Self.withReaders(limit: 1) { _, readers in
            let during = try readers.readIfFree { _ in
                try readers.close()
                return "during"
            }
            #expect(during == "during")
            let after = try readers.readIfFree { _ in "after" }
            #expect(after == nil)
        }
    }
}
