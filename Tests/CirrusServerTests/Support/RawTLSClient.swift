import CirrusTLS
import CirrusTestSupport
import CirrusWire
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// A TLS connection that writes arbitrary bytes (no framing), to feed the server bad input.
struct RawTLSClient {
    final class Collector: ChannelInboundHandler, Sendable {
        typealias InboundIn = ByteBuffer
        private let received = NIOLockedValueBox(ByteBuffer())
        let closed: EventLoopPromise<Void>

        init(closed: EventLoopPromise<Void>) { self.closed = closed }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            var buffer = self.unwrapInboundIn(data)
            _ = self.received.withLockedValue { $0.writeBuffer(&buffer) }
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            context.close(promise: nil)
        }

        func channelInactive(context: ChannelHandlerContext) {
            self.closed.succeed(())
        }

        var bytes: ByteBuffer { self.received.withLockedValue { $0 } }
    }

    let channel: any Channel
    let collector: Collector

    /// - Parameter receiveBufferBytes: a small socket receive buffer stands for a peer that
    ///   reads slowly (it also turns off the kernel's buffer autotuning, up to 32 MiB here).
    static func connect(port: Int, user: String = "alice", receiveBufferBytes: Int? = nil) async throws -> RawTLSClient {
        let context = try TLSContext(configuration: TestCertificates.client(user))
        let group = MultiThreadedEventLoopGroup.singleton
        let collector = Collector(closed: group.next().makePromise())
        var bootstrap = ClientBootstrap(group: group)
        if let receiveBufferBytes {
            bootstrap = bootstrap.channelOption(.socketOption(.so_rcvbuf), value: SocketOptionValue(receiveBufferBytes))
        }
        let channel = try await bootstrap
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(TLSHandler(context: context, serverHostname: "localhost"))
                    try channel.pipeline.syncOperations.addHandler(collector)
                }
            }
            .connect(host: "127.0.0.1", port: port)
            .get()
        return RawTLSClient(channel: channel, collector: collector)
    }

    func write(_ bytes: [UInt8]) async throws {
        try await self.channel.writeAndFlush(ByteBuffer(bytes: bytes))
    }

    /// Waits until something arrived from the server (bounded).
    func waitForBytes(timeout: Duration = .seconds(20)) async throws {
        let clock = ContinuousClock()
        let deadline = clock.now + timeout
        while self.collector.bytes.readableBytes == 0 {
            guard clock.now < deadline else { throw TestTimeout() }
            try await Task.sleep(for: .milliseconds(5))
        }
    }

    func close() async {
        try? await self.channel.close()
    }

    /// Waits until the server closes the connection, then decodes the frames it sent.
    func framesUntilClose(timeout: TimeAmount = .seconds(20)) async throws -> [Wire.Frame] {
        let timer = self.channel.eventLoop.scheduleTask(in: timeout) { self.channel.close(promise: nil) }
        try await self.collector.closed.futureResult.get()
        timer.cancel()
        var buffer = self.collector.bytes
        var decoder = FrameDecoder()
        var frames: [Wire.Frame] = []
        while let frame = try decoder.decode(buffer: &buffer) {
            frames.append(frame)
        }
        return frames
    }
}
