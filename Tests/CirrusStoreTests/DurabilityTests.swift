import CirrusWire
import Foundation
import Testing

@testable import CirrusStore

@Suite("Durability, concurrency and the field index")
struct DurabilityTests {
    @Test func dataSurvivesCloseAndReopen() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let first = try SQLiteStorage(directory: directory)
        try await first.createZone("Kept")
        let saved = try await first.saveAll([note("n", zone: "Kept", [field("v", .stringValue("durable"))])])
        _ = try await first.modifyRecords(RecordModification(deleting: [recordID("gone")]), in: alice, by: "_alice")
        try first.close()

        let second = try SQLiteStorage(directory: directory)
        #expect(try await second.fetch(recordID("n", zone: "Kept")).record == saved.first)
        #expect(try await second.fetchAllZones(in: alice).count == 2)
        let changes = try await second.recordChanges(in: zoneID("Kept"), of: alice, since: 0, limit: 10, desiredKeys: nil)
        #expect(changes.lastSeq == 1)
        try second.close()
    }

    @Test func aTemporaryStorageRemovesItsDirectory() async throws {
        let storage = try SQLiteStorage.temporary()
        try await storage.saveAll([note("n")])
        #expect(FileManager.default.fileExists(atPath: storage.directory))
        try storage.destroy()
        #expect(!FileManager.default.fileExists(atPath: storage.directory))
    }

    @Test func commitsAreDurableBeforeTheyReturn() async throws {
        try await withSQLiteStore { storage, _ in
            let settings = try await storage.durabilitySettings()
            #expect(settings.synchronous == 2)  // FULL
            #expect(settings.journalMode == "wal")
        }
    }

    @Test func readersReadThroughAMemoryMap() async throws {
        try await withSQLiteStore { storage, _ in
            try await storage.saveAll([note("a", [field("title", .stringValue("x"))])])
            let mapped = try await storage.read { db in try Int.fetchOne(db, sql: "PRAGMA mmap_size") }
            #expect(mapped == SQLiteStorage.memoryMapBytes)
        }
    }

    @Test func aClosedStoreFailsCleanly() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let storage = try SQLiteStorage(directory: directory)
        try storage.close()
        await #expect(throws: StoreError.self) { try await storage.fetchAllZones(in: alice) }
        await #expect(throws: StoreError.self) {
            try await storage.modifyRecords(RecordModification(saving: [note("n")]), in: alice, by: "_alice")
        }
    }

    @Test func exactlyOneOfTwoRacingSavesWins() async throws {
        try await withSQLiteStore { storage, _ in
            for round in 0..<20 {
                let base = try #require(try await storage.saveAll([note("race\(round)")]).first)
                let results = try await withThrowingTaskGroup(of: RecordModificationResult.self) { group in
                    for writer in 0..<2 {
                        var edit = base
                        edit.fields = [field("writer", .int64Value(Int64(writer)))]
                        group.addTask { try await storage.modifyRecords(RecordModification(saving: [edit]), in: alice, by: "_alice") }
                    }
                    return try await group.reduce(into: []) { $0.append($1) }
                }
                let winners = results.compactMap { $0.saved(0) }
                let losers = results.compactMap { $0.saveError(0) }
                #expect(winners.count == 1)
                #expect(losers.map(\.code) == [.serverRecordChanged])
                #expect(losers.first?.serverRecord == winners.first)
            }
        }
    }

    @Test func manyConcurrentWritersLoseNothing() async throws {
        try await withSQLiteStore { storage, _ in
            try await storage.saveAll([note("counter", [field("n", .int64Value(0))])])
            // 8 tasks × 10 increments, each retrying on conflict: the final count is exact.
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<8 {
                    group.addTask {
                        var done = 0
                        while done < 10 {
                            let current = try #require(try await storage.fetch(recordID("counter")).record)
                            guard case .int64Value(let n) = current.value("n") else { return }
                            var next = current
                            next.fields = [field("n", .int64Value(n + 1))]
                            let result = try await storage.modifyRecords(RecordModification(saving: [next]), in: alice, by: "_alice")
                            if result.saved(0) != nil { done += 1 }
                        }
                    }
                }
                try await group.waitForAll()
            }
            #expect(try await storage.fetch(recordID("counter")).record?.value("n") == .int64Value(80))
        }
    }

    @Test func fieldsAreIndexedForQueriesThatDoNotScanAZone() async throws {
        try await withSQLiteStore { storage, _ in
            try await storage.saveAll([
                note("a", [field("title", .stringValue("x")), field("tags", .stringList(Wire.StringList(values: ["p", "q"])))]),
                note("b", [field("n", .int64Value(3)), field("secret", .stringValue("s"))]),
            ])
            // Saves index no field until a query names it (``FieldIndexing``).
            #expect(try await storage.count("record_values") == 0)
            let fields = Q.and(
                Q.cmp("title", .equals, .stringValue("x")), Q.cmp("tags", .contains, .stringValue("p")),
                Q.cmp("n", .equals, .int64Value(3)), Q.cmp("secret", .equals, .stringValue("s")))
            #expect(try await storage.names(fields) == [])
            // title, tags×2, n, secret; asset and encrypted fields would be skipped.
            #expect(try await storage.count("record_values") == 5)
            let plan = try await storage.queryPlan(
                "SELECT record_id FROM record_values WHERE zone_id = 1 AND record_type = 'Note' AND key = 'title' AND kind = 1 AND value = 'x'")
            #expect(plan.contains { $0.contains("record_values_by_value (zone_id=? AND record_type=? AND key=? AND kind=? AND value=?)") }, "\(plan)")
            let range = try await storage.queryPlan(
                "SELECT record_id FROM record_values WHERE zone_id = 1 AND record_type = 'Note' AND key = 'n' AND kind = 2 AND value > 2")
            #expect(range.contains { $0.contains("record_values_by_value (zone_id=? AND record_type=? AND key=? AND kind=? AND value>?)") }, "\(range)")

            // A new version replaces the rows; a deletion removes them.
            var b = try #require(try await storage.fetch(recordID("b")).record)
            b.fields = [field("secret", nil)]
            try await storage.saveAll([b])
            #expect(try await storage.count("record_values") == 4)
            _ = try await storage.modifyRecords(RecordModification(deleting: [recordID("a")]), in: alice, by: "_alice")
            #expect(try await storage.count("record_values") == 1)
        }
    }

    @Test func encryptedFieldsAreNotIndexed() async throws {
        try await withSQLiteStore { storage, _ in
            var secret = field("pin", .stringValue("1234"))
            secret.isEncrypted = true
            let saved = try await storage.saveAll([note("e", [secret])])
            #expect(saved.first?.fields.first?.isEncrypted == true)
            #expect(try await storage.count("record_values") == 0)
        }
    }
}
