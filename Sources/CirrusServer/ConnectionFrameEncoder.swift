import CirrusWire
import NIOCore

/// What the ``ConnectionHandler`` hands to its ``ConnectionFrameEncoder``.
enum OutboundFrame: Sendable {
    /// A frame to encode.
    case frame(Wire.Frame)
    /// `Frame{stream_id, event}` whose event is already in wire format (a journaled callback
    /// replayed as stored).
    case event(streamID: UInt64, Wire.EncodedEvent)
    /// `Frame{stream_id, event{seq, download_asset{chunk{offset, data}}}}`, its data sent from
    /// the buffer it was read into.
    case assetChunk(streamID: UInt64, seq: UInt64, offset: UInt64, data: ByteBuffer)
    /// `count` length-prefixed frames already encoded, one after another (a stream's events
    /// already in wire format, framed together), sent as they are.
    case frames(ByteBuffer, count: Int)

    /// The frame, decoded where it is already encoded (tests, diagnostics); of ``frames(_:count:)``,
    /// the first.
    func decoded() throws(WireError) -> Wire.Frame {
        switch self {
        case .frames(let buffer, _):
            guard let length = buffer.getInteger(at: buffer.readerIndex, as: UInt32.self),
                let body = buffer.getBytes(at: buffer.readerIndex + FrameDecoder.lengthPrefixBytes, length: Int(length))
            else {
                throw .malformedMessage("no whole frame in \(buffer.readableBytes) bytes")
            }
            return try Wire.Frame(serializedBytes: body)
        case .frame(let frame):
            return frame
        case .event(let streamID, let event):
            return Wire.Frame(streamID: streamID, kind: .event(try event.decoded()))
        case .assetChunk(let streamID, let seq, let offset, let data):
            let chunk = Wire.AssetChunk(offset: offset, data: Array(data.readableBytesView))
            let event = Wire.Event(seq: seq, payload: .downloadAsset(Wire.DownloadAssetEvent(callback: .chunk(chunk))))
            return Wire.Frame(streamID: streamID, kind: .event(event))
        }
    }
}

/// Encodes the server's outbound frames like `FrameEncoder`, under the `max_frame_bytes` the
/// connection negotiated in `Hello`/`HelloAck`. A frame too large fails only its own write
/// (NIO's `MessageToByteHandler` would fail every later write too) and is remembered, so the
/// ``ConnectionHandler`` right above it can end that stream with an error instead.
final class ConnectionFrameEncoder: ChannelOutboundHandler {
    typealias OutboundIn = OutboundFrame
    typealias OutboundOut = ByteBuffer

    /// The largest frame body sent; lowered to the client's limit at `HelloAck`. Event loop only.
    var maximumFrameBytes: Int
    /// The size of the last frame refused as too large, until ``takeRefusedSize()``.
    private var refusedSize: Int?
    /// Reused for the next frame while small (an idle connection stays cheap); if something
    /// downstream still holds it, clearing it gets fresh storage (copy-on-write).
    private var buffer: ByteBuffer?
    private static let maximumRetainedCapacity = 4_096

    init(maximumFrameBytes: Int) {
        self.maximumFrameBytes = maximumFrameBytes
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .frames(let frames, _) = self.unwrapOutboundIn(data) {
            // Encoded and checked against the limit by the connection handler.
            context.write(self.wrapOutboundOut(frames), promise: promise)
            return
        }
        var buffer = self.buffer.take() ?? context.channel.allocator.buffer(capacity: 256)
        buffer.clear()
        do {
            switch self.unwrapOutboundIn(data) {
            case .frame(let frame):
                do {
                    try FrameEncoder.encode(frame, into: &buffer, maximumFrameBytes: self.maximumFrameBytes)
                } catch {
                    self.refusedSize = frame.serializedSize
                    throw error
                }
            case .event(let streamID, let event):
                do {
                    try FrameEncoder.encode(
                        streamID: streamID, event: event, into: &buffer, maximumFrameBytes: self.maximumFrameBytes)
                } catch {
                    self.refusedSize = FrameEncoder.frameBodySize(streamID: streamID, event: event)
                    throw error
                }
            case .assetChunk(let streamID, let seq, let offset, let data):
                do {
                    try FrameEncoder.encodeAssetChunkHeader(
                        streamID: streamID, seq: seq, offset: offset, dataBytes: data.readableBytes, into: &buffer,
                        maximumFrameBytes: self.maximumFrameBytes)
                } catch {
                    self.refusedSize = FrameEncoder.assetChunkFrameBodySize(
                        streamID: streamID, seq: seq, offset: offset, dataBytes: data.readableBytes)
                    throw error
                }
                // The header, then the content as it was read: the TLS handler encrypts both
                // in one flush without the content being copied into a frame buffer first.
                context.write(self.wrapOutboundOut(buffer), promise: nil)
                context.write(self.wrapOutboundOut(data), promise: promise)
                self.retain(buffer)
                return
            case .frames:
                return  // Written above.
            }
        } catch {
            promise?.fail(error)
            return
        }
        context.write(self.wrapOutboundOut(buffer), promise: promise)
        self.retain(buffer)
    }

    /// Keeps `buffer` for the next frame while it is small.
    private func retain(_ buffer: ByteBuffer) {
        if buffer.capacity <= Self.maximumRetainedCapacity {
            self.buffer = buffer
        }
    }

    /// The size of the frame the last write refused as too large, if it did; clears it.
    func takeRefusedSize() -> Int? {
        defer { self.refusedSize = nil }
        return self.refusedSize
    }
}
