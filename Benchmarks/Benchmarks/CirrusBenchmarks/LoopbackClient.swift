import CirrusServer
import CirrusTLS
import CirrusWire
import NIOCore
import NIOPosix

/// Keeps a number of Pings outstanding, sending the next as each Pong arrives, all on the
/// channel's event loop: what is measured is the protocol round trip, not task hops.
final class PongHandler: ChannelInboundHandler {
    typealias InboundIn = Wire.Frame
    typealias OutboundOut = Wire.Frame

    private var helloAck: EventLoopPromise<Void>?
    private var streaming: (streamID: UInt64, received: Int, done: EventLoopPromise<Int>)?
    private var nextStreamID: UInt64 = 1
    /// CirrusKit's default stream window (`CirrusClientConfiguration.streamWindow`).
    static let streamWindow: UInt32 = 1024
    private var run: (toSend: Int, outstanding: Int, done: EventLoopPromise<Void>)?
    private var nonce: UInt64 = 0
    private var needsFlush = false

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = self.unwrapInboundIn(data)
        switch frame.kind {
        case .pong:
            guard var run = self.run else { return }
            run.outstanding -= 1
            if run.toSend > 0 {
                run.toSend -= 1
                run.outstanding += 1
                self.sendPing(context: context)
            }
            if run.outstanding == 0 {
                self.run = nil
                run.done.succeed(())
            } else {
                self.run = run
            }
        case .helloAck:
            self.helloAck?.succeed(())
            self.helloAck = nil
        case .event:
            guard var streaming = self.streaming, streaming.streamID == frame.streamID else { return }
            streaming.received += 1
            self.streaming = streaming
            // Grant credit back in halves of the window, as a client that keeps up would.
            if streaming.received % Int(Self.streamWindow / 2) == 0 {
                let window = Wire.Window(credit: Self.streamWindow / 2)
                context.write(self.wrapOutboundOut(Wire.Frame(streamID: frame.streamID, kind: .window(window))), promise: nil)
                self.needsFlush = true
            }
        case .complete:
            guard let streaming = self.streaming, streaming.streamID == frame.streamID else { return }
            self.streaming = nil
            streaming.done.succeed(streaming.received)
        default:
            break
        }
    }

    /// Opens one operation (or resumes the long-lived operation `resuming` from its first
    /// event) and counts its events until `Complete`.
    func stream(context: ChannelHandlerContext, resuming: String? = nil) -> EventLoopFuture<Int> {
        let done = context.eventLoop.makePromise(of: Int.self)
        let streamID = self.nextStreamID
        self.nextStreamID += 2
        self.streaming = (streamID, 0, done)
        let kind: Wire.Frame.Kind
        if let resuming {
            kind = .resume(Wire.Resume(operationID: resuming, lastSeq: 0, initialWindow: Self.streamWindow))
        } else {
            kind = .open(
                Wire.Open(operationID: "bench-\(streamID)", initialWindow: Self.streamWindow, request: .fetchRecords(.init())))
        }
        context.writeAndFlush(self.wrapOutboundOut(Wire.Frame(streamID: streamID, kind: kind)), promise: nil)
        return done.futureResult
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        if self.needsFlush {
            self.needsFlush = false
            context.flush()
        }
    }

    func hello(context: ChannelHandlerContext) -> EventLoopFuture<Void> {
        let promise = context.eventLoop.makePromise(of: Void.self)
        self.helloAck = promise
        let hello = Wire.Hello(protocolVersion: Wire.protocolVersion, clientName: "bench")
        context.writeAndFlush(self.wrapOutboundOut(Wire.Frame(streamID: 0, kind: .hello(hello))), promise: nil)
        return promise.futureResult
    }

    /// Sends `total` Pings keeping `inFlight` outstanding; succeeds when the last Pong is back.
    func pings(total: Int, inFlight: Int, context: ChannelHandlerContext) -> EventLoopFuture<Void> {
        let done = context.eventLoop.makePromise(of: Void.self)
        let first = min(inFlight, total)
        self.run = (total - first, first, done)
        for _ in 0..<first {
            self.sendPing(context: context)
        }
        context.flush()
        self.needsFlush = false
        return done.futureResult
    }

    private func sendPing(context: ChannelHandlerContext) {
        self.nonce &+= 1
        context.write(self.wrapOutboundOut(Wire.Frame(streamID: 0, kind: .ping(Wire.Ping(nonce: self.nonce)))), promise: nil)
        self.needsFlush = true
    }
}

