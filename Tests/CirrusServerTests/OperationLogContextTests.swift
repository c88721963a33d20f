import CirrusServer
import CirrusWire
import Logging
import NIOConcurrencyHelpers
import Testing

/// Keeps every line with the metadata a handler would write: its own, the provider's, the call's.
private struct CapturingHandler: LogHandler {
    let lines: NIOLockedValueBox<[(message: String, metadata: Logger.Metadata)]>
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace
    var metadataProvider: Logger.MetadataProvider? = OperationLogContext.metadataProvider

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { self.metadata[key] }
        set { self.metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        var merged = self.metadata
        merged.merge(self.metadataProvider?.get() ?? [:]) { _, new in new }
        merged.merge(event.metadata ?? [:]) { _, new in new }
        self.lines.withLockedValue { $0.append((event.message.description, merged)) }
    }
}

/// Writes one line through a logger it was given at creation, which knows nothing of the operation.
private struct LoggingExecutor: OperationExecutor {
    let logger: Logger

    func run(_ open: Wire.Open, caller: ClientIdentity, stream: OperationStream) async -> OperationCompletion {
        self.logger.info("running")
        return .success()
    }
}

@Suite("Log lines written while an operation runs carry its operation, stream, kind, user and connection")
struct OperationLogContextTests {
    @Test func anExecutorsLinesCarryTheOperationsFields() async throws {
        let lines = NIOLockedValueBox<[(message: String, metadata: Logger.Metadata)]>([])
        let logger = Logger(label: "test.executor") { _ in CapturingHandler(lines: lines) }
        try await withServer(configure: { $0.executor = LoggingExecutor(logger: logger) }) { _, port in
            let client = try await TestClient.connect(port: port)
            _ = try await client.handshake()
            let open = Wire.Open(operationID: "op-logged", initialWindow: 10, request: .fetchRecords(.init()))
            try await client.send(Wire.Frame(streamID: 7, kind: .open(open)))
            #expect(try await client.nextFrame().kind == .complete(Wire.Complete(lastSeq: 0)))
            await client.close()
        }
        let line = try #require(lines.withLockedValue { $0 }.first { $0.message == "running" })
        #expect(line.metadata["operation"] == "op-logged")
        #expect(line.metadata["stream"] == "7")
        #expect(line.metadata["kind"] == "fetch_records")
        #expect(line.metadata["user"] != nil)
        #expect(line.metadata["connection"] != nil, "the connection's own fields come along")
    }

    @Test func outsideAnOperationTheProviderAddsNothing() {
        #expect(OperationLogContext.metadataProvider.get().isEmpty)
    }
}
