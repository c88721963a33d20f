@testable import CirrusKit
import CirrusModel
import CirrusTestSupport
import CirrusWire
import Dispatch
import Foundation
import NIOConcurrencyHelpers
import Testing

/// `CKOperation` as a `Foundation.Operation`, against the fake peer.
@Suite("CKOperation life cycle")
struct OperationLifecycleTests {
    static func fetchResults(_ names: [String]) -> [Wire.Event.Payload] {
        names.map { name in
            .fetchRecords(
                Wire.FetchRecordsEvent(
                    callback: .perRecordResult(
                        Wire.RecordOutcome(
                            recordID: Wire.RecordID(recordName: name),
                            outcome: .record(Wire.Record(recordID: Wire.RecordID(recordName: name), recordType: "Note", recordChangeTag: "t1"))
                        )
                    )
                )
            )
        }
    }

    @Test("A dependent operation starts only after the CKOperation it depends on finished")
    func dependencies() async throws {
        let peer = try await FakePeer.start { _, _ in FakeReply(payloads: Self.fetchResults(["a"])) }
        defer { Task { await peer.stop() } }
        let container = CKContainer(identifier: "iCloud.test", configuration: TestCertificates.client(port: peer.port))
        let order = Recorder<String>()
        let first = CKFetchRecordsOperation(recordIDs: [CKRecord.ID(recordName: "a")])
        first.fetchRecordsResultBlock = { _ in order.append("first result") }
        first.completionBlock = { order.append("first completion") }
        let second = CKFetchRecordsOperation(recordIDs: [CKRecord.ID(recordName: "a")])
        second.perRecordResultBlock = { _, _ in order.append("second record") }
        second.addDependency(first)
        let plain = BlockOperation { order.append("block") }
        plain.addDependency(second)
        let queue = OperationQueue()
        second.database = container.privateCloudDatabase
        queue.addOperation(plain)
        queue.addOperation(second)
        container.privateCloudDatabase.add(first)
        await waitUntilFinished(plain)
        let values = order.values
        let firstResult = try #require(values.firstIndex(of: "first result"))
        let secondRecord = try #require(values.firstIndex(of: "second record"))
        #expect(firstResult < secondRecord)
        #expect(values.last == "block")
        #expect(second.isFinished)
    }

    @Test("cancel() before start: the result block gets operationCancelled and nothing is sent")
    func cancelBeforeStart() async throws {
        let peer = try await FakePeer.start()
        defer { Task { await peer.stop() } }
        let container = CKContainer(identifier: "iCloud.test", configuration: TestCertificates.client(port: peer.port))
        let operation = CKFetchRecordsOperation(recordIDs: [CKRecord.ID(recordName: "a")])
        let result = Recorder<Result<Void, any Error>>()
        operation.fetchRecordsResultBlock = { result.append($0) }
        operation.cancel()
        await runToCompletion(operation, on: container.privateCloudDatabase)
        #expect(result.values.count == 1)
        #expect(result.values.first?.failureCode == .operationCancelled)
        #expect(operation.isCancelled)
        #expect(peer.opens.isEmpty)
    }

    @Test("cancel() while running sends Cancel; the result block gets operationCancelled once")
    func cancelWhileRunning() async throws {
        let peer = try await FakePeer.start { _, _ in FakeReply(payloads: Self.fetchResults(["a"]), hang: true) }
        defer { Task { await peer.stop() } }
        let container = CKContainer(identifier: "iCloud.test", configuration: TestCertificates.client(port: peer.port))
        let operation = CKFetchRecordsOperation(recordIDs: [CKRecord.ID(recordName: "a")])
        let records = Recorder<String>()
        let result = Recorder<Result<Void, any Error>>()
        operation.perRecordResultBlock = { id, _ in records.append(id.recordName) }
        operation.fetchRecordsResultBlock = { result.append($0) }
        container.privateCloudDatabase.add(operation)
        try await eventually { records.count == 1 }
        #expect(operation.isExecuting)
        operation.cancel()
        await waitUntilFinished(operation)
        try await eventually { peer.log.withLockedValue { $0.cancels.count } == 1 }
        #expect(result.values.count == 1)
        #expect(result.values.first?.failureCode == .operationCancelled)
    }

    @Test("start() directly and waitUntilFinished() without a queue")
    func startDirectly() async throws {
        let peer = try await FakePeer.start { _, _ in FakeReply(payloads: Self.fetchResults(["a", "b"])) }
        defer { Task { await peer.stop() } }
        let container = CKContainer(identifier: "iCloud.test", configuration: TestCertificates.client(port: peer.port))
        let operation = CKFetchRecordsOperation(recordIDs: [CKRecord.ID(recordName: "a"), CKRecord.ID(recordName: "b")])
        operation.configuration.container = container
        let records = Recorder<String>()
        operation.perRecordResultBlock = { id, _ in records.append(id.recordName) }
        #expect(operation.isAsynchronous)
        operation.start()
        await waitUntilFinished(operation)
        #expect(records.values == ["a", "b"])
        #expect(peer.opens.first?.databaseScope == .private)
        #expect(peer.opens.first?.containerIdentifier == "iCloud.test")
    }

