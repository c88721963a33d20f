import CirrusWire
import Foundation
import Testing

@testable import CirrusStore

@Suite("WAL checkpoints")
struct CheckpointTests {
    private func fileSize(_ path: String) -> Int {
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
            let before = fileSize(file)
            for batch in 0..<5 {
                try await storage.saveAll((0..<400).map {
                    note("b\(batch)r\($0)", [field("title", .stringValue(String(repeating: "x", count: 200)))])
                })
            }
            // 2,000 records of 200+ bytes are several hundred KiB of pages.
            let deadline = ContinuousClock.now + .seconds(60)
            while fileSize(file) < before + 400_000 && ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(50))
            }
            #expect(fileSize(file) >= before + 400_000)
        }
    }

    @Test func theWriterSettingsAreInPlace() async throws {
        try await withSQLiteStore { storage, _ in
            let settings = try await storage.write(weight: 1) { db in
                [try db.int64(sql: "PRAGMA synchronous"), try db.int64(sql: "PRAGMA temp_store"),
                 try db.int64(sql: "PRAGMA secure_delete")]
            }
            #expect(settings == [2, 2, 2])  // FULL, MEMORY, FAST
        }
    }
}
