@testable import CirrusKit
import CirrusModel
import CirrusTestSupport
import CirrusWire
import Foundation
import NIOConcurrencyHelpers
import Testing

@Suite("Flow control")
struct FlowControlTests {
    @Test("Credit is granted back as callbacks consume events; a slow callback never lets more than the window pile up")
    func slowConsumer() async throws {
        let count = 120
        let window: UInt32 = 8
        let names = (0..<count).map { "r\($0)" }
        let peer = try await FakePeer.start { _, _ in FakeReply(payloads: OperationLifecycleTests.fetchResults(names)) }
        defer { Task { await peer.stop() } }
        var configuration = TestCertificates.client(port: peer.port)
        configuration.streamWindow = window
        let container = CKContainer(identifier: "iCloud.test", configuration: configuration)
        let operation = CKFetchRecordsOperation(recordIDs: names.map { CKRecord.ID(recordName: $0) })
        let consumed = NIOLockedValueBox(0)
        let maximumAhead = NIOLockedValueBox(0)
        operation.perRecordResultBlock = { _, _ in
            Thread.sleep(forTimeInterval: 0.002)
            let done = consumed.withLockedValue { $0 += 1; return $0 }
            let sent = peer.log.withLockedValue { $0.eventsSent }
            maximumAhead.withLockedValue { $0 = max($0, sent - done) }
        }
        await runToCompletion(operation, on: container.privateCloudDatabase)
        #expect(consumed.withLockedValue { $0 } == count)
        #expect(peer.opens.first?.initialWindow == window)
        // Events sent but not yet consumed never exceed the window.
        #expect(maximumAhead.withLockedValue { $0 } <= Int(window))
        // The client granted (about) everything it consumed back, in batches.
        #expect(peer.log.withLockedValue { $0.windowCredit } >= UInt64(count) - UInt64(window))
    }

    @Test("A server that sends beyond the credit is a protocol error: networkFailure")
    func creditViolation() async throws {
        let names = (0..<40).map { "r\($0)" }
        let peer = try await FakePeer.start { _, _ in
            FakeReply(payloads: OperationLifecycleTests.fetchResults(names), ignoreCredit: true)
        }
        defer { Task { await peer.stop() } }
        var configuration = TestCertificates.client(port: peer.port)
        configuration.streamWindow = 4
        let container = CKContainer(identifier: "iCloud.test", configuration: configuration)
        let operation = CKFetchRecordsOperation(recordIDs: names.map { CKRecord.ID(recordName: $0) })
        let records = Recorder<String>()
        let result = Recorder<Result<Void, any Error>>()
        operation.perRecordResultBlock = { id, _ in records.append(id.recordName) }
        operation.fetchRecordsResultBlock = { result.append($0) }
        await runToCompletion(operation, on: container.privateCloudDatabase)
        #expect(result.values.first?.failureCode == .networkFailure)
        #expect(records.count <= 4)
    }
}

@Suite("Configuration merge rule")
struct ConfigurationMergeTests {
    @Test("Operation explicit wins, then group explicit, then the default")
    func mergeTable() async throws {
        // (group value, operation value) -> applied, for timeoutIntervalForRequest.
        let cases: [(Double?, Double?, Double)] = [
            (nil, nil, 60),
            (nil, 5, 5),
            (7, nil, 7),
            (7, 5, 5),
        ]
        for (groupValue, operationValue, expected) in cases {
            let operation = CKFetchRecordsOperation(recordIDs: [])
            let group = CKOperationGroup()
            if let groupValue { group.defaultConfiguration.timeoutIntervalForRequest = groupValue }
            if let operationValue { operation.configuration.timeoutIntervalForRequest = operationValue }
            operation.group = group
            #expect(operation.resolvedConfiguration.timeoutIntervalForRequest == expected)
        }
    }

    @Test("An explicit default value still wins over the group's")
    func explicitDefaultWins() {
        let operation = CKFetchRecordsOperation(recordIDs: [])
        let group = CKOperationGroup()
        group.defaultConfiguration.isLongLived = true
        group.defaultConfiguration.qualityOfService = .utility
        operation.group = group
        #expect(operation.resolvedConfiguration.isLongLived)
        #expect(operation.qualityOfService == .utility)
        operation.configuration.isLongLived = false
        operation.qualityOfService = .default
        #expect(!operation.resolvedConfiguration.isLongLived)
        #expect(operation.qualityOfService == .default)
        #expect(operation.configuration.qualityOfService == .default)
    }

    @Test("Open carries the explicit values of the operation and of the group")
    func wireConfiguration() async throws {
        let peer = try await FakePeer.start()
        defer { Task { await peer.stop() } }
        let container = CKContainer(identifier: "iCloud.test", configuration: TestCertificates.client(port: peer.port))
        let group = CKOperationGroup()
        group.name = "Initial Sync"
        group.quantity = 3
        group.expectedSendSize = .megabytes
        group.defaultConfiguration.timeoutIntervalForResource = 30
        group.defaultConfiguration.allowsCellularAccess = false
        let operation = CKFetchRecordsOperation(recordIDs: [CKRecord.ID(recordName: "a")])
        operation.group = group
        operation.configuration.timeoutIntervalForRequest = 12
        operation.qualityOfService = .userInitiated
        await runToCompletion(operation, on: container.privateCloudDatabase)
        let open = try #require(peer.opens.first)
        #expect(open.operationID == operation.operationID)
        #expect(open.configuration?.timeoutIntervalForRequestMs == 12_000)
        #expect(open.configuration?.qualityOfService == .userInitiated)
        #expect(open.configuration?.isLongLived == nil)
        #expect(open.configuration?.timeoutIntervalForResourceMs == nil)
        #expect(open.group?.operationGroupID == group.operationGroupID)
        #expect(open.group?.name == "Initial Sync")
        #expect(open.group?.quantity == 3)
        #expect(open.group?.expectedSendSize == .megabytes)
        #expect(open.group?.defaultConfiguration?.timeoutIntervalForResourceMs == 30_000)
        #expect(open.group?.defaultConfiguration?.allowsCellularAccess == false)
        #expect(open.group?.defaultConfiguration?.timeoutIntervalForRequestMs == nil)
    }

    @Test("Assigning a configuration copies it")
    func assignmentCopies() {
        let shared = CKOperation.Configuration()
        shared.timeoutIntervalForRequest = 9
        let operation = CKFetchRecordsOperation(recordIDs: [])
        operation.configuration = shared
        shared.timeoutIntervalForRequest = 1
        #expect(operation.configuration.timeoutIntervalForRequest == 9)
    }
}
