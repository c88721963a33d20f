import NIOConcurrencyHelpers
import NIOCore

/// The bytes every connection of a server has handed to its socket and the kernel has not taken
/// yet, against a limit. Each connection already stops producing while its own socket is not
/// writable (a few hundred KiB); this bounds the sum, so ten thousand stalled peers cannot add
/// up to gigabytes either. While the budget is spent, every connection that itself has more
/// than ``fairShare`` waiting pauses its operations; connections whose peers keep up go on, so
/// stalled peers cannot starve the others by spending the budget.
///
/// For example:
/// ```swift
/// var configuration = ServerConfiguration(tls: tls)
/// configuration.outboundBudget = OutboundBudget(limit: 64 << 20)
/// ```
public final class OutboundBudget: Sendable {
    /// The bytes that may wait for sockets at once before connections pause.
    public let limit: Int
    /// Bytes a connection may have waiting and keep producing while the budget is spent.
    public let fairShare: Int
    private let pending = NIOLockedValueBox(0)

    public init(limit: Int = 256 << 20, fairShare: Int = 64 << 10) {
        self.limit = limit
        self.fairShare = fairShare
    }

    /// Bytes waiting for sockets now.
    public var pendingBytes: Int {
        self.pending.withLockedValue { $0 }
    }

    /// Whether connections should stop producing.
    public var isSpent: Bool {
        self.pendingBytes >= self.limit
    }

    func add(_ bytes: Int) {
        self.pending.withLockedValue { $0 += bytes }
    }

    func release(_ bytes: Int) {
        self.pending.withLockedValue { $0 -= bytes }
    }
}

/// Counts the ciphertext a connection writes against its server's ``OutboundBudget`` until the
/// socket has taken it (or the write failed). Sits next to the socket, below TLS.
final class OutboundAccountingHandler: ChannelOutboundHandler {
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    let budget: OutboundBudget
    /// This connection's bytes the socket has not taken yet. Event-loop confined.
    private(set) var pendingBytes = 0

    init(budget: OutboundBudget) {
        self.budget = budget
    }

    /// Whether this connection should pause: the budget is spent and it holds more than its
    /// fair share of it.
    var shouldPause: Bool {
        self.pendingBytes > self.budget.fairShare && self.budget.isSpent
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let bytes = self.unwrapOutboundIn(data).readableBytes
        guard bytes > 0 else {
            context.write(data, promise: promise)
            return
        }
        self.budget.add(bytes)
        self.pendingBytes += bytes
        let written = promise ?? context.eventLoop.makePromise()
        // The future completes on this channel's event loop, where `self` lives.
        let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
        written.futureResult.whenComplete { _ in
            handler.value.pendingBytes -= bytes
            handler.value.budget.release(bytes)
        }
        context.write(data, promise: written)
    }
}
