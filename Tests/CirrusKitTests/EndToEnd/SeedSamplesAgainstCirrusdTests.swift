import CirrusKit
import CirrusModel
import Foundation
import NIOConcurrencyHelpers
import Testing

// The record and zone samples of ../shared/seeds/002 (Apple's CloudKit operations
// reference), copied verbatim between the `// --- sample` markers; only the import and the
// scaffolding the samples assume (records, IDs, helper functions) are ours. One change inside:
// `case .success(let record):` whose `record` the sample never uses became
// `case .success(_):`, because this package builds without warnings.

private let log = NIOLockedValueBox<[String]>([])
private func print(_ line: String) { log.withLockedValue { $0.append(line) } }
private func processRecord(_ record: CKRecord) { print("processed \(record.recordID.recordName)") }
private func handleError(_ error: any Error, for recordID: CKRecord.ID) { print("error \(recordID.recordName)") }

@Suite("Seed samples run unchanged against cirrusd", .serialized)
struct SeedSamplesAgainstCirrusdTests {
    @Test func modifyRecordsSample() async throws {
        try await withStack { container in
            let database = container("alice").privateCloudDatabase
            let old1 = CKRecord(recordType: "Note", recordID: CKRecord.ID(recordName: "old1"))
            let old2 = CKRecord(recordType: "Note", recordID: CKRecord.ID(recordName: "old2"))
            _ = try await database.modifyRecords(saving: [old1, old2], deleting: [])
            let oldRecordID1 = old1.recordID
            let oldRecordID2 = old2.recordID
            let record1 = CKRecord(recordType: "Note", recordID: CKRecord.ID(recordName: "r1"))
            let record2 = CKRecord(recordType: "Note", recordID: CKRecord.ID(recordName: "r2"))
            let record3 = CKRecord(recordType: "Note", recordID: CKRecord.ID(recordName: "r3"))
            for record in [record1, record2, record3] { record["title"] = record.recordID.recordName }
            log.withLockedValue { $0.removeAll() }

            // --- sample
            let recordsToSave = [record1, record2, record3]
            let recordIDsToDelete = [oldRecordID1, oldRecordID2]

            let operation = CKModifyRecordsOperation(
                recordsToSave: recordsToSave,
                recordIDsToDelete: recordIDsToDelete
            )

            // Save policy
            operation.savePolicy = .changedKeys  // Only modified fields

            // Atomic - all or nothing
            operation.isAtomic = true

            // Per-record callbacks
            operation.perRecordSaveBlock = { recordID, result in
                switch result {
                case .success(_):
                    print("Saved: \(recordID)")
                case .failure(let error):
                    print("Failed \(recordID): \(error)")
                }
            }

            operation.perRecordDeleteBlock = { recordID, result in
                switch result {
                case .success:
                    print("Deleted: \(recordID)")
                case .failure(let error):
                    print("Delete failed \(recordID): \(error)")
                }
            }

            // Completion
            operation.modifyRecordsResultBlock = { result in
                switch result {
                case .success:
                    print("All operations completed")
                case .failure(let error):
                    print("Batch failed: \(error)")
                }
            }

            database.add(operation)
            // --- end of sample

            await finished(operation)
            let lines = log.withLockedValue { $0 }
            #expect(lines.filter { $0.hasPrefix("Saved: ") }.count == 3)
            #expect(lines.filter { $0.hasPrefix("Deleted: ") }.count == 2)
            #expect(lines.last == "All operations completed")
            let fetched = try await database.records(for: [record1.recordID, oldRecordID1])
            #expect((try? fetched[record1.recordID]?.get())?["title"] as? String == "r1")
            #expect(fetched[oldRecordID1].map { (try? $0.get()) == nil } == true)
        }
    }

