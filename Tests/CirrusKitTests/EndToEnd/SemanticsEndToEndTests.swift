import CirrusKit
import CirrusModel
import Foundation
import NIOConcurrencyHelpers
import Testing

private func note(_ name: String, _ fields: [String: String], zone: CKRecordZone.ID = .default) -> CKRecord {
    let record = CKRecord(recordType: "Note", recordID: CKRecord.ID(recordName: name, zoneID: zone))
    for (key, value) in fields { record[key] = value }
    return record
}

@Suite("CloudKit semantics end to end")
struct SemanticsEndToEndTests {
    @Test func changedKeysKeepsOtherFieldsAndIgnoresTheTag() async throws {
        try await withStack { container in
            let database = container("alice").privateCloudDatabase
            _ = try await database.save(note("n", ["title": "T", "body": "B"]))
            // Another device's stale, partial copy changes only the body.
            let partial = note("n", ["body": "B2"])
            let (saves, _) = try await database.modifyRecords(saving: [partial], deleting: [], savePolicy: .changedKeys)
            #expect((try? saves[partial.recordID]?.get()) != nil)
            let fetched = try await database.record(for: partial.recordID)
            #expect(fetched["title"] as? String == "T")
            #expect(fetched["body"] as? String == "B2")
        }
    }

    @Test func allKeysReplacesEverything() async throws {
        try await withStack { container in
            let database = container("alice").privateCloudDatabase
            _ = try await database.save(note("n", ["title": "T", "body": "B"]))
            let replacement = note("n", ["title": "T3"])
            _ = try await database.modifyRecords(saving: [replacement], deleting: [], savePolicy: .allKeys)
            let fetched = try await database.record(for: replacement.recordID)
            #expect(fetched["title"] as? String == "T3")
            #expect(fetched["body"] == nil)
        }
    }

    @Test(arguments: [true, false])
    func atomicZonesAllOrNothing(atomic: Bool) async throws {
        try await withStack { container in
            let database = container("alice").privateCloudDatabase
            let zone = try await database.save(CKRecordZone(zoneName: "Z")).zoneID
            let existing = try await database.save(note("taken", ["v": "1"], zone: zone))
            _ = existing
            // A new record whose ID exists makes a conflict; its neighbour is fine on its own.
            let conflicting = note("taken", ["v": "2"], zone: zone)
            let fine = note("fresh", ["v": "3"], zone: zone)
            let (saves, _) = try await database.modifyRecords(
                saving: [conflicting, fine], deleting: [], savePolicy: .ifServerRecordUnchanged, atomically: atomic
            )
            #expect(saves[conflicting.recordID]?.failureCode == .serverRecordChanged)
            if atomic {
                #expect(saves[fine.recordID]?.failureCode == .batchRequestFailed)
                let fetched = try await database.records(for: [fine.recordID])
                #expect(fetched[fine.recordID]?.failureCode == .unknownItem, "nothing in the zone was written")
            } else {
                #expect((try? saves[fine.recordID]?.get()) != nil)
            }
        }
    }

