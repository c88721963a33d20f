import Foundation
import GRDB
import Testing

@testable import CirrusStore

/// ``GRDB/Database/inWriteTransaction(_:)``, the transaction of every batch of the writer: it
/// commits what its body wrote, rolls back what a body that threw wrote, and fails when SQLite
/// ended the transaction under the body (``GRDB/Database/checkTransactionOpen()`` says so
/// first).
@Suite("Write transactions")
struct WriteTransactionTests {
    private func withTable(_ body: (DatabaseQueue) throws -> Void) throws {
        try withTemporaryFile("transaction.sqlite") { path in
            let queue = try DatabaseQueue(path: path)
            try queue.write { db in try db.execute(sql: "CREATE TABLE t (v INTEGER NOT NULL)") }
            try body(queue)
        }
    }

    private func values(_ queue: DatabaseQueue) throws -> [Int] {
        try queue.read { db in try Int.fetchAll(db, sql: "SELECT v FROM t ORDER BY v") }
    }

    @Test func aBodyThatReturnsIsCommittedOneThatThrowsIsRolledBack() throws {
        struct Refused: Error {}
        try withTable { queue in
            try queue.writeWithoutTransaction { db in
                // Twice each: the second time BEGIN and COMMIT come from the statement cache.
                for value in [1, 2] {
                    try db.inWriteTransaction {
                        #expect(db.isInsideTransaction)
                        try db.execute(sql: "INSERT INTO t (v) VALUES (?)", arguments: [value])
                    }
                    #expect(!db.isInsideTransaction)
                }
                for value in [3, 4] {
                    #expect(throws: Refused.self) {
                        try db.inWriteTransaction {
                            try db.execute(sql: "INSERT INTO t (v) VALUES (?)", arguments: [value])
                            throw Refused()
                        }
                    }
                    #expect(!db.isInsideTransaction)
                }
            }
            #expect(try values(queue) == [1, 2])
        }
    }

    @Test func aTransactionSQLiteEndedFailsWithAbort() throws {
        try withTable { queue in
            try queue.writeWithoutTransaction { db in
                #expect {
                    try db.inWriteTransaction {
                        try db.execute(sql: "INSERT INTO t (v) VALUES (1)")
                        // As SQLite does after a full disk or an I/O error: the transaction ends
                        // under the body, which goes on as if it had caught the error.
                        try db.execute(sql: "ROLLBACK")
                        #expect(throws: DatabaseError.self) { try db.checkTransactionOpen() }
                    }
                } throws: { error in
                    (error as? DatabaseError)?.resultCode == .SQLITE_ABORT
                }
                #expect(!db.isInsideTransaction)
                // The connection is usable again.
                try db.inWriteTransaction { try db.execute(sql: "INSERT INTO t (v) VALUES (5)") }
            }
            #expect(try values(queue) == [5])
        }
    }
}
