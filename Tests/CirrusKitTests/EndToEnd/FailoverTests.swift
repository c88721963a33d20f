import CirrusKit
import CirrusTestSupport
import CirrusModel
import CirrusServer
import Foundation
import MetricsTestKit
import NIOConcurrencyHelpers
import Testing

/// Several servers in `CirrusClientConfiguration.servers`: a failed attempt moves on to the
/// next server, and a long-lived operation resumes on whichever node answers.
@Suite("Fail-over between servers", .serialized)
struct FailoverTests {
    @Test func aServerThatDoesNotAnswerIsSkippedAtOnce() async throws {
        let closed = try await FakePeer.start { _, _ in FakeReply() }
        let closedPort = closed.port
        await closed.stop()
        let peer = try await FakePeer.start { _, _ in FakeReply() }
        defer { Task { await peer.stop() } }

        let metrics = TestMetrics()
        var configuration = TestCertificates.client(port: closedPort)
        configuration.failoverServers = [CirrusClientConfiguration.Server(host: "127.0.0.1", port: peer.port)]
        // Were the second server tried only after a backoff, the ping would wait minutes.
        configuration.reconnectBaseDelay = 600
        configuration.reconnectMaximumDelay = 600
        configuration.metricsFactory = metrics
        let container = CKContainer(identifier: "iCloud.test", configuration: configuration)
        try await container.ping()
        #expect(peer.log.withLockedValue { $0.connections } == 1)
        #expect(try metrics.expectCounter(CirrusClientMetrics.Name.connectionFailures, [("container", "iCloud.test")]).totalValue == 1)
        #expect(try metrics.expectCounter(CirrusClientMetrics.Name.connections, [("container", "iCloud.test")]).totalValue == 1)
    }

    @Test func aLongLivedModifyCutOnOneNodeResumesOnTheOtherAndReportsEveryRecordOnce() async throws {
        try await withStack(clock: nil) { _, internals in
            // Node B: another server over the same storage and long-lived operations, as
            // cirrusd nodes over one database are.
            try await withServer(configure: {
                $0.executor = StorageExecutor(storage: internals.storage, users: internals.users, assets: internals.assets)
                $0.longLivedOperations = internals.longLived
                $0.users = internals.users
            }) { _, nodeB in
                // Node A, behind a proxy: its first connection is cut mid-stream, every later
                // one at once, as if the node had died.
                let connections = NIOLockedValueBox(0)
                let nodeA = try await CuttingProxy.start(targetPort: internals.port) {
                    let count = connections.withLockedValue { count -> Int in
                        count += 1
                        return count
                    }
                    return count == 1 ? 6_000 : 0
                }
                var configuration = TestCertificates.client(port: nodeA.port, user: "alice")
                configuration.failoverServers = [CirrusClientConfiguration.Server(host: "127.0.0.1", port: nodeB)]
                let database = CKContainer(identifier: "iCloud.com.example.notes", configuration: configuration)
                    .privateCloudDatabase

                let records = LongLivedEndToEndTests.notes(600, prefix: "failover-")
                let operation = CKModifyRecordsOperation(recordsToSave: records, recordIDsToDelete: nil)
                operation.configuration.isLongLived = true
                let saved = NIOLockedValueBox<[String]>([])
                let result = NIOLockedValueBox<Result<Void, any Error>?>(nil)
                operation.perRecordSaveBlock = { id, _ in saved.withLockedValue { $0.append(id.recordName) } }
                operation.modifyRecordsResultBlock = { outcome in result.withLockedValue { $0 = outcome } }
                database.add(operation)
                await finished(operation)

                #expect(throws: Never.self) { try result.withLockedValue { $0 }?.get() }
                #expect(saved.withLockedValue { $0 } == records.map(\.recordID.recordName), "every record once, in order")
                #expect(nodeA.cutCount >= 1, "the first node's connection was cut")
                await nodeA.stop()
            }
        }
    }
}
