import NIOCore

/// Counts the bytes a connection receives and sends on the wire (TLS records included), at
/// the bottom of its pipeline. Bytes are added up in the handler and handed to the counters
/// once per read burst and once per flush, not per buffer.
final class TrafficCountingHandler: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let metrics: ServerMetrics
    private var received = 0
    private var sent = 0

    init(metrics: ServerMetrics) {
        self.metrics = metrics
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        self.received += self.unwrapInboundIn(data).readableBytes
        context.fireChannelRead(data)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        self.reportReceived()
        context.fireChannelReadComplete()
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        self.sent += self.unwrapOutboundIn(data).readableBytes
        context.write(data, promise: promise)
    }

    func flush(context: ChannelHandlerContext) {
        self.reportSent()
        context.flush()
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.reportReceived()
        self.reportSent()
        context.fireChannelInactive()
    }

    private func reportReceived() {
        if self.received > 0 {
            self.metrics.bytesReceived.increment(by: self.received)
            self.received = 0
        }
    }

    private func reportSent() {
        if self.sent > 0 {
            self.metrics.bytesSent.increment(by: self.sent)
            self.sent = 0
        }
    }
}