    @Test("Callbacks run one at a time, in event order, on the operation's queue")
    func serialOrderedCallbacks() async throws {
        let names = (0..<200).map { "r\($0)" }
        let peer = try await FakePeer.start { _, _ in FakeReply(payloads: Self.fetchResults(names)) }
        defer { Task { await peer.stop() } }
        let container = CKContainer(identifier: "iCloud.test", configuration: TestCertificates.client(port: peer.port))
        let operation = CKFetchRecordsOperation(recordIDs: names.map { CKRecord.ID(recordName: $0) })
        let inside = NIOLockedValueBox(0)
        let overlaps = NIOLockedValueBox(0)
        let seen = Recorder<String>()
        operation.perRecordResultBlock = { id, _ in
            if inside.withLockedValue({ $0 += 1; return $0 }) > 1 { overlaps.withLockedValue { $0 += 1 } }
            seen.append(id.recordName)
            inside.withLockedValue { $0 -= 1 }
        }
        let resultSeenAll = NIOLockedValueBox(false)
        operation.fetchRecordsResultBlock = { _ in resultSeenAll.withLockedValue { $0 = seen.count == names.count } }
        await runToCompletion(operation, on: container.privateCloudDatabase)
        #expect(seen.values == names)
        #expect(overlaps.withLockedValue { $0 } == 0)
        #expect(resultSeenAll.withLockedValue { $0 })
    }

    @Test("More than 400 items: limitExceeded without a round trip")
    func limitExceeded() async throws {
        let peer = try await FakePeer.start()
        defer { Task { await peer.stop() } }
        let container = CKContainer(identifier: "iCloud.test", configuration: TestCertificates.client(port: peer.port))
        let records = (0..<401).map { CKRecord(recordType: "Note", recordID: CKRecord.ID(recordName: "n\($0)")) }
        let operation = CKModifyRecordsOperation(recordsToSave: records, recordIDsToDelete: nil)
        let result = Recorder<Result<Void, any Error>>()
        operation.modifyRecordsResultBlock = { result.append($0) }
        await runToCompletion(operation, on: container.privateCloudDatabase)
        #expect(result.values.first?.failureCode == .limitExceeded)
        #expect(peer.opens.isEmpty)

        let fetch = CKFetchRecordsOperation(recordIDs: (0..<401).map { CKRecord.ID(recordName: "n\($0)") })
        let fetchResult = Recorder<Result<Void, any Error>>()
        fetch.fetchRecordsResultBlock = { fetchResult.append($0) }
        await runToCompletion(fetch, on: container.privateCloudDatabase)
        #expect(fetchResult.values.first?.failureCode == .limitExceeded)
        #expect(peer.opens.isEmpty)
    }

    @Test("The same record twice in one modify: invalidArguments without a round trip")
    func sameRecordTwice() async throws {
        let peer = try await FakePeer.start()
        defer { Task { await peer.stop() } }
        let container = CKContainer(identifier: "iCloud.test", configuration: TestCertificates.client(port: peer.port))
        // Two record objects with equal IDs, the second one last: found however the IDs are kept.
        let records = (0..<3).map { CKRecord(recordType: "Note", recordID: CKRecord.ID(recordName: "n\($0)")) }
            + [CKRecord(recordType: "Note", recordID: CKRecord.ID(recordName: "n1"))]
        let operation = CKModifyRecordsOperation(recordsToSave: records, recordIDsToDelete: nil)
        let result = Recorder<Result<Void, any Error>>()
        operation.modifyRecordsResultBlock = { result.append($0) }
        await runToCompletion(operation, on: container.privateCloudDatabase)
        #expect(result.values.first?.failureCode == .invalidArguments)
        if case .failure(let error as CKError)? = result.values.first {
            #expect(error.message?.contains("is saved twice in one operation") == true, "\(error)")
        }
        #expect(peer.opens.isEmpty)
    }

    @Test("No progress within timeoutIntervalForRequest: networkFailure, and the server is told")
    func requestTimeout() async throws {
        let peer = try await FakePeer.start { _, _ in FakeReply(hang: true) }
        defer { Task { await peer.stop() } }
        let container = CKContainer(identifier: "iCloud.test", configuration: TestCertificates.client(port: peer.port))
        try await container.ping()  // Connected, so the Open goes out at once.
        let operation = CKFetchRecordsOperation(recordIDs: [CKRecord.ID(recordName: "a")])
        operation.configuration.timeoutIntervalForRequest = 2
        let result = Recorder<Result<Void, any Error>>()
        operation.fetchRecordsResultBlock = { result.append($0) }
        await runToCompletion(operation, on: container.privateCloudDatabase)
        #expect(result.values.first?.failureCode == .networkFailure)
        // The server is told of every stream it saw. (On a machine loaded enough that the Open
        // had not gone out when the timeout fired, it never goes out and there is nothing to tell.)
        try await eventually { peer.log.withLockedValue { $0.cancels.count == $0.opens.count } }
        #expect(peer.log.withLockedValue { $0.opens.count } <= 1)
        #expect(!OperationTimeouts.shared.isWatching(operation), "a finished operation is no longer watched")
    }

