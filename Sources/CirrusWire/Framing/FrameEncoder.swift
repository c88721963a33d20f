import NIOCore

/// Writes Cirrus frames: a 4-byte big-endian length, then the protobuf `Frame`, packed straight
/// into the outbound buffer.
///
/// A frame whose body would exceed `maximumFrameBytes` is refused with
/// ``WireError/Code/messageTooLarge`` rather than sent for the peer to reject.
public struct FrameEncoder: MessageToByteEncoder {
    public typealias OutboundIn = Wire.Frame

    public let maximumFrameBytes: Int

    public init(maximumFrameBytes: Int = FrameDecoder.defaultMaximumFrameBytes) {
        self.maximumFrameBytes = maximumFrameBytes
    }

    public func encode(data: Wire.Frame, out: inout ByteBuffer) throws {
        try Self.encode(data, into: &out, maximumFrameBytes: self.maximumFrameBytes)
    }

    /// Appends one length-prefixed frame to `buffer`.
    public static func encode(
        _ frame: Wire.Frame,
        into buffer: inout ByteBuffer,
        maximumFrameBytes: Int = FrameDecoder.defaultMaximumFrameBytes
    ) throws(WireError) {
        let start = buffer.writerIndex
        buffer.writeInteger(UInt32(0))
        frame.serialize(into: &buffer)
        let size = buffer.writerIndex - start - FrameDecoder.lengthPrefixBytes
        guard size <= maximumFrameBytes else {
            buffer.moveWriterIndex(to: start)
            throw WireError(
                code: .messageTooLarge,
                message: "frame of \(size) bytes exceeds the maximum of \(maximumFrameBytes) bytes"
            )
        }
        buffer.setInteger(UInt32(size), at: start)
    }
}
