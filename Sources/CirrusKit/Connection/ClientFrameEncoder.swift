import CirrusWire
import NIOCore

/// Encodes outbound frames like `FrameEncoder`, but a frame too large for the negotiated limit
/// fails only its own write: the connection and every other stream carry on (NIO's
/// `MessageToByteHandler` would fail every later write too).
final class ClientFrameEncoder: ChannelOutboundHandler {
    typealias OutboundIn = Wire.Frame
    typealias OutboundOut = ByteBuffer

    /// The largest frame body sent; lowered to the server's limit after `HelloAck`. Event loop only.
    var maximumFrameBytes: Int

    init(maximumFrameBytes: Int = FrameDecoder.defaultMaximumFrameBytes) {
        self.maximumFrameBytes = maximumFrameBytes
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let frame = self.unwrapOutboundIn(data)
        var buffer = context.channel.allocator.buffer(capacity: 256)
        do {
            try FrameEncoder.encode(frame, into: &buffer, maximumFrameBytes: self.maximumFrameBytes)
        } catch {
            promise?.fail(error)
            return
        }
        context.write(self.wrapOutboundOut(buffer), promise: promise)
    }
}
