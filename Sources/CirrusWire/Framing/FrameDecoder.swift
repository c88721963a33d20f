import NIOCore

/// Splits a byte stream into Cirrus frames: a 4-byte big-endian length N, then N bytes of one
/// protobuf `Frame`.
///
/// The length is checked against `maximumFrameBytes` as soon as its four bytes arrive, before
/// any of the body is buffered, so a peer cannot make the decoder hold more than one maximal
/// frame. A body that is not a valid `Frame` is refused with ``WireError/Code/malformedMessage``.
/// A saved record's event (the frame a client receives for each record it saves) and the frame
/// opening a save of records (the server's largest) are read directly from their bytes
/// (`SaveEventReader`, `SaveRequestReader`); every other frame goes through protobuf-c.
///
/// For example:
/// ```swift
/// try channel.pipeline.syncOperations.addHandler(
///     ByteToMessageHandler(FrameDecoder(maximumFrameBytes: 4 << 20)))
/// ```
public struct FrameDecoder: NIOSingleStepByteToMessageDecoder {
    public typealias InboundOut = Wire.Frame

    /// Size of the length prefix in bytes.
    public static let lengthPrefixBytes = 4
    /// The default bound on a frame body: 4 MiB.
    public static let defaultMaximumFrameBytes = 4 * 1024 * 1024
    /// The smallest `max_frame_bytes` a peer may ask for in `Hello.limits`: 16 KiB. Below it
    /// a record of ordinary size could not be sent, so such a `Hello` is refused.
    public static let minimumNegotiableFrameBytes = 16 * 1024

    /// Frames whose body is longer than this are refused before they are buffered.
    public let maximumFrameBytes: Int

    /// Decoding borrows the event loop thread's scratch arena rather than owning one: an idle
    /// connection then holds no decode memory at all.
    public init(maximumFrameBytes: Int = FrameDecoder.defaultMaximumFrameBytes) {
        self.maximumFrameBytes = maximumFrameBytes
    }

    public mutating func decode(buffer: inout ByteBuffer) throws -> Wire.Frame? {
        guard let length = buffer.getInteger(at: buffer.readerIndex, as: UInt32.self) else {
            return nil
        }
        guard length <= self.maximumFrameBytes else {
            throw WireError.frameTooLarge(length: Int(length), maximum: self.maximumFrameBytes)
        }
        let total = Self.lengthPrefixBytes + Int(length)
        guard buffer.readableBytes >= total else {
            return nil
        }
        let frame = try buffer.withUnsafeReadableBytes { bytes throws(WireError) -> Wire.Frame in
            let body = UnsafeRawBufferPointer(rebasing: bytes[Self.lengthPrefixBytes..<total])
            // A saved record's event, one per record of a save, and the frame opening a save are
            // read straight into Swift.
            if let frame = SaveEventReader.frame(body) ?? SaveRequestReader.frame(body) { return frame }
            return try WireArena.withScratch { arena throws(WireError) in try Wire.Frame.decode(body, arena: arena) }
        }
        buffer.moveReaderIndex(forwardBy: total)
        return frame
    }

    public mutating func decodeLast(buffer: inout ByteBuffer, seenEOF: Bool) throws -> Wire.Frame? {
        try self.decode(buffer: &buffer)
    }
}
