import CirrusWire
import Foundation
import GRDB
import GRDBSQLite
import Testing

@testable import CirrusStore

/// The VFS that writes a transaction's log frames with one call (`Sources/CSQLiteWAL`).
@Suite("WAL write gathering")
struct WALWriteGatheringTests {
    /// A save's frames (a header and a page each, two writes) reach the log in one write, and
    /// nothing is left in the buffer once the save returns.
    ///
    /// When the background checkpointer copied the whole log in the meantime (it runs 200 ms
    /// after a commit, which a loaded machine lets pass between two saves), the save starts
    /// the log over: SQLite first writes the log's new header and syncs it, one more write
    /// and one more flush. The log header's checkpoint sequence tells.
    @Test func aTransactionsFramesAreWrittenWithOneCall() async throws {
        try await withSQLiteStore { storage, _ in
            _ = try await storage.saveAll([note("first", [field("title", .stringValue("a"))])])
            let log = (storage.directory as NSString).appendingPathComponent(SQLiteStorage.fileName + "-wal")
            let before = try await storage.write(weight: 1) { db in
                (WALWriteGathering.counters(of: db), try Self.checkpointSequence(ofLog: log))
            }
            _ = try await storage.saveAll(
                (0..<20).map { note("r\($0)", [field("title", .stringValue("note \($0)")), field("n", .int64Value(Int64($0)))]) })
            let after = try await storage.write(weight: 1) { db in
                (WALWriteGathering.counters(of: db), try Self.checkpointSequence(ofLog: log))
            }
            let (start, end) = try (#require(before.0), #require(after.0))
            let restarted: UInt64 = before.1 == after.1 ? 0 : 1
            let gathered = end.gatheredWrites - start.gatheredWrites
            // Twenty records touch several pages (the table, its name and change indexes, the
            // zone's and the database's rows): several frames, each a header and a page.
            #expect(gathered >= 6, "\(gathered) writes gathered")
            #expect((gathered - restarted) % 2 == 0, "a frame is a header and a page")
            #expect(end.flushes - start.flushes == 1 + restarted)
        }
    }

    /// The checkpoint sequence number of the log at `path` (bytes 12–15 of its header), which
    /// SQLite moves each time it starts the log over.
    private static func checkpointSequence(ofLog path: String) throws -> [UInt8] {
        let file = try #require(FileHandle(forReadingAtPath: path))
        defer { try? file.close() }
        return Array(try file.read(upToCount: 16) ?? Data()).suffix(4)
    }

    /// The store's connections lock no mutex of their own around each call (GRDB opens each
    /// with `SQLITE_OPEN_NOMUTEX`, and multi-thread mode is the process's default once the
    /// settings are taken), and with the settings taken SQLite counts no memory. The settings are
    /// not taken when something opened a database before the first store (another test of this
    /// process may): the memory check then has nothing to say.
    @Test func connectionsHaveNoMutexAndSQLiteCountsNoMemoryWithTheProcessSettings() async throws {
        #expect(WALWriteGathering.install())
        try await withSQLiteStore { storage, _ in
            try await storage.saveAll([note("n", [field("title", .stringValue("counted?"))])])
            let hasMutex = try await storage.write(weight: 1) { db in
                db.sqliteConnection.map { sqlite3_db_mutex($0) != nil }
            }
            #expect(hasMutex == false)
            if WALWriteGathering.processSettingsTaken {
                #expect(sqlite3_memory_used() == 0)
            }
        }
    }

    /// The buffer is written once the commit frame is in it, before SQLite publishes the commit
    /// to other connections, and not only at the sync that `synchronous = FULL` adds: a
    /// connection on `NORMAL` (no sync at commit) must not leave a committed frame where only
    /// it can see it.
    @Test func aCommitIsInTheFileWithoutASync() throws {
        #expect(WALWriteGathering.install())
        try withTemporaryFile("normal.sqlite") { path in
            let pool = try DatabasePool(path: path)  // WAL, synchronous = NORMAL
            try pool.write { db in
                let synchronous = try Int.fetchOne(db, sql: "PRAGMA synchronous")
                #expect(synchronous == 1)
                try db.execute(sql: "CREATE TABLE t (id INTEGER PRIMARY KEY, body TEXT)")
            }
            for round in 0..<20 {
                try pool.write { db in
                    for i in 0..<50 {
                        try db.execute(
                            sql: "INSERT INTO t (body) VALUES (?)", arguments: [String(repeating: "\(round)-\(i)", count: 20)])
                    }
                }
                // Read on another connection, from the file.
                let count = try pool.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM t") }
                #expect(count == (round + 1) * 50)
            }
            // Closing copies the log into the database: every row is there, and sound.
            try pool.close()
            let reopened = try DatabaseQueue(path: path)
            try reopened.read { db in
                let count = try Int.fetchOne(db, sql: "SELECT count(*) FROM t")
                let integrity = try String.fetchOne(db, sql: "PRAGMA integrity_check")
                #expect(count == 1_000)
                #expect(integrity == "ok")
            }
        }
    }

    /// A transaction larger than the buffer (128 KiB) and than its page cache: its frames are
    /// written in parts, some before the commit (cache spills), and the writer reads spilled
    /// pages back through the buffer.
    @Test func aTransactionLargerThanTheBufferAndTheCache() throws {
        #expect(WALWriteGathering.install())
        try withTemporaryFile("large.sqlite") { path in
            let pool = try DatabasePool(path: path)
            let body = String(repeating: "x", count: 1_000)
            try pool.write { db in
                try db.execute(sql: "PRAGMA cache_size = 20")  // pages: the transaction spills
                try db.execute(sql: "CREATE TABLE t (id INTEGER PRIMARY KEY, body TEXT)")
                for i in 0..<4_000 {  // about 4 MB of pages
                    try db.execute(sql: "INSERT INTO t (body) VALUES (?)", arguments: [body + "\(i)"])
                }
                // Read back what spilled, on the writing connection.
                let first = try String.fetchOne(db, sql: "SELECT body FROM t WHERE id = 1")
                #expect(first == body + "0")
                let counters = try #require(WALWriteGathering.counters(of: db))
                #expect(counters.flushes >= 4, "\(counters.flushes) buffers written")
            }
            try pool.close()
            let reopened = try DatabaseQueue(path: path)
            try reopened.read { db in
                let count = try Int.fetchOne(db, sql: "SELECT count(*) FROM t")
                let last = try String.fetchOne(db, sql: "SELECT body FROM t WHERE id = 4000")
                let integrity = try String.fetchOne(db, sql: "PRAGMA integrity_check")
                #expect(count == 4_000)
                #expect(last == body + "3999")
                #expect(integrity == "ok")
            }
        }
    }
}
