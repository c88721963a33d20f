import CirrusWire
import Foundation
import Testing

@testable import CirrusStore

@Suite("WAL checkpoints")
struct CheckpointTests {
    private static func fileSize(_ path: String) -> Int {
        ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? Int) ?? 0
    }

    /// The writer never checkpoints (`wal_autocheckpoint = 0`); the
    /// checkpointer's own connection copies committed pages into the database
    /// file while the storage stays open.
    @Test func committedPagesReachTheDatabaseFileWithoutTheWriter() async throws {
        try await withSQLiteStore { storage, directory in
            let autocheckpoint = try await storage.write(weight: 1) { db in
                try db.int64(sql: "PRAGMA wal_autocheckpoint")
            }
            #expect(autocheckpoint == 0)
            let file = (directory as NSString).appendingPathComponent(SQLiteStorage.fileName)
            let before = Self.fileSize(file)
            for batch in 0..<5 {
                try await storage.saveAll(
                    (0..<400).map {
                        note("b\(batch)r\($0)", [field("title", .stringValue(String(repeating: "x", count: 200)))])
                    })
            }
            // 2,000 records of 200+ bytes are several hundred KiB of pages.
            let deadline = ContinuousClock.now + .seconds(60)
            while Self.fileSize(file) < before + 400_000 && ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(50))
            }
            #expect(Self.fileSize(file) >= before + 400_000)
        }
    }

    /// A checkpoint beside a writer that never pauses cannot copy the frames appended while it
    /// runs, so SQLite never starts the log over: under sustained saves it grew without bound
    /// (39 MB in this test, 2.6 MB with the bound). Past the limit, the writer copies the rest
    /// between two transactions and the log starts over: it stays within the limit and about
    /// one transaction.
    @Test func theLogStaysBoundedUnderSustainedSaves() async throws {
        try await withSQLiteStore(walLimitBytes: 1 << 20) { storage, directory in
            let log = (directory as NSString).appendingPathComponent(SQLiteStorage.fileName + "-wal")
            let text = String(repeating: "x", count: 200)
            // 24,000 records of 200 bytes: about 1.6 KB of log each once every page they touch is
            // counted, again in each transaction that touches it (39 MB in all). One transaction
            // (the writer commits up to 2,000 items together) adds about 2.5 MB.
            let largest = try await withThrowingTaskGroup(of: Int.self) { group in
                for writer in 0..<4 {
                    group.addTask {
                        var largest = 0
                        for batch in 0..<15 {
                            try await storage.saveAll(
                                (0..<400).map {
                                    note("w\(writer)b\(batch)r\($0)", [field("title", .stringValue(text))])
                                })
                            largest = max(largest, Self.fileSize(log))
                        }
                        return largest
                    }
                }
                return try await group.reduce(0, max)
            }
            #expect(largest < 12 << 20, "the log reached \(largest) bytes")
            #expect(try await storage.count("records") == 24_000)
        }
    }

    @Test func theWriterSettingsAreInPlace() async throws {
        try await withSQLiteStore { storage, _ in
            let settings = try await storage.write(weight: 1) { db in
                [
                    try db.int64(sql: "PRAGMA synchronous"), try db.int64(sql: "PRAGMA temp_store"),
                    try db.int64(sql: "PRAGMA secure_delete"),
                ]
            }
            #expect(settings == [2, 2, 2])  // FULL, MEMORY, FAST
        }
    }
}
