import CirrusTLS
import CirrusTestSupport
import CirrusWire
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import Testing

/// The development certificates (CirrusTestSupport) as a TLS client uses them.
extension TestCertificates {
    static func client(_ user: String?) -> TLSConfiguration {
        TLSConfiguration.client(
            trustRootsPath: path("ca.pem"),
            certificateChainPath: user.map { path("\($0).pem") },
            privateKeyPath: user.map { path("\($0)-key.pem") }
        )
    }
}

/// What a test client saw happen on its connection.
enum ClientEvent: Sendable {
    case frame(Wire.Frame)
    case error(any Error)
    case closed
}

/// Collects everything that arrives on a test connection, in order.
final class EventCollector: ChannelInboundHandler, Sendable {
    typealias InboundIn = Wire.Frame
    typealias OutboundOut = Wire.Frame

    private let events = NIOLockedValueBox<[ClientEvent]>([])
    private let isFinished = NIOLockedValueBox(false)
    /// Whether the server's keepalive `Ping`s are answered here, as a client does, instead of
    /// being collected: on a loaded machine a test may wait longer than the keepalive interval
    /// between its own frames, and a `Ping` it did not expect would fail it.
    let answersPings: Bool
    private let answered = NIOLockedValueBox(0)

    init(answersPings: Bool = true) {
        self.answersPings = answersPings
    }

    /// The server's `Ping`s answered so far.
    var pingsAnswered: Int {
        self.answered.withLockedValue { $0 }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = self.unwrapInboundIn(data)
        if self.answersPings, frame.streamID == 0, case .ping(let ping) = frame.kind {
            let pong = Wire.Frame(streamID: 0, kind: .pong(Wire.Pong(nonce: ping.nonce)))
            context.writeAndFlush(self.wrapOutboundOut(pong), promise: nil)
            self.answered.withLockedValue { $0 += 1 }
            return
        }
        self.events.withLockedValue { $0.append(.frame(frame)) }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        self.events.withLockedValue { $0.append(.error(error)) }
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.events.withLockedValue { $0.append(.closed) }
    }

    /// Takes the oldest event; after `.closed`, keeps answering `.closed`.
    func take() -> ClientEvent? {
        self.events.withLockedValue { events in
            guard let first = events.first else { return nil }
            if case .closed = first { return .closed }
            events.removeFirst()
            return first
        }
    }
}

/// A minimal Cirrus client over real TLS and a real socket, for tests.
struct TestClient {
    let channel: any Channel
    let collector: EventCollector

    static func connect(
        port: Int,
        host: String = "127.0.0.1",
        user: String? = "alice",
        tls: TLSConfiguration? = nil,
        serverHostname: String? = "localhost",
        maximumFrameBytes: Int = FrameDecoder.defaultMaximumFrameBytes,
        answersPings: Bool = true
    ) async throws -> TestClient {
        let context = try TLSContext(configuration: tls ?? TestCertificates.client(user))
        let collector = EventCollector(answersPings: answersPings)
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    try sync.addHandler(TLSHandler(context: context, serverHostname: serverHostname))
                    try sync.addHandler(ByteToMessageHandler(FrameDecoder(maximumFrameBytes: maximumFrameBytes)))
                    try sync.addHandler(MessageToByteHandler(FrameEncoder()))
                    try sync.addHandler(collector)
                }
            }
            .connect(host: host, port: port)
            .get()
        return TestClient(channel: channel, collector: collector)
    }

    func send(_ frame: Wire.Frame) async throws {
        try await self.channel.writeAndFlush(frame)
    }

    /// The next thing that happens, or a test failure after `timeout` (a hang guard, not a
    /// speed assertion).
    func next(timeout: Duration = .seconds(20)) async throws -> ClientEvent {
        let clock = ContinuousClock()
        let deadline = clock.now + timeout
        while true {
            if let event = self.collector.take() { return event }
            guard clock.now < deadline else { throw TestTimeout() }
            try await Task.sleep(for: .milliseconds(1))
        }
    }

    /// The next frame; fails the test on an error or close.
    func nextFrame(timeout: Duration = .seconds(60)) async throws -> Wire.Frame {
        switch try await self.next(timeout: timeout) {
        case .frame(let frame): return frame
        case .error(let error): throw error
        case .closed: throw ConnectionClosed()
        }
    }

    /// Sends `Hello` and returns the `HelloAck`.
    func handshake(bearerToken: String? = nil) async throws -> Wire.HelloAck {
        try await self.send(
            Wire.Frame(
                streamID: 0,
                kind: .hello(Wire.Hello(protocolVersion: Wire.protocolVersion, clientName: "tests", bearerToken: bearerToken))
            )
        )
        let frame = try await self.nextFrame()
        guard case .helloAck(let ack) = frame.kind else {
            throw UnexpectedFrame(frame: frame)
        }
        return ack
    }

    /// Waits for the connection to close, skipping anything else; returns the
    /// `ConnectionError` the server sent first, if any.
    func waitForClose(timeout: Duration = .seconds(20)) async throws -> Wire.ConnectionError? {
        var received: Wire.ConnectionError?
        while true {
            switch try await self.next(timeout: timeout) {
            case .frame(let frame):
                if case .error(let error) = frame.kind, received == nil { received = error }
            case .error:
                continue
            case .closed:
                return received
            }
        }
    }

    func close() async {
        try? await self.channel.close()
    }
}

struct ConnectionClosed: Error {}
struct UnexpectedFrame: Error { var frame: Wire.Frame }
