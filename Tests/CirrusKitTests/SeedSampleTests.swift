import CirrusKit
import CirrusModel
import CirrusTestSupport
import Foundation
import Testing

/// The record and zone samples of the CloudKit operations reference (shared/seeds), kept as
/// written apart from `print` going to a recorder, run against the echoing fake server.
@Suite("CloudKit reference samples")
struct SeedSampleTests {
    @Test("Modify and fetch records, modify and fetch zones, dependencies")
    func samples() async throws {
        let peer = try await FakePeer.start { open, _ in EchoReplies.reply(open) }
        defer { Task { await peer.stop() } }
        let container = CKContainer(identifier: "iCloud.test", configuration: TestCertificates.client(port: peer.port))
        let database = container.privateCloudDatabase
        let log = Recorder<String>()
        func print(_ line: String) { log.append(line) }

        let record1 = CKRecord(recordType: "Note")
        let record2 = CKRecord(recordType: "Note")
        let record3 = CKRecord(recordType: "Note")
        record1["title"] = "one"
        let oldRecordID1 = CKRecord.ID(recordName: "old1")
        let oldRecordID2 = CKRecord.ID(recordName: "old2")

        // CKModifyRecordsOperation
        let recordsToSave = [record1, record2, record3]
        let recordIDsToDelete = [oldRecordID1, oldRecordID2]

        let operation = CKModifyRecordsOperation(
            recordsToSave: recordsToSave,
            recordIDsToDelete: recordIDsToDelete
        )
        operation.savePolicy = .changedKeys  // Only modified fields
        operation.isAtomic = true
        operation.qualityOfService = .userInitiated
        operation.configuration.timeoutIntervalForRequest = 30
        operation.configuration.timeoutIntervalForResource = 60
        operation.perRecordSaveBlock = { recordID, result in
            switch result {
            case .success(let record):
                print("Saved: \(recordID) \(record.recordChangeTag ?? "")")
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
        operation.modifyRecordsResultBlock = { result in
            switch result {
            case .success:
                print("All operations completed")
            case .failure(let error):
                print("Batch failed: \(error)")
            }
        }
        await runToCompletion(operation, on: database)
        #expect(log.values.filter { $0.hasPrefix("Saved: ") && $0.hasSuffix(" t1") }.count == 3)
        #expect(log.values.filter { $0.hasPrefix("Deleted: ") }.count == 2)
        #expect(log.values.last == "All operations completed")

        // CKFetchRecordsOperation
        let fetched = Recorder<CKRecord>()
        let failed = Recorder<CKRecord.ID>()
        func processRecord(_ record: CKRecord) { fetched.append(record) }
        func handleError(_ error: any Error, for recordID: CKRecord.ID) {
            if let ckError = error as? CKError {
                switch ckError.code {
                case .unknownItem:
                    failed.append(recordID)
                default:
                    break
                }
            }
        }
        let recordIDs = [record1.recordID, record2.recordID, CKRecord.ID(recordName: "missing")]
        let fetch = CKFetchRecordsOperation(recordIDs: recordIDs)
        fetch.desiredKeys = ["title", "content", "modifiedAt"]
        fetch.perRecordResultBlock = { recordID, result in
            switch result {
            case .success(let record):
                processRecord(record)
            case .failure(let error):
                handleError(error, for: recordID)
            }
        }
        fetch.fetchRecordsResultBlock = { result in
            switch result {
            case .success:
                print("Fetch completed")
            case .failure(let error):
                print("Fetch failed: \(error)")
            }
        }
        await runToCompletion(fetch, on: database)
        #expect(fetched.count == 2)
        #expect(failed.values == [CKRecord.ID(recordName: "missing")])

        // CKModifyRecordZonesOperation
        let zoneID = CKRecordZone.ID(zoneName: "MyZone", ownerName: CKCurrentUserDefaultName)
        let zone = CKRecordZone(zoneID: zoneID)
        let zoneOperation = CKModifyRecordZonesOperation(
            recordZonesToSave: [zone],
            recordZoneIDsToDelete: nil
        )
        zoneOperation.perRecordZoneSaveBlock = { zoneID, result in
            switch result {
            case .success(let zone):
                print("Zone created: \(zone.zoneID)")
            case .failure(let error):
                print("Zone creation failed: \(error)")
            }
        }
        zoneOperation.modifyRecordZonesResultBlock = { result in
            // Overall completion
        }
        zoneOperation.database = container.privateCloudDatabase
        await runToCompletion(zoneOperation)
        #expect(log.values.contains { $0.hasPrefix("Zone created: ") })

        // CKFetchRecordZonesOperation, and a dependency on it
        let fetchZonesOp = CKFetchRecordZonesOperation.fetchAllRecordZonesOperation()
        fetchZonesOp.perRecordZoneResultBlock = { zoneID, result in
            if case .success(let zone) = result {
                print("Zone: \(zone.zoneID.zoneName)")
            }
        }
        let fetchRecordsOp = CKFetchRecordsOperation(recordIDs: [record1.recordID])
        fetchRecordsOp.perRecordResultBlock = { _, _ in print("after zones") }
        fetchRecordsOp.addDependency(fetchZonesOp)
        database.add(fetchZonesOp)
        await runToCompletion(fetchRecordsOp, on: database)
        let lines = log.values
        let zoneLine = try #require(lines.firstIndex(of: "Zone: MyZone"))
        let afterLine = try #require(lines.firstIndex(of: "after zones"))
        #expect(zoneLine < afterLine)
    }

    @Test("Completion-handler conveniences")
    func completionHandlers() async throws {
        let peer = try await FakePeer.start { open, _ in EchoReplies.reply(open) }
        defer { Task { await peer.stop() } }
        let database = CKContainer(identifier: "iCloud.test", configuration: TestCertificates.client(port: peer.port))
            .privateCloudDatabase
        let record = CKRecord(recordType: "Note", recordID: CKRecord.ID(recordName: "n1"))
        let saved: CKRecord? = await withCheckedContinuation { continuation in
            database.save(record) { record, _ in continuation.resume(returning: record) }
        }
        #expect(saved?.recordChangeTag == "t1")
        let missing: (any Error)? = await withCheckedContinuation { continuation in
            database.fetch(withRecordID: CKRecord.ID(recordName: "missing")) { _, error in continuation.resume(returning: error) }
        }
        #expect((missing as? CKError)?.code == .unknownItem)
        let zones: [CKRecordZone]? = await withCheckedContinuation { continuation in
            database.fetchAllRecordZones { zones, _ in continuation.resume(returning: zones) }
        }
        #expect(zones?.count == 2)
        let deleted: CKRecord.ID? = await withCheckedContinuation { continuation in
            database.delete(withRecordID: record.recordID) { id, _ in continuation.resume(returning: id) }
        }
        #expect(deleted == record.recordID)
    }

    @Test("A request too large for one frame: limitExceeded, and the connection stays usable")
    func oversizedRequest() async throws {
        let peer = try await FakePeer.start { open, _ in EchoReplies.reply(open) }
        defer { Task { await peer.stop() } }
        let database = CKContainer(identifier: "iCloud.test", configuration: TestCertificates.client(port: peer.port))
            .privateCloudDatabase
        let big = CKRecord(recordType: "Blob", recordID: CKRecord.ID(recordName: "big"))
        big["bytes"] = Data(repeating: 7, count: 5 << 20)
        let error = await #expect(throws: CKError.self) { try await database.save(big) }
        #expect(error?.code == .limitExceeded)
        let small = try await database.save(CKRecord(recordType: "Note", recordID: CKRecord.ID(recordName: "small")))
        #expect(small.recordChangeTag == "t1")
        #expect(peer.opens.count == 1)
    }
}

@Suite("Deprecated completion blocks")
struct LegacyBlockTests {
    @Test("modifyRecordsCompletionBlock, fetchRecordsCompletionBlock and the zone ones still report")
    func legacyBlocks() async throws {
        let peer = try await FakePeer.start { open, _ in EchoReplies.reply(open) }
        defer { Task { await peer.stop() } }
        let database = CKContainer(identifier: "iCloud.test", configuration: TestCertificates.client(port: peer.port))
            .privateCloudDatabase
        let record = CKRecord(recordType: "Note", recordID: CKRecord.ID(recordName: "n1"))
        let modify = CKModifyRecordsOperation(recordsToSave: [record], recordIDsToDelete: [CKRecord.ID(recordName: "old")])
        let modified = Recorder<(Int, Int, Bool)>()
        let perRecord = Recorder<String>()
        modify.perRecordCompletionBlock = { record, _ in perRecord.append(record.recordID.recordName) }
        modify.modifyRecordsCompletionBlock = { saved, deleted, error in
            modified.append((saved?.count ?? -1, deleted?.count ?? -1, error == nil))
        }
        await runToCompletion(modify, on: database)
        #expect(perRecord.values == ["n1"])
        #expect(modified.values.first.map { $0 == (1, 1, true) } == true)

        let fetch = CKFetchRecordsOperation(recordIDs: [CKRecord.ID(recordName: "n1"), CKRecord.ID(recordName: "missing")])
        let fetched = Recorder<Int>()
        fetch.fetchRecordsCompletionBlock = { records, _ in fetched.append(records?.count ?? -1) }
        await runToCompletion(fetch, on: database)
        #expect(fetched.values == [1])

        let zones = CKFetchRecordZonesOperation.fetchAllRecordZonesOperation()
        let zoneCount = Recorder<Int>()
        zones.fetchRecordZonesCompletionBlock = { zones, _ in zoneCount.append(zones?.count ?? -1) }
        await runToCompletion(zones, on: database)
        #expect(zoneCount.values == [2])

        let modifyZones = CKModifyRecordZonesOperation(recordZonesToSave: [CKRecordZone(zoneName: "Z")], recordZoneIDsToDelete: nil)
        let zoneSaves = Recorder<Int>()
        modifyZones.modifyRecordZonesCompletionBlock = { saved, _, _ in zoneSaves.append(saved?.count ?? -1) }
        await runToCompletion(modifyZones, on: database)
        #expect(zoneSaves.values == [1])
    }
}
