import CirrusWire
import NIOCore

/// Encodes the server's outbound frames like `FrameEncoder`, under the `max_frame_bytes` the
/// connection negotiated in `Hello`/`HelloAck`. A frame too large fails only its own write
/// (NIO's `MessageToByteHandler` would fail every later write too) and is remembered, so the
/// ``ConnectionHandler`` right above it can end that stream with an error instead.
///
/// Frames written between two flushes are encoded back to back into one buffer, handed down
/// at the flush (or as soon as it holds ``maximumBatchBytes``): one buffer, one write and one
/// copy into the TLS records per batch of events instead of one per frame.
final class ConnectionFrameEncoder: ChannelOutboundHandler {
    typealias OutboundIn = Wire.Frame
    typealias OutboundOut = ByteBuffer

    /// The largest frame body sent; lowered to the client's limit at `HelloAck`. Event loop only.
    var maximumFrameBytes: Int
    /// The size of the last frame refused as too large, until ``takeRefusedSize()``.
    private var refusedSize: Int?
    /// Frames encoded since the last flush, not yet handed down.
    private var batch: ByteBuffer?
    /// Completes when the batch has been written: the promises of its frames, cascaded.
    private var batchPromise: EventLoopPromise<Void>?
    /// Storage kept for the next batch while small (an idle connection stays cheap); if
    /// something downstream still holds it, clearing it gets fresh storage (copy-on-write).
    private var spare: ByteBuffer?
    private static let maximumRetainedCapacity = 4_096
    /// A batch this large is handed down before the flush, so the channel's writability sees
    /// its bytes and a burst never sits in one growing buffer.
    static let maximumBatchBytes = 64 * 1_024

    init(maximumFrameBytes: Int) {
        self.maximumFrameBytes = maximumFrameBytes
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let frame = self.unwrapOutboundIn(data)
        var buffer = self.batch.take() ?? self.freshBuffer(context: context)
        do {
            // Leaves the buffer as it was when the frame is refused.
            try FrameEncoder.encode(frame, into: &buffer, maximumFrameBytes: self.maximumFrameBytes)
        } catch {
            self.refusedSize = frame.serializedSize
            if buffer.readableBytes > 0 {
                self.batch = buffer
            }
            promise?.fail(error)
            return
        }
        self.batch = buffer
        if let promise {
            if let batchPromise = self.batchPromise {
                batchPromise.futureResult.cascade(to: promise)
            } else {
                self.batchPromise = promise
            }
        }
        if buffer.readableBytes >= Self.maximumBatchBytes {
            self.writeBatch(context: context)
        }
    }

    func flush(context: ChannelHandlerContext) {
        self.writeBatch(context: context)
        context.flush()
    }

    func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        // What was written before the close goes first (the close's own flush sends it).
        self.writeBatch(context: context)
        context.close(mode: mode, promise: promise)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.batch = nil
        self.spare = nil
        self.batchPromise.take()?.fail(ChannelError.ioOnClosedChannel)
    }

    /// The size of the frame the last write refused as too large, if it did; clears it.
    func takeRefusedSize() -> Int? {
        defer { self.refusedSize = nil }
        return self.refusedSize
    }

    private func freshBuffer(context: ChannelHandlerContext) -> ByteBuffer {
        guard var buffer = self.spare.take() else {
            return context.channel.allocator.buffer(capacity: 256)
        }
        buffer.clear()
        return buffer
    }

    private func writeBatch(context: ChannelHandlerContext) {
        guard let buffer = self.batch.take() else {
            self.batchPromise.take()?.succeed(())
            return
        }
        context.write(self.wrapOutboundOut(buffer), promise: self.batchPromise.take())
        if buffer.capacity <= Self.maximumRetainedCapacity {
            self.spare = buffer
        }
    }
}
