import CirrusWire
import NIOCore

/// Encodes outbound frames like `FrameEncoder`, but a frame too large for the negotiated limit
/// fails only its own write: the connection and every other stream carry on (NIO's
/// `MessageToByteHandler` would fail every later write too).
final class ClientFrameEncoder: ChannelOutboundHandler {
    typealias OutboundIn = ClientOutboundFrame
    typealias OutboundOut = ByteBuffer

    /// The largest frame body sent; lowered to the server's limit after `HelloAck`. Event loop only.
    var maximumFrameBytes: Int

    init(maximumFrameBytes: Int = FrameDecoder.defaultMaximumFrameBytes) {
        self.maximumFrameBytes = maximumFrameBytes
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        var buffer = context.channel.allocator.buffer(capacity: 256)
        do {
            switch self.unwrapOutboundIn(data) {
            case .frame(let frame):
                try FrameEncoder.encode(frame, into: &buffer, maximumFrameBytes: self.maximumFrameBytes)
            case .open(let frame, let records):
                buffer.reserveCapacity(records.bytes.count + 256)
                try FrameEncoder.encode(
                    frame, appendingRecordsToSave: records, into: &buffer, maximumFrameBytes: self.maximumFrameBytes)
            }
        } catch {
            promise?.fail(error)
            return
        }
        context.write(self.wrapOutboundOut(buffer), promise: promise)
    }
}

/// What the client's connection handler writes: a frame, or the `Open` of a modify-records
/// request whose records to save were written ahead, which the encoder puts into the request.
enum ClientOutboundFrame {
    case frame(Wire.Frame)
    case open(Wire.Frame, recordsToSave: Wire.EncodedRecords)

    /// The frame (an `Open`'s without the records written ahead).
    var frame: Wire.Frame {
        switch self {
        case .frame(let frame), .open(let frame, _): frame
        }
    }
}