    @Test func partialFailureCarriesEveryItemsError() async throws {
        try await withStack { container in
            let database = container("alice").privateCloudDatabase
            let missingZone = CKRecordZone.ID(zoneName: "Nowhere", ownerName: CKCurrentUserDefaultName)
            let operation = CKModifyRecordsOperation(recordsToSave: [note("x", [:], zone: missingZone), note("ok", [:])])
            operation.isAtomic = false
            let result = Recorder<Result<Void, any Error>>()
            operation.modifyRecordsResultBlock = { result.append($0) }
            await runToCompletion(operation, on: database)
            let error = try #require(result.values.first.flatMap { result -> CKError? in
                if case .failure(let error) = result { return error as? CKError }
                return nil
            })
            #expect(error.code == .partialFailure)
            let itemError = error.partialErrorsByItemID?[CKRecord.ID(recordName: "x", zoneID: missingZone)] as? CKError
            #expect(itemError?.code == .zoneNotFound)
        }
    }

    @Test func anOperationReportingOnlyFailuresSavesEverythingElseAndSaysSo() async throws {
        try await withStack { container in
            let database = container("alice").privateCloudDatabase
            _ = try await database.save(note("taken", ["v": "1"]))
            let records = [note("a", ["v": "a"]), note("taken", ["v": "2"]), note("b", ["v": "b"])]
            let operation = CKModifyRecordsOperation(recordsToSave: records, recordIDsToDelete: [CKRecord.ID(recordName: "none")])
            operation.isAtomic = false
            operation.reportsSuccessfulItems = false
            let saves = Recorder<String>()
            let deletes = Recorder<String>()
            let result = Recorder<Result<Void, any Error>>()
            operation.perRecordSaveBlock = { id, result in
                saves.append("\(id.recordName) \(result.failureCode == .serverRecordChanged ? "conflict" : "other")")
            }
            operation.perRecordDeleteBlock = { id, _ in deletes.append(id.recordName) }
            operation.modifyRecordsResultBlock = { result.append($0) }
            await runToCompletion(operation, on: database)
            #expect(saves.values == ["taken conflict"])
            #expect(deletes.values.isEmpty)
            let error = try #require(result.values.first.flatMap { result -> CKError? in
                if case .failure(let error) = result { return error as? CKError }
                return nil
            })
            #expect(error.code == .partialFailure)
            #expect(error.partialErrorsByItemID?.keys.compactMap { ($0.base as? CKRecord.ID)?.recordName } == ["taken"])
            let fetched = try await database.records(for: records.map(\.recordID))
            #expect(fetched.compactMapValues { try? $0.get()["v"] as? String } == [
                CKRecord.ID(recordName: "a"): "a", CKRecord.ID(recordName: "taken"): "1", CKRecord.ID(recordName: "b"): "b",
            ])
        }
    }

    @Test func tooManyItemsAreRefused() async throws {
        try await withStack { container in
            let database = container("alice").privateCloudDatabase
            let records = (0..<401).map { note("r\($0)", [:]) }
            do {
                _ = try await database.modifyRecords(saving: records, deleting: [])
                Issue.record("401 items must be refused")
            } catch let error as CKError {
                #expect(error.code == .limitExceeded)
            }
        }
    }

    @Test func deleteSelfReferencesCascade() async throws {
        try await withStack { container in
            let database = container("alice").privateCloudDatabase
            let list = note("list", ["name": "Groceries"])
            let item = note("item", ["name": "Milk"])
            item["list"] = CKRecord.Reference(recordID: list.recordID, action: .deleteSelf)
            let keeper = note("keeper", ["name": "stays"])
            keeper["list"] = CKRecord.Reference(recordID: list.recordID, action: .none)
            _ = try await database.modifyRecords(saving: [list, item, keeper], deleting: [])
            _ = try await database.deleteRecord(withID: list.recordID)
            let fetched = try await database.records(for: [item.recordID, keeper.recordID])
            #expect(fetched[item.recordID]?.failureCode == .unknownItem, "deleteSelf: gone with its parent")
            #expect((try? fetched[keeper.recordID]?.get()) != nil, "action none: stays")
        }
    }

    @Test func publicDatabaseIsSharedButOnlyTheCreatorWrites() async throws {
        try await withStack { container in
            let post = note("post", ["text": "hello"])
            _ = try await container("alice").publicCloudDatabase.save(post)
            let seen = try await container("bob").publicCloudDatabase.record(for: post.recordID)
            #expect(seen["text"] as? String == "hello")
            seen["text"] = "bob was here"
            do {
                _ = try await container("bob").publicCloudDatabase.save(seen)
                Issue.record("bob must not modify alice's public record")
            } catch let error as CKError {
                #expect(error.code == .permissionFailure)
            }
        }
    }

    @Test func dependenciesOrderTwoOperations() async throws {
        try await withStack { container in
            let database = container("alice").privateCloudDatabase
            let order = Recorder<String>()
            let save = CKModifyRecordsOperation(recordsToSave: [note("dep", ["v": "1"])])
            save.modifyRecordsResultBlock = { _ in order.append("save") }
            let fetch = CKFetchRecordsOperation(recordIDs: [CKRecord.ID(recordName: "dep")])
            fetch.perRecordResultBlock = { _, result in order.append((try? result.get()) == nil ? "missing" : "found") }
            fetch.addDependency(save)
            database.add(fetch)
            database.add(save)
            await finished(fetch)
            #expect(order.values == ["save", "found"])
        }
    }

    @Test func cancelMidOperationEndsItWithOperationCancelled() async throws {
        try await withStack { container in
            let database = container("alice").privateCloudDatabase
            let records = (0..<300).map { note("c\($0)", ["v": "x"]) }
            _ = try await database.modifyRecords(saving: records, deleting: [])
            let fetch = CKFetchRecordsOperation(recordIDs: records.map(\.recordID))
            let seen = Recorder<String>()
            let result = Recorder<Result<Void, any Error>>()
            fetch.perRecordResultBlock = { id, _ in
                seen.append(id.recordName)
                if seen.count == 1 { fetch.cancel() }
            }
            fetch.fetchRecordsResultBlock = { result.append($0) }
            database.add(fetch)
            await finished(fetch)
            #expect(result.values.first?.failureCode == .operationCancelled)
            #expect(seen.count < 300)
        }
    }
}
