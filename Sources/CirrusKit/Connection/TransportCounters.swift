import NIOConcurrencyHelpers
import NIOCore

/// Byte and connection counters of one container's connections (`CKContainer.transportStatistics`),
/// also reported through swift-metrics (``CirrusClientMetrics``).
/// Thread-safe; the counting handler updates it from the event loop.
final class TransportCounters: Sendable {
    private let totals = NIOLockedValueBox(CKContainer.TransportStatistics())
    let metrics: ClientMetrics

    init(metrics: ClientMetrics) {
        self.metrics = metrics
    }

    var snapshot: CKContainer.TransportStatistics { self.totals.withLockedValue { $0 } }

    func received(_ bytes: Int) {
        self.totals.withLockedValue { $0.bytesReceived += UInt64(bytes) }
        self.metrics.bytesReceived.increment(by: bytes)
    }

    func sent(_ bytes: Int) {
        self.totals.withLockedValue { $0.bytesSent += UInt64(bytes) }
        self.metrics.bytesSent.increment(by: bytes)
    }

    /// A connection completed `Hello`; counted as a reconnect when the container had one before.
    func connected() {
        let earlier = self.totals.withLockedValue { totals -> UInt64 in
            defer { totals.connectionsEstablished += 1 }
            return totals.connectionsEstablished
        }
        self.metrics.connections.increment()
        if earlier > 0 { self.metrics.reconnects.increment() }
    }
}

/// Counts the bytes a connection moves on the socket (TLS records included). Sits first in the
/// pipeline, below `TLSHandler`; passes everything through unchanged.
final class TransportCountingHandler: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let counters: TransportCounters

    init(counters: TransportCounters) {
        self.counters = counters
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        self.counters.received(self.unwrapInboundIn(data).readableBytes)
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        self.counters.sent(self.unwrapOutboundIn(data).readableBytes)
        context.write(data, promise: promise)
    }
}