/// A client on a real loopback TLS connection to an in-process `CirrusServer`. The server runs
/// on an event-loop group of its own, so its connection never shares a loop (a thread) with the
/// client's, which uses the singleton group.
final class LoopbackBench: Sendable {
    let server: CirrusServer
    let serverGroup: MultiThreadedEventLoopGroup
    let channel: any Channel

    init(
        certificates: String, executor: (any OperationExecutor)? = nil,
        longLivedOperations: LongLivedOperations? = nil
    ) async throws {
        var configuration = ServerConfiguration(
            tls: .server(
                certificateChainPath: certificates + "/server.pem",
                privateKeyPath: certificates + "/server-key.pem",
                clientCATrustRootsPath: certificates + "/ca.pem",
                clientCertificateVerification: .required
            )
        )
        configuration.port = 0
        if let executor {
            configuration.executor = executor
        }
        configuration.longLivedOperations = longLivedOperations
        let serverGroup = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let server = CirrusServer(configuration: configuration, group: serverGroup)
        let address = try await server.start()
        let context = try TLSContext(
            configuration: .client(
                trustRootsPath: certificates + "/ca.pem",
                certificateChainPath: certificates + "/alice.pem",
                privateKeyPath: certificates + "/alice-key.pem"
            )
        )
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    try sync.addHandler(TLSHandler(context: context, serverHostname: "localhost"))
                    try sync.addHandler(ByteToMessageHandler(FrameDecoder()))
                    try sync.addHandler(MessageToByteHandler(FrameEncoder()))
                    try sync.addHandler(PongHandler())
                }
            }
            .connect(host: "127.0.0.1", port: address.port ?? 0)
            .get()
        self.server = server
        self.serverGroup = serverGroup
        self.channel = channel
        try await self.onHandler { handler, context in handler.hello(context: context) }
    }

    private func onHandler<Value: Sendable>(
        _ body: @escaping @Sendable (PongHandler, ChannelHandlerContext) -> EventLoopFuture<Value>
    ) async throws -> Value {
        let channel = self.channel
        return try await channel.eventLoop.flatSubmit {
            do {
                let context = try channel.pipeline.syncOperations.context(handlerType: PongHandler.self)
                let handler = try channel.pipeline.syncOperations.handler(type: PongHandler.self)
                return body(handler, context)
            } catch {
                return channel.eventLoop.makeFailedFuture(error)
            }
        }.get()
    }

    /// `count` Pings with `inFlight` outstanding at a time.
    func pingRoundTrips(count: Int, inFlight: Int) async throws {
        try await self.onHandler { handler, context in handler.pings(total: count, inFlight: inFlight, context: context) }
    }

    /// Runs one streaming operation (or replays the long-lived operation `resuming`); returns
    /// the events received.
    func streamOnce(resuming: String? = nil) async throws -> Int {
        try await self.onHandler { handler, context in handler.stream(context: context, resuming: resuming) }
    }

    func close() async {
        try? await self.channel.close()
        await self.server.shutdownGracefully()
        try? await self.serverGroup.shutdownGracefully()
    }
}

/// Streams `count` copies of one event per operation, as fast as credit allows.
struct StreamingExecutor: OperationExecutor {
    let count: Int
    let payload: Wire.Event.Payload

    func run(_ open: Wire.Open, caller: ClientIdentity, stream: OperationStream) async -> OperationCompletion {
        for _ in 0..<self.count {
            do {
                try await stream.emit(self.payload)
            } catch {
                return .failure(.operationCancelled, "cancelled")
            }
        }
        return .success()
    }
}