    @Test("One timer serves every operation: a short timeout fires while a long one keeps running")
    func timeoutsShareOneTimer() async throws {
        let peer = try await FakePeer.start { _, _ in FakeReply(hang: true) }
        defer { Task { await peer.stop() } }
        let container = CKContainer(identifier: "iCloud.test", configuration: TestCertificates.client(port: peer.port))
        try await container.ping()
        let long = CKFetchRecordsOperation(recordIDs: [CKRecord.ID(recordName: "long")])
        long.configuration.timeoutIntervalForRequest = 600
        let longResult = Recorder<Result<Void, any Error>>()
        long.fetchRecordsResultBlock = { longResult.append($0) }
        container.privateCloudDatabase.add(long)
        try await eventually { OperationTimeouts.shared.isWatching(long) }

        // Added after the long one: the shared timer must start ticking at this one's pace.
        let short = CKFetchRecordsOperation(recordIDs: [CKRecord.ID(recordName: "short")])
        short.configuration.timeoutIntervalForRequest = 1
        let shortResult = Recorder<Result<Void, any Error>>()
        short.fetchRecordsResultBlock = { shortResult.append($0) }
        await runToCompletion(short, on: container.privateCloudDatabase)
        #expect(shortResult.values.first?.failureCode == .networkFailure)
        #expect(!OperationTimeouts.shared.isWatching(short))
        #expect(longResult.values.isEmpty, "the long operation is still running")
        #expect(OperationTimeouts.shared.isWatching(long))

        long.cancel()
        try await eventually { long.isFinished }
        #expect(longResult.values.first?.failureCode == .operationCancelled)
        #expect(!OperationTimeouts.shared.isWatching(long))
    }

    @Test("The connection drops mid-operation: networkFailure")
    func connectionLost() async throws {
        let peer = try await FakePeer.start { _, _ in FakeReply(closeConnection: true) }
        defer { Task { await peer.stop() } }
        let container = CKContainer(identifier: "iCloud.test", configuration: TestCertificates.client(port: peer.port))
        let operation = CKFetchRecordsOperation(recordIDs: [CKRecord.ID(recordName: "a")])
        let result = Recorder<Result<Void, any Error>>()
        operation.fetchRecordsResultBlock = { result.append($0) }
        await runToCompletion(operation, on: container.privateCloudDatabase)
        #expect(result.values.first?.failureCode == .networkFailure)
    }

    @Test("GoAway before the server saw a stream: it is opened again on a new connection")
    func goAwayRetries() async throws {
        let peer = try await FakePeer.start { _, connection in
            connection == 1 ? FakeReply(goAway: true) : FakeReply(payloads: Self.fetchResults(["a"]))
        }
        defer { Task { await peer.stop() } }
        let container = CKContainer(identifier: "iCloud.test", configuration: TestCertificates.client(port: peer.port))
        let operation = CKFetchRecordsOperation(recordIDs: [CKRecord.ID(recordName: "a")])
        let records = Recorder<String>()
        let result = Recorder<Result<Void, any Error>>()
        operation.perRecordResultBlock = { id, _ in records.append(id.recordName) }
        operation.fetchRecordsResultBlock = { result.append($0) }
        await runToCompletion(operation, on: container.privateCloudDatabase)
        #expect(records.values == ["a"])
        #expect(result.values.first.map { (try? $0.get()) != nil } == true)
        #expect(peer.log.withLockedValue { $0.connections } == 2)
        let opens = peer.opens
        try #require(opens.count == 2)
        #expect(opens[0].operationID == opens[1].operationID)
    }

    @Test("A long-lived operation: isLongLived goes in Open; Persisted runs longLivedOperationWasPersistedBlock before the events")
    func longLived() async throws {
        let peer = try await FakePeer.start { _, _ in FakeReply(payloads: Self.fetchResults(["a"]), persisted: true) }
        defer { Task { await peer.stop() } }
        let container = CKContainer(identifier: "iCloud.test", configuration: TestCertificates.client(port: peer.port))
        let operation = CKFetchRecordsOperation(recordIDs: [CKRecord.ID(recordName: "a")])
        operation.configuration.isLongLived = true
        let order = Recorder<String>()
        operation.longLivedOperationWasPersistedBlock = { order.append("persisted") }
        operation.perRecordResultBlock = { id, _ in order.append(id.recordName) }
        operation.fetchRecordsResultBlock = { _ in order.append("result") }
        await runToCompletion(operation, on: container.privateCloudDatabase)
        #expect(order.values == ["persisted", "a", "result"])
        #expect(peer.opens.first?.configuration?.isLongLived == true)
    }
}
