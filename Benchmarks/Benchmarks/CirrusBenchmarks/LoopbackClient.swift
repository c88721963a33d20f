import CirrusServer
import CirrusTLS
import CirrusWire
import NIOCore
import NIOPosix

/// Completes one promise per `Pong`, in order.
final class PongHandler: ChannelInboundHandler {
    typealias InboundIn = Wire.Frame
    typealias OutboundOut = Wire.Frame

    private var waiting = CircularBuffer<EventLoopPromise<Void>>()
    private var helloAck: EventLoopPromise<Void>?
    private var nonce: UInt64 = 0

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = self.unwrapInboundIn(data)
        switch frame.kind {
        case .pong:
            self.waiting.popFirst()?.succeed(())
        case .helloAck:
            self.helloAck?.succeed(())
            self.helloAck = nil
        default:
            break
        }
    }

    func hello(context: ChannelHandlerContext) -> EventLoopFuture<Void> {
        let promise = context.eventLoop.makePromise(of: Void.self)
        self.helloAck = promise
        let hello = Wire.Hello(protocolVersion: Wire.protocolVersion, clientName: "bench")
        context.writeAndFlush(self.wrapOutboundOut(Wire.Frame(streamID: 0, kind: .hello(hello))), promise: nil)
        return promise.futureResult
    }

    /// Sends `count` Pings in one flush; succeeds when every Pong is back.
    func pings(_ count: Int, context: ChannelHandlerContext) -> EventLoopFuture<Void> {
        var futures: [EventLoopFuture<Void>] = []
        futures.reserveCapacity(count)
        for _ in 0..<count {
            self.nonce &+= 1
            let promise = context.eventLoop.makePromise(of: Void.self)
            self.waiting.append(promise)
            futures.append(promise.futureResult)
            context.write(self.wrapOutboundOut(Wire.Frame(streamID: 0, kind: .ping(Wire.Ping(nonce: self.nonce)))), promise: nil)
        }
        context.flush()
        return EventLoopFuture.andAllSucceed(futures, on: context.eventLoop)
    }
}

/// A client on a real loopback TLS connection to an in-process `CirrusServer`.
final class LoopbackBench: Sendable {
    let server: CirrusServer
    let channel: any Channel

    init(certificates: String) async throws {
        var configuration = ServerConfiguration(
            tls: .server(
                certificateChainPath: certificates + "/server.pem",
                privateKeyPath: certificates + "/server-key.pem",
                clientCATrustRootsPath: certificates + "/ca.pem",
                clientCertificateVerification: .required
            )
        )
        configuration.port = 0
        let server = CirrusServer(configuration: configuration)
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
        self.channel = channel
        try await self.onHandler { handler, context in handler.hello(context: context) }
    }

    private func onHandler(
        _ body: @escaping @Sendable (PongHandler, ChannelHandlerContext) -> EventLoopFuture<Void>
    ) async throws {
        let channel = self.channel
        try await channel.eventLoop.flatSubmit {
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
        var remaining = count
        while remaining > 0 {
            let batch = min(inFlight, remaining)
            try await self.onHandler { handler, context in handler.pings(batch, context: context) }
            remaining -= batch
        }
    }

    func close() async {
        try? await self.channel.close()
        await self.server.shutdownGracefully()
    }
}
