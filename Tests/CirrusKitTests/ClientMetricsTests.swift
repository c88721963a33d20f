import CirrusKit
import CirrusTestSupport
import CirrusModel
import CirrusWire
import Foundation
import MetricsTestKit
import Testing

@Suite("CirrusKit's counters through swift-metrics: connections, reconnects, resumes, retries, bytes")
struct ClientMetricsTests {
    private func value(_ metrics: TestMetrics, _ label: String, container: String = "iCloud.test") -> Int64 {
        guard let counter = try? metrics.expectCounter(label, [("container", container)]) else { return 0 }
        return counter.totalValue
    }

    @Test func theFactoryIsNotPartOfEquality() {
        var configuration = CirrusClientConfiguration()
        #expect(configuration.metricsFactory == nil)
        let before = configuration
        configuration.metricsFactory = TestMetrics()
        #expect(configuration == before, "the metrics factory does not make another connection configuration")
    }

    @Test func aStreamTheServerNeverRanCountsARetryAndAReconnect() async throws {
        let peer = try await FakePeer.start { _, connection in
            connection == 1 ? FakeReply(goAway: true) : FakeReply(payloads: OperationLifecycleTests.fetchResults(["a"]))
        }
        defer { Task { await peer.stop() } }
        let metrics = TestMetrics()
        let container = LongLivedOperationTests.container(peer) { $0.metricsFactory = metrics }
        let operation = CKFetchRecordsOperation(recordIDs: [CKRecord.ID(recordName: "a")])
        await runToCompletion(operation, on: container.privateCloudDatabase)

        #expect(self.value(metrics, CirrusClientMetrics.Name.connections) == 2)
        #expect(self.value(metrics, CirrusClientMetrics.Name.reconnects) == 1)
        #expect(self.value(metrics, CirrusClientMetrics.Name.retries) == 1)
        #expect(self.value(metrics, CirrusClientMetrics.Name.resumes) == 0)
        let statistics = container.transportStatistics
        #expect(self.value(metrics, CirrusClientMetrics.Name.bytesSent) == Int64(statistics.bytesSent))
        #expect(self.value(metrics, CirrusClientMetrics.Name.bytesReceived) == Int64(statistics.bytesReceived))
        #expect(statistics.bytesReceived > 0)
    }

    @Test func aLongLivedOperationResumedAfterADropCountsAResume() async throws {
        let names = (1...6).map { "r\($0)" }
        let script = LongLivedScript(events: { _ in OperationLifecycleTests.fetchResults(names) })
        let peer = try await FakePeer.start(
            reply: { open, connection in
                var reply = script.reply(open, connection)
                if open.configuration?.isLongLived == true, connection == 1 { reply.closeAfterEvents = 2 }
                return reply
            },
            resume: script.resume
        )
        defer { Task { await peer.stop() } }
        let metrics = TestMetrics()
        let container = LongLivedOperationTests.container(peer) { $0.metricsFactory = metrics }
        await runToCompletion(LongLivedOperationTests.longLivedFetch(names), on: container.privateCloudDatabase)

        #expect(self.value(metrics, CirrusClientMetrics.Name.resumes) == 1)
        #expect(self.value(metrics, CirrusClientMetrics.Name.reconnects) == 1)
        #expect(self.value(metrics, CirrusClientMetrics.Name.connectionFailures) == 0)
    }

    @Test func aFailedConnectionAttemptIsCountedUnderItsContainer() async throws {
        let closedPort = try await FakePeer.start { _, _ in FakeReply() }
        let port = closedPort.port
        await closedPort.stop()
        let metrics = TestMetrics()
        var configuration = TestCertificates.client(port: port)
        configuration.metricsFactory = metrics
        let container = CKContainer(identifier: "iCloud.metrics", configuration: configuration)
        await #expect(throws: (any Error).self) { try await container.ping() }
        #expect(self.value(metrics, CirrusClientMetrics.Name.connectionFailures, container: "iCloud.metrics") >= 1)
        #expect(self.value(metrics, CirrusClientMetrics.Name.connections, container: "iCloud.metrics") == 0)
    }
}
