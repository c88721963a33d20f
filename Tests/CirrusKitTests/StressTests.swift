import CirrusKit
import CirrusModel
import CirrusTestSupport
import CirrusWire
import Foundation
import NIOCore
import NIOPosix
import Testing

@Suite("Streams under load and limits")
struct StressTests {
    @Test("Streams beyond max_concurrent_streams wait for a free slot instead of being refused")
    func concurrencyLimit() async throws {
        let peer = try await FakePeer.start(behaviour: .init(maximumConcurrentStreams: 2)) { _, _ in FakeReply(hang: true) }
        defer { Task { await peer.stop() } }
        let container = CKContainer(identifier: "iCloud.test", configuration: TestCertificates.client(port: peer.port))
        let operations = (0..<6).map { _ in CKFetchRecordsOperation(recordIDs: [CKRecord.ID(recordName: "a")]) }
        for operation in operations {
            container.privateCloudDatabase.add(operation)
        }
        try await eventually { peer.opens.count == 2 }
        try await Task.sleep(for: .milliseconds(100))
        #expect(peer.opens.count == 2)
        for operation in operations {
            operation.cancel()
        }
        for operation in operations {
            await waitUntilFinished(operation)
        }
        #expect(peer.log.withLockedValue { $0.maximumOpenStreams } <= 2)
    }

    @Test("Hundreds of operations with events, some cancelled midway: each gets exactly one result")
    func manyOperations() async throws {
        let peer = try await FakePeer.start { open, _ in
            guard case .fetchRecords(let request) = open.request else { return FakeReply() }
            let hang = request.recordIDs.first?.recordName == "hang"
            return FakeReply(payloads: OperationLifecycleTests.fetchResults((0..<20).map { "r\($0)" }), hang: hang)
        }
        defer { Task { await peer.stop() } }
        var configuration = TestCertificates.client(port: peer.port)
        configuration.streamWindow = 4
        let container = CKContainer(identifier: "iCloud.test", configuration: configuration)
        let results = Recorder<(Int, CKError.Code?)>()
        let operations = (0..<300).map { index -> CKFetchRecordsOperation in
            let operation = CKFetchRecordsOperation(recordIDs: [CKRecord.ID(recordName: index % 3 == 0 ? "hang" : "x")])
            operation.fetchRecordsResultBlock = { results.append((index, $0.failureCode)) }
            return operation
        }
        for operation in operations {
            container.privateCloudDatabase.add(operation)
        }
        for (index, operation) in operations.enumerated() where index % 3 == 0 {
            operation.cancel()
        }
        for operation in operations {
            await waitUntilFinished(operation)
        }
        try await eventually { results.count == 300 }
        let byIndex = Dictionary(grouping: results.values, by: \.0)
        #expect(byIndex.count == 300)
        #expect(byIndex.values.allSatisfy { $0.count == 1 })
        for (index, entries) in byIndex {
            let code = entries.first?.1
            if index % 3 == 0 {
                #expect(code == .operationCancelled)
            } else {
                #expect(code == nil || code == .operationCancelled)
            }
        }
    }

    @Test("A server that accepts TCP but never completes TLS: networkFailure after connectTimeout")
    func silentServer() async throws {
        let listener = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .bind(host: "127.0.0.1", port: 0)
            .get()
        defer { listener.close(promise: nil) }
        var configuration = TestCertificates.client(port: try #require(listener.localAddress?.port))
        configuration.connectTimeout = 0.3
        let container = CKContainer(identifier: "iCloud.test", configuration: configuration)
        let error = await #expect(throws: CKError.self) { try await container.authenticatedUserRecordName() }
        #expect(error?.code == .networkFailure)
    }
}