    @Test func fetchRecordsSample() async throws {
        try await withStack { container in
            let database = container("alice").privateCloudDatabase
            let saved = (1...2).map { index -> CKRecord in
                let record = CKRecord(recordType: "Note", recordID: CKRecord.ID(recordName: "id\(index)"))
                record["title"] = "t\(index)"
                record["content"] = "c\(index)"
                record["secret"] = "not wanted"
                return record
            }
            _ = try await database.modifyRecords(saving: saved, deleting: [])
            let id1 = saved[0].recordID
            let id2 = saved[1].recordID
            let id3 = CKRecord.ID(recordName: "missing")
            let fetchedKeys = NIOLockedValueBox<[String: [String]]>([:])
            log.withLockedValue { $0.removeAll() }

            // --- sample
            let recordIDs = [id1, id2, id3]
            let operation = CKFetchRecordsOperation(recordIDs: recordIDs)

            // Only fetch specific keys (optimization)
            operation.desiredKeys = ["title", "content", "modifiedAt"]

            // Per-record callback
            operation.perRecordResultBlock = { recordID, result in
                switch result {
                case .success(let record):
                    processRecord(record)
                    fetchedKeys.withLockedValue { $0[recordID.recordName] = record.allKeys().sorted() }
                case .failure(let error):
                    handleError(error, for: recordID)
                }
            }

            // Completion
            operation.fetchRecordsResultBlock = { result in
                switch result {
                case .success:
                    print("Fetch completed")
                case .failure(let error):
                    print("Fetch failed: \(error)")
                }
            }

            database.add(operation)
            // --- end of sample

            await finished(operation)
            let lines = log.withLockedValue { $0 }
            #expect(lines.contains("processed id1"))
            #expect(lines.contains("processed id2"))
            #expect(lines.contains("error missing"))
            #expect(lines.last?.hasPrefix("Fetch failed: ") == true, "a missing record makes a partial failure")
            #expect(fetchedKeys.withLockedValue { $0 }["id1"] == ["content", "title"])
        }
    }

    @Test func zoneSamples() async throws {
        try await withStack { container in
            let database = container("alice").privateCloudDatabase
            log.withLockedValue { $0.removeAll() }

            // --- sample
            let zoneID = CKRecordZone.ID(zoneName: "MyZone", ownerName: CKCurrentUserDefaultName)
            let zone = CKRecordZone(zoneID: zoneID)

            let operation = CKModifyRecordZonesOperation(
                recordZonesToSave: [zone],
                recordZoneIDsToDelete: nil
            )

            operation.perRecordZoneSaveBlock = { zoneID, result in
                switch result {
                case .success(let zone):
                    print("Zone created: \(zone.zoneID)")
                case .failure(let error):
                    print("Zone creation failed: \(error)")
                }
            }

            operation.modifyRecordZonesResultBlock = { result in
                // Overall completion
            }

            database.add(operation)
            // --- end of sample
            await finished(operation)
            #expect(log.withLockedValue { $0 }.first?.hasPrefix("Zone created: ") == true)

            let zoneID1 = zoneID
            let zoneID2 = CKRecordZone.ID(zoneName: "NotThere", ownerName: CKCurrentUserDefaultName)
            log.withLockedValue { $0.removeAll() }

            // --- sample
            // Fetch specific zones
            let fetchOperation = CKFetchRecordZonesOperation(recordZoneIDs: [zoneID1, zoneID2])

            // Or fetch all zones
            let allZonesOperation = CKFetchRecordZonesOperation.fetchAllRecordZonesOperation()

            fetchOperation.perRecordZoneResultBlock = { zoneID, result in
                if case .success(let zone) = result {
                    print("Zone: \(zone.zoneID.zoneName)")
                }
            }

            database.add(fetchOperation)
            // --- end of sample
            await finished(fetchOperation)
            #expect(log.withLockedValue { $0 } == ["Zone: MyZone"])

            let names = NIOLockedValueBox<[String]>([])
            allZonesOperation.perRecordZoneResultBlock = { _, result in
                if case .success(let zone) = result { names.withLockedValue { $0.append(zone.zoneID.zoneName) } }
            }
            database.add(allZonesOperation)
            await finished(allZonesOperation)
            #expect(Set(names.withLockedValue { $0 }) == ["MyZone", CKRecordZone.ID.defaultZoneName])
        }
    }
}
