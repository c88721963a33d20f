import CirrusKit
import CirrusModel
import CirrusStore
import CirrusTestSupport
import Foundation
import NIOConcurrencyHelpers
import Testing

/// What a long-lived modify's blocks saw, in order.
private struct ModifyLog: Sendable {
    var saved: [String] = []
    var tags: [String: String] = [:]
    var persisted = 0
    var result: Result<Void, CKError>?
}

@Suite("Long-lived operations end to end", .serialized)
struct LongLivedEndToEndTests {
    static func notes(_ count: Int, prefix: String) -> [CKRecord] {
        (0..<count).map { i in
            let record = CKRecord(recordType: "Note", recordID: CKRecord.ID(recordName: String(format: "\(prefix)%05d", i)))
            record["i"] = i
            record["body"] = String(repeating: "b", count: 40)
            return record
        }
    }

    /// Runs a long-lived modify of `records` on `database` and collects its callbacks.
    private static func longLivedModify(_ records: [CKRecord], on database: CKDatabase) async -> ModifyLog {
        let operation = CKModifyRecordsOperation(recordsToSave: records, recordIDsToDelete: nil)
        operation.configuration.isLongLived = true
        operation.savePolicy = .allKeys
        let log = NIOLockedValueBox(ModifyLog())
        operation.longLivedOperationWasPersistedBlock = { log.withLockedValue { $0.persisted += 1 } }
        operation.perRecordSaveBlock = { id, result in
            log.withLockedValue {
                $0.saved.append(id.recordName)
                if case .success(let record) = result { $0.tags[id.recordName] = record.recordChangeTag }
            }
        }
        operation.modifyRecordsResultBlock = { result in
            log.withLockedValue { $0.result = result.mapError { ($0 as? CKError) ?? CKError(.internalError) } }
        }
        database.add(operation)
        await finished(operation)
        return log.withLockedValue { $0 }
    }

    /// The change tag of every record the server stores in Alice's default zone.
    private static func storedTags(_ storage: SQLiteStorage) async throws -> [String: String] {
        let database = DatabaseKey.private(container: "iCloud.com.example.notes", user: "_alice")
        var tags: [String: String] = [:]
        var since: Int64 = 0
        while true {
            let batch = try await storage.recordChanges(
                in: .init(zoneName: "_defaultZone", ownerName: "_alice"), of: database, since: since, limit: 400, desiredKeys: [])
            for record in batch.changed { tags[record.recordID?.recordName ?? ""] = record.recordChangeTag }
            since = batch.lastSeq
            if !batch.moreComing { return tags }
        }
    }

    @Test(arguments: [(11, 2_000), (12, 2_000), (13, 10_000)] as [(UInt64, Int)])
    func aLongLivedModifyThroughRandomCutsReportsEveryRecordOnceInOrder(seed: UInt64, count: Int) async throws {
        try await withStack(clock: nil) { _, internals in
            // Each of the first six connections is cut after a random number of bytes from the
            // server (mid-frame, mid-TLS-record); later ones are left alone.
            let generator = NIOLockedValueBox(SplitMix64(seed: seed))
            let connections = NIOLockedValueBox(0)
            let proxy = try await CuttingProxy.start(targetPort: internals.port) {
                let count = connections.withLockedValue { $0 += 1; return $0 }
                guard count <= 6 else { return nil }
                return generator.withLockedValue { Int.random(in: 500...40_000, using: &$0) }
            }
            var configuration = TestCertificates.client(port: proxy.port, user: "alice")
            configuration.maximumResumeAttempts = 20
            let database = CKContainer(identifier: "iCloud.com.example.notes", configuration: configuration).privateCloudDatabase

            let records = Self.notes(count, prefix: "s\(seed)-")
            let log = await Self.longLivedModify(records, on: database)
            #expect(throws: Never.self, "seed \(seed)") { try log.result?.get() }
            #expect(log.saved == records.map(\.recordID.recordName), "seed \(seed): every record once, in order")
            #expect(log.persisted == 1)
            #expect(proxy.cutCount >= 1, "seed \(seed): the run should have been cut at least once")
            // What the callbacks reported is what the server stored.
            let stored = try await Self.storedTags(internals.storage)
            #expect(stored == log.tags, "seed \(seed)")
            // Acknowledged after the result: no longer listed.
            let container = CKContainer(
                identifier: "iCloud.com.example.notes", configuration: TestCertificates.client(port: internals.port, user: "alice"))
            try await eventually(timeout: .seconds(30)) { (try? await container.allLongLivedOperationIDs().isEmpty) == true }
            await proxy.stop()
        }
    }

