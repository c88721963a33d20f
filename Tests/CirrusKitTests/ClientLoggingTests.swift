import CirrusKit
import CirrusModel
import CirrusTestSupport
import CirrusWire
import Foundation
import Logging
import NIOConcurrencyHelpers
import Testing

/// A log handler that keeps every message.
private struct CapturingLogHandler: LogHandler {
    let messages: NIOLockedValueBox<[(level: Logger.Level, message: String, metadata: Logger.Metadata)]>
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { self.metadata[key] }
        set { self.metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        self.messages.withLockedValue { $0.append((event.level, event.message.description, event.metadata ?? [:])) }
    }
}

@Suite("CirrusKit's logger: connection, retry and resume events, silent by default")
struct ClientLoggingTests {
    private func capturing() -> (Logger, NIOLockedValueBox<[(level: Logger.Level, message: String, metadata: Logger.Metadata)]>) {
        let messages = NIOLockedValueBox<[(level: Logger.Level, message: String, metadata: Logger.Metadata)]>([])
        var logger = Logger(label: "test") { _ in CapturingLogHandler(messages: messages) }
        logger.logLevel = .trace
        return (logger, messages)
    }

    @Test func theDefaultLoggerIsSilentAndNotPartOfEquality() {
        var configuration = CirrusClientConfiguration()
        #expect(configuration.logger.handler is SwiftLogNoOpLogHandler)
        let before = configuration
        configuration.logger = self.capturing().0
        #expect(configuration == before, "the logger does not make another connection configuration")
    }

    @Test func aLongLivedOperationResumedAfterADropIsLoggedWithItsID() async throws {
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
        let (logger, messages) = self.capturing()
        let container = LongLivedOperationTests.container(peer) { $0.logger = logger }
        let operation = LongLivedOperationTests.longLivedFetch(names)
        await runToCompletion(operation, on: container.privateCloudDatabase)
        let logged = messages.withLockedValue { $0 }
        let resumed = try #require(logged.first { $0.message.contains("resuming long-lived operation") })
        #expect(resumed.level == .info)
        #expect(resumed.metadata["operation"] == "\(operation.operationID)")
        #expect(resumed.metadata["attempt"] == "1")
        #expect(logged.contains { $0.message == "connected" && $0.level == .debug })
    }

    @Test func aFailedConnectionAttemptIsAWarning() async throws {
        // A port nothing listens on: a listener opened and closed again.
        let closedPort = try await FakePeer.start { _, _ in FakeReply() }
        let port = closedPort.port
        await closedPort.stop()
        let (logger, messages) = self.capturing()
        var configuration = TestCertificates.client(port: port)
        configuration.logger = logger
        configuration.connectTimeout = 30
        let container = CKContainer(identifier: "iCloud.test", configuration: configuration)
        await #expect(throws: (any Error).self) { try await container.ping() }
        let warning = try #require(messages.withLockedValue { $0 }.first { $0.message == "connection attempt failed" })
        #expect(warning.level == .warning)
        #expect(warning.metadata["server"] == "127.0.0.1:\(port)")
        #expect(warning.metadata["failuresInARow"] == "1")
    }
}
