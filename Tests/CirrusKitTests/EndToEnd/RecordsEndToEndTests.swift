import CirrusKit
import CirrusModel
import CirrusServer
import CirrusStore
import CirrusTestSupport
import Foundation
import Testing

@Suite("CloudKit code against cirrusd and SQLite, end to end")
struct RecordsEndToEndTests {
    @Test func saveFetchModifyDelete() async throws {
        try await withStack { container in
            let database = container("alice").privateCloudDatabase
            let note = CKRecord(recordType: "Note", recordID: CKRecord.ID(recordName: "groceries"))
            note["title"] = "Groceries"
            note["count"] = 12
            note["due"] = Date(timeIntervalSince1970: 1_800_000_000)
            let saved = try await database.save(note)
            #expect(saved.recordChangeTag != nil)
            #expect(saved.creationDate != nil)
            // The user record ID, in the default zone of the current user, as CloudKit names it.
            let alice = CKRecord.ID(
                recordName: "_alice", zoneID: CKRecordZone.ID(zoneName: "_defaultZone", ownerName: CKCurrentUserDefaultName))
            #expect(saved.creatorUserRecordID == alice)
            #expect(saved.lastModifiedUserRecordID == alice)

            let fetched = try await database.record(for: note.recordID)
            #expect(fetched["title"] as? String == "Groceries")
            #expect(fetched.creatorUserRecordID == alice)
            #expect(fetched["count"] as? Int == 12)
            #expect(fetched["due"] as? Date == Date(timeIntervalSince1970: 1_800_000_000))

            fetched["title"] = "Groceries (done)"
            let updated = try await database.save(fetched)
            #expect(updated.recordChangeTag != saved.recordChangeTag)

            // A stale copy loses: serverRecordChanged, carrying the server's record.
            saved["title"] = "stale"
            do {
                _ = try await database.save(saved)
                Issue.record("saving a stale record must fail")
            } catch let error as CKError {
                #expect(error.code == .serverRecordChanged)
                #expect(error.serverRecord?["title"] as? String == "Groceries (done)")
            }

            _ = try await database.deleteRecord(withID: note.recordID)
            do {
                _ = try await database.record(for: note.recordID)
                Issue.record("a deleted record must be gone")
            } catch let error as CKError {
                #expect(error.code == .unknownItem)
            }
        }
    }

    @Test func zonesAndAtomicModify() async throws {
        try await withStack { container in
            let database = container("alice").privateCloudDatabase
            let zone = try await database.save(CKRecordZone(zoneName: "Work"))
            #expect(zone.zoneID.zoneName == "Work")
            let zones = try await database.allRecordZones().map(\.zoneID.zoneName)
            #expect(Set(zones) == ["Work", CKRecordZone.ID.defaultZoneName])

            let first = CKRecord(recordType: "Task", recordID: CKRecord.ID(recordName: "t1", zoneID: zone.zoneID))
            first["title"] = "one"
            let second = CKRecord(recordType: "Task", recordID: CKRecord.ID(recordName: "t2", zoneID: zone.zoneID))
            second["title"] = "two"
            let (saves, _) = try await database.modifyRecords(saving: [first, second], deleting: [])
            #expect(saves.count == 2)

            _ = try await database.deleteRecordZone(withID: zone.zoneID)
            let remaining = try await database.allRecordZones().map(\.zoneID.zoneName)
            #expect(remaining == [CKRecordZone.ID.defaultZoneName])
        }
    }

    @Test func usersDoNotSeeEachOthersPrivateRecords() async throws {
        try await withStack { container in
            let secret = CKRecord(recordType: "Note", recordID: CKRecord.ID(recordName: "diary"))
            secret["text"] = "alice only"
            _ = try await container("alice").privateCloudDatabase.save(secret)
            do {
                _ = try await container("bob").privateCloudDatabase.record(for: secret.recordID)
                Issue.record("bob must not read alice's record")
            } catch let error as CKError {
                #expect(error.code == .unknownItem)
            }
        }
    }

    @Test func dataSurvivesAServerRestart() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cirrus-e2e-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let recordID = CKRecord.ID(recordName: "durable")
        do {
            let storage = try SQLiteStorage(directory: directory)
            try await withServer(configure: { $0.executor = StorageExecutor(storage: storage) }) { _, port in
                let container = CKContainer(identifier: "iCloud.x", configuration: TestCertificates.client(port: port))
                let record = CKRecord(recordType: "Note", recordID: recordID)
                record["v"] = "kept"
                _ = try await container.privateCloudDatabase.save(record)
            }
            try storage.close()
        }
        let storage = try SQLiteStorage(directory: directory)
        defer { try? storage.close() }
        try await withServer(configure: { $0.executor = StorageExecutor(storage: storage) }) { _, port in
            let container = CKContainer(identifier: "iCloud.x", configuration: TestCertificates.client(port: port))
            let record = try await container.privateCloudDatabase.record(for: recordID)
            #expect(record["v"] as? String == "kept")
        }
    }
}