    @Test(arguments: [21, 22] as [UInt64])
    func aLongLivedZoneChangesFetchThroughRandomCutsDeliversEachCallbackOnce(seed: UInt64) async throws {
        try await withStack(clock: nil) { container, internals in
            let zone = CKRecordZone.ID(zoneName: "Feed")
            let direct = container("alice").privateCloudDatabase
            _ = try await direct.save(CKRecordZone(zoneID: zone))
            let records = (0..<3_000).map { i -> CKRecord in
                let record = CKRecord(recordType: "Note", recordID: CKRecord.ID(recordName: String(format: "f%05d", i), zoneID: zone))
                record["i"] = i
                return record
            }
            for start in stride(from: 0, to: records.count, by: 400) {
                _ = try await direct.modifyRecords(saving: Array(records[start..<min(start + 400, records.count)]), deleting: [])
            }
            // What a fetch without faults reports, in order.
            let expected = await fetchZoneChanges(direct, [zone: nil], resultsLimit: 50)

            let generator = NIOLockedValueBox(SplitMix64(seed: seed))
            let connections = NIOLockedValueBox(0)
            let proxy = try await CuttingProxy.start(targetPort: internals.port) {
                let count = connections.withLockedValue { $0 += 1; return $0 }
                guard count <= 6 else { return nil }
                return generator.withLockedValue { Int.random(in: 500...30_000, using: &$0) }
            }
            var configuration = TestCertificates.client(port: proxy.port, user: "alice")
            configuration.maximumResumeAttempts = 20
            let database = CKContainer(identifier: "iCloud.com.example.notes", configuration: configuration).privateCloudDatabase
            let operation = CKFetchRecordZoneChangesOperation(
                recordZoneIDs: [zone],
                configurationsByRecordZoneID: [zone: .init(previousServerChangeToken: nil, resultsLimit: 50)])
            operation.configuration.isLongLived = true
            let seen = NIOLockedValueBox<[ZoneFetchLog.Entry]>([])
            operation.recordWasChangedBlock = { id, _ in seen.withLockedValue { $0.append(.changed(id.recordName)) } }
            operation.recordZoneChangeTokensUpdatedBlock = { id, _, _ in seen.withLockedValue { $0.append(.tokenUpdated(id.zoneName)) } }
            operation.recordZoneFetchResultBlock = { id, result in
                if case .success(let (_, _, more)) = result {
                    seen.withLockedValue { $0.append(.zoneDone(id.zoneName, moreComing: more)) }
                }
            }
            let outcome = NIOLockedValueBox<Result<Void, any Error>?>(nil)
            operation.fetchRecordZoneChangesResultBlock = { result in outcome.withLockedValue { $0 = result } }
            database.add(operation)
            await finished(operation)
            #expect(throws: Never.self, "seed \(seed)") { try outcome.withLockedValue { $0 }?.get() }
            #expect(seen.withLockedValue { $0 } == expected.entries, "seed \(seed): every callback once, in order")
            #expect(proxy.cutCount >= 1, "seed \(seed)")
            await proxy.stop()
        }
    }

    @Test func aTenThousandRecordLongLivedModifyMatchesWhatItReports() async throws {
        try await withStack(clock: nil) { container, internals in
            let records = Self.notes(10_000, prefix: "big-")
            let log = await Self.longLivedModify(records, on: container("alice").privateCloudDatabase)
            #expect(throws: Never.self) { try log.result?.get() }
            #expect(log.saved.count == 10_000)
            #expect(log.saved == records.map(\.recordID.recordName))
            let stored = try await Self.storedTags(internals.storage)
            #expect(stored == log.tags)
        }
    }

    @Test func theSeedSampleResumesAnOperationWhoseAppWentAway() async throws {
        try await withStack(clock: nil) { container, internals in
            // A first app starts a long-lived modify through a proxy and loses the network for
            // good right after Persisted (its process "exits": it never reconnects).
            let proxy = try await CuttingProxy.start(targetPort: internals.port) { nil }
            var configuration = TestCertificates.client(port: proxy.port, user: "alice")
            configuration.maximumResumeAttempts = 1
            let firstApp = CKContainer(identifier: "iCloud.com.example.notes", configuration: configuration)
            let records = Self.notes(4_000, prefix: "app-")
            let started = CKModifyRecordsOperation(recordsToSave: records, recordIDsToDelete: nil)
            started.configuration.isLongLived = true
            let persisted = NIOLockedValueBox(false)
            started.longLivedOperationWasPersistedBlock = { persisted.withLockedValue { $0 = true } }
            firstApp.privateCloudDatabase.add(started)
            try await eventually { persisted.withLockedValue { $0 } }
            await proxy.stop()
            await finished(started)

            // A second app of the same user finds it and adds it: the seed sample, verbatim but
            // for the handlers in place of the comment and `print` going to a log.
            let log = NIOLockedValueBox<[String]>([])
            let saved = NIOLockedValueBox<[String]>([])
            let done = NIOLockedValueBox(0)
            @Sendable func print(_ line: String) { log.withLockedValue { $0.append(line) } }
            @Sendable func addCallbackHandlers(_ operation: CKOperation) {
                guard let modify = operation as? CKModifyRecordsOperation else { return }
                modify.perRecordSaveBlock = { id, _ in saved.withLockedValue { $0.append(id.recordName) } }
                modify.modifyRecordsResultBlock = { _ in done.withLockedValue { $0 += 1 } }
            }
            let container = container("alice")

            // --- sample (seed 000, CKOperation "Long-Lived Operations")
            container.fetchAllLongLivedOperationIDs(completionHandler: { (operationIDs, error) in
                if let error = error {
                    print("Error fetching long lived operations: \(error)")
                    // Handle error
                    return
                }
                guard let identifiers = operationIDs else { return }
                for operationID in identifiers {
                    container.fetchLongLivedOperation(withID: operationID, completionHandler: { (operation, error) in
                        if let error = error {
                            print("Error fetching operation: \(operationID)\n\(error)")
                            // Handle error
                            return
                        }
                        guard let operation = operation else { return }
                        // Add callback handlers to operation
                        addCallbackHandlers(operation)
                        container.add(operation)
                    })
                }
            })
            // --- end of sample

            try await eventually { done.withLockedValue { $0 } == 1 }
            #expect(log.withLockedValue { $0 }.isEmpty)
            #expect(saved.withLockedValue { $0 } == records.map(\.recordID.recordName))
            let stored = try await Self.storedTags(internals.storage)
            #expect(stored.count == 4_000)
            // Received and acknowledged: no longer listed.
            try await eventually(timeout: .seconds(30)) { (try? await container.allLongLivedOperationIDs().isEmpty) == true }
        }
    }
}
