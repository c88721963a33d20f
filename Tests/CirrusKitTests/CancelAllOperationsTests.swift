@testable import CirrusKit
import CirrusModel
import CirrusTestSupport
import CirrusWire
import Foundation
import Testing

/// `CKContainer.cancelAllOperations()` against the fake peer.
@Suite("CKContainer.cancelAllOperations")
struct CancelAllOperationsTests {
    @Test("Running and waiting operations of the container and its databases all end with operationCancelled")
    func cancelsEveryAddedOperation() async throws {
        let peer = try await FakePeer.start { _, _ in FakeReply(payloads: OperationLifecycleTests.fetchResults(["a"]), hang: true) }
        defer { Task { await peer.stop() } }
        let container = CKContainer(identifier: "iCloud.test", configuration: TestCertificates.client(port: peer.port))
        let records = Recorder<String>()
        let results = Recorder<String>()
        let running = CKFetchRecordsOperation(recordIDs: [CKRecord.ID(recordName: "a")])
        running.perRecordResultBlock = { id, _ in records.append(id.recordName) }
        let waiting = CKFetchRecordsOperation(recordIDs: [CKRecord.ID(recordName: "a")])
        let waitingCancelledFirst = Recorder<Bool>()
        running.fetchRecordsResultBlock = {
            // The operation waiting for this one is cancelled before this one ends, so it
            // never starts a stream of its own.
            waitingCancelledFirst.append(waiting.isCancelled)
            results.append("running \($0.failureCode.map { "\($0)" } ?? "success")")
        }
        waiting.addDependency(running)
        waiting.fetchRecordsResultBlock = { results.append("waiting \($0.failureCode.map { "\($0)" } ?? "success")") }
        container.privateCloudDatabase.add(running)
        container.publicCloudDatabase.add(waiting)
        try await eventually { records.count == 1 }

        container.cancelAllOperations()
        await waitUntilFinished(running)
        await waitUntilFinished(waiting)
        try await eventually { peer.log.withLockedValue { $0.cancels.count } == 1 }
        let code = "\(CKError.Code.operationCancelled)"
        #expect(Set(results.values) == ["running \(code)", "waiting \(code)"])
        #expect(running.isCancelled && waiting.isCancelled)
        #expect(peer.opens.count == 1)
        #expect(waitingCancelledFirst.values == [true])
    }

    @Test("An operation added after cancelAllOperations runs")
    func laterOperationsRun() async throws {
        let peer = try await FakePeer.start { _, _ in FakeReply(payloads: OperationLifecycleTests.fetchResults(["a"])) }
        defer { Task { await peer.stop() } }
        let container = CKContainer(identifier: "iCloud.test", configuration: TestCertificates.client(port: peer.port))
        container.cancelAllOperations()
        let operation = CKFetchRecordsOperation(recordIDs: [CKRecord.ID(recordName: "a")])
        let result = Recorder<Result<Void, any Error>>()
        operation.fetchRecordsResultBlock = { result.append($0) }
        await runToCompletion(operation, on: container.privateCloudDatabase)
        #expect(result.values.count == 1)
        #expect(result.values.first?.failureCode == nil)
    }
}
