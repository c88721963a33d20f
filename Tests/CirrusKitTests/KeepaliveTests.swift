import CirrusModel
import CirrusTestSupport
import CirrusWire
import NIOCore
import Testing

@testable import CirrusKit

@Suite("Keepalive")
struct KeepaliveTests {
    /// A container whose connection pings after `interval` of silence and gives up after `timeout`.
    static func container(port: Int, interval: TimeAmount, timeout: TimeAmount) -> CKContainer {
        var machine = ConnectionStateMachine.Configuration()
        machine.keepaliveInterval = interval
        machine.keepaliveTimeout = timeout
        let manager = ConnectionManager(
            configuration: TestCertificates.client(port: port),
            machineConfiguration: machine,
            timerInterval: .milliseconds(20)
        )
        return CKContainer(identifier: "iCloud.test", connectionManager: manager)
    }

    @Test("A server that stops answering pings: the running operation fails with networkFailure")
    func deadServer() async throws {
        let peer = try await FakePeer.start(behaviour: .init(answerPings: false)) { _, _ in FakeReply(hang: true) }
        defer { Task { await peer.stop() } }
        let container = Self.container(port: peer.port, interval: .milliseconds(100), timeout: .milliseconds(200))
        let operation = CKFetchRecordsOperation(recordIDs: [CKRecord.ID(recordName: "a")])
        let result = Recorder<Result<Void, any Error>>()
        operation.fetchRecordsResultBlock = { result.append($0) }
        await runToCompletion(operation, on: container.privateCloudDatabase)
        #expect(result.values.first?.failureCode == .networkFailure)
    }

    @Test("A live server keeps a quiet operation's connection up; the client answers the server's pings")
    func liveServer() async throws {
        let peer = try await FakePeer.start(behaviour: .init(pingAfterHello: true)) { _, _ in FakeReply(hang: true) }
        defer { Task { await peer.stop() } }
        let container = Self.container(port: peer.port, interval: .milliseconds(50), timeout: .seconds(3))
        let operation = CKFetchRecordsOperation(recordIDs: [CKRecord.ID(recordName: "a")])
        let result = Recorder<Result<Void, any Error>>()
        operation.fetchRecordsResultBlock = { result.append($0) }
        container.privateCloudDatabase.add(operation)
        // Wait for the answer to the server's ping (a slow machine may take a while to
        // connect), then let several keepalive intervals pass: the operation is still running.
        try await eventually { peer.log.withLockedValue { $0.pongs } == [42] }
        try await Task.sleep(for: .milliseconds(400))
        #expect(result.count == 0)
        #expect(operation.isExecuting)
        operation.cancel()
        await waitUntilFinished(operation)
        #expect(result.values.first?.failureCode == .operationCancelled)
    }

    @Test("The client pings as often as the server's HelloAck asks, though its own interval is longer")
    func serverPingInterval() async throws {
        let peer = try await FakePeer.start(behaviour: .init(pingIntervalMs: 50)) { _, _ in FakeReply(hang: true) }
        defer { Task { await peer.stop() } }
        let container = Self.container(port: peer.port, interval: .seconds(60), timeout: .seconds(20))
        try await container.ping()
        let before = peer.log.withLockedValue { $0.pings }
        try await eventually { peer.log.withLockedValue { $0.pings } >= before + 2 }
    }
}
