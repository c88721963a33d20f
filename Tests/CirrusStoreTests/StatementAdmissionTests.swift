import CirrusWire
import Foundation
import GRDB
import Testing

@testable import CirrusStore

/// ``StatementAdmission``: texts within the bound come from the connection's statement cache
/// (the same prepared statement each time), texts past it are prepared for each use, and a
/// text admitted once stays admitted.
@Suite("Statement admission")
struct StatementAdmissionTests {
    @Test func textsPastTheBoundAreNotKeptPrepared() throws {
        try withTemporaryFile("admission.sqlite") { path in
            let queue = try DatabaseQueue(path: path)
            try queue.write { db in
                try db.execute(sql: "CREATE TABLE t (v INTEGER)")
                try db.execute(sql: "INSERT INTO t (v) VALUES (1), (2), (3)")
            }
            let admission = StatementAdmission(limit: 2)
            try queue.read { db in
                let texts = (1...3).map { "SELECT count(*) FROM t WHERE v >= \($0)" }
                var first: [Statement] = []
                for text in texts { first.append(try admission.statement(db, sql: text)) }
                var again: [Statement] = []
                for text in texts { again.append(try admission.statement(db, sql: text)) }
                // The first two were admitted: the connection's cache hands out the same statement.
                #expect(first[0] === again[0])
                #expect(first[1] === again[1])
                // The third came past the bound: a new statement each time.
                #expect(first[2] !== again[2])
                // Every one counts what its text says.
                for (n, statement) in again.enumerated() {
                    #expect(try Int.fetchOne(statement) == 3 - n)
                }
            }
        }
    }

    /// Queries whose pages stop before their candidates end (a statement left mid-read, kept
    /// prepared) leave no read transaction behind: a checkpoint from another connection can
    /// copy the whole log and start it over once the queries returned.
    @Test func keptStatementsHoldNoReadAfterTheQuery() async throws {
        try await withSQLiteStore { storage, directory in
            _ = try await storage.saveAll((0..<300).map { note("n\($0)", [field("count", .int64Value(Int64($0 % 3)))]) })
            for round in 0..<4 {
                // Three records match per nine: a page of 2 stops early; the same shape again
                // comes from the connections' caches.
                let query = Q.query(Q.cmp("count", .equals, .int64Value(Int64(round % 3))))
                let page = try await storage.queryRecords(query, in: zoneID("_defaultZone"), of: alice, desiredKeys: nil, limit: 2)
                #expect(page.records.count == 2)
                #expect(page.cursor != nil)
            }
            let other = try DatabaseQueue(path: (directory as NSString).appendingPathComponent(SQLiteStorage.fileName))
            // The store's own checkpointer may hold the log for a moment: try until a deadline.
            let deadline = ContinuousClock.now + .seconds(60)
            var busy = 1
            while busy != 0, ContinuousClock.now < deadline {
                busy = try await other.writeWithoutTransaction { db in
                    try Int.fetchOne(db, sql: "PRAGMA wal_checkpoint(TRUNCATE)") ?? 1
                }
                if busy != 0 { try await Task.sleep(for: .milliseconds(20)) }
            }
            #expect(busy == 0)
        }
    }
}
