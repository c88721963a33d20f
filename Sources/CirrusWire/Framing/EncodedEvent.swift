public import NIOCore

extension Wire {
    /// An `Event` in protobuf wire format, as a long-lived operation's journal stores it. A
    /// replay sends it inside its `Frame` as it is (``FrameEncoder/encode(streamID:event:into:maximumFrameBytes:)``)
    /// instead of decoding it and encoding it again.
    ///
    /// For example:
    /// ```swift
    /// let stored = Wire.EncodedEvent(event)              // what the journal keeps
    /// let event = try Wire.EncodedEvent(seq: 7, bytes: row).decoded()
    /// ```
    public struct EncodedEvent: Sendable, Hashable {
        /// The event's `seq` (its field 1, read when the bytes were checked).
        public let seq: UInt64
        /// The serialized `Event`.
        public let bytes: [UInt8]

        /// Encodes `event`.
        public init(_ event: Wire.Event) {
            self.seq = event.seq
            self.bytes = event.serializedBytes()
        }

        /// Wraps stored bytes after checking their outline: protobuf fields that end where the
        /// bytes end, `seq` (field 1) equal to `seq`, and exactly one length-delimited payload
        /// field (numbered 20 and up, as `Event.payload`'s). The payload itself is not decoded; the peer's decoder checks it as it checks
        /// every frame.
        ///
        /// - throws: ``WireError`` `.malformedMessage` when the outline does not hold.
        public init(seq: UInt64, bytes: [UInt8]) throws(WireError) {
            let outline = try Self.outline(of: bytes)
            guard outline.seq == seq else {
                throw .malformedMessage("encoded event says seq \(outline.seq), expected \(seq)")
            }
            guard outline.payloads == 1 else {
                throw .malformedMessage("encoded event has \(outline.payloads) payload fields, expected 1")
            }
            self.seq = seq
            self.bytes = bytes
        }

        /// The event, decoded.
        ///
        /// - throws: ``WireError`` `.malformedMessage`.
        public func decoded() throws(WireError) -> Wire.Event {
            try Wire.Event(serializedBytes: self.bytes)
        }

        /// The lowest field number of `Event.payload`.
        private static let firstPayloadField: UInt64 = 20

        /// Walks the top-level fields of `bytes`: the value of field 1 and the number of
        /// length-delimited payload fields.
        private static func outline(of bytes: [UInt8]) throws(WireError) -> (seq: UInt64, payloads: Int) {
            var index = 0
            var seq: UInt64 = 0
            var payloads = 0
            while index < bytes.count {
                let key = try ProtobufVarint.read(bytes, at: &index)
                let field = key >> 3
                switch (field, key & 7) {
                case (1, 0):
                    seq = try ProtobufVarint.read(bytes, at: &index)
                case (let number, 2) where number >= Self.firstPayloadField:
                    let length = try ProtobufVarint.read(bytes, at: &index)
                    guard length <= UInt64(bytes.count - index) else {
                        throw .malformedMessage("encoded event field \(number) runs past its end")
                    }
                    index += Int(length)
                    payloads += 1
                default:
                    throw .malformedMessage("encoded event has field \(field) of wire type \(key & 7)")
                }
            }
            return (seq, payloads)
        }
    }
}

/// Protobuf base-128 varints, for the few fields Cirrus reads or writes without protobuf-c.
enum ProtobufVarint {
    /// Reads the varint at `index` and moves past it.
    ///
    /// - throws: ``WireError`` `.malformedMessage` when it is cut off or longer than 10 bytes.
    static func read(_ bytes: [UInt8], at index: inout Int) throws(WireError) -> UInt64 {
        var value: UInt64 = 0
        var shift: UInt64 = 0
        while index < bytes.count, shift < 64 {
            let byte = bytes[index]
            index += 1
            value |= UInt64(byte & 0x7F) << shift
            if byte & 0x80 == 0 { return value }
            shift += 7
        }
        throw .malformedMessage("truncated or overlong varint")
    }

    /// Appends `value` as a varint.
    static func write(_ value: UInt64, to buffer: inout ByteBuffer) {
        var value = value
        while value >= 0x80 {
            buffer.writeInteger(UInt8(truncatingIfNeeded: value) | 0x80)
            value >>= 7
        }
        buffer.writeInteger(UInt8(value))
    }
}

extension FrameEncoder {
    /// `Frame.stream_id`: field 1, varint.
    private static let streamIDKey: UInt8 = 1 << 3
    /// `Frame.event`: field 5, length-delimited.
    private static let eventKey: UInt8 = 5 << 3 | 2

    /// The body size (without the length prefix) of `Frame{stream_id, event}` carrying `event`.
    public static func frameBodySize(streamID: UInt64, event: Wire.EncodedEvent) -> Int {
        func varintSize(_ value: UInt64) -> Int { max(1, (64 - value.leadingZeroBitCount + 6) / 7) }
        let streamIDSize = streamID == 0 ? 0 : 1 + varintSize(streamID)
        return streamIDSize + 1 + varintSize(UInt64(event.bytes.count)) + event.bytes.count
    }

    /// Appends one length-prefixed `Frame{stream_id, event}` carrying `event`'s bytes as they
    /// are: the same bytes ``encode(_:into:maximumFrameBytes:)`` writes for that frame.
    ///
    /// - throws: ``WireError/Code/messageTooLarge`` (and writes nothing) when the frame body
    ///   would exceed `maximumFrameBytes`.
    public static func encode(
        streamID: UInt64,
        event: Wire.EncodedEvent,
        into buffer: inout ByteBuffer,
        maximumFrameBytes: Int = FrameDecoder.defaultMaximumFrameBytes
    ) throws(WireError) {
        let start = buffer.writerIndex
        buffer.writeInteger(UInt32(0))
        if streamID != 0 {
            buffer.writeInteger(Self.streamIDKey)
            ProtobufVarint.write(streamID, to: &buffer)
        }
        buffer.writeInteger(Self.eventKey)
        ProtobufVarint.write(UInt64(event.bytes.count), to: &buffer)
        buffer.writeBytes(event.bytes)
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
