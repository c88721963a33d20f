public import NIOCore

extension Wire {
    /// One `Event.payload` in protobuf wire format: its field number in `Event` and the bytes of
    /// the payload message. The connection sends it inside `Frame{stream_id, event{seq, payload}}`
    /// under the seq it gives the event (``FrameEncoder/encode(streamID:seq:payload:into:maximumFrameBytes:)``),
    /// so a server can build an event's bytes without building the event.
    ///
    /// For example, a change feed's record sent as its store keeps it:
    /// ```swift
    /// let payload = try stored.recordWasChangedPayload(renamingOwner: "_alice", to: "__defaultOwner__")
    /// ```
    public struct EncodedPayload: Sendable, Hashable {
        /// `Event.modify_records`.
        static let modifyRecordsField: UInt64 = 20
        /// `Event.fetch_record_zone_changes`.
        static let fetchRecordZoneChangesField: UInt64 = 25

        /// The payload's field number in `Event` (20 and up).
        public let field: UInt64
        /// The serialized payload message (for example a `FetchRecordZoneChangesEvent`).
        public let bytes: [UInt8]

        /// The payload, decoded (a long-lived operation journals events it decodes; tests).
        ///
        /// - throws: ``WireError`` `.malformedMessage`.
        public func decoded() throws(WireError) -> Wire.Event.Payload {
            var event: [UInt8] = []
            event.reserveCapacity(self.bytes.count + 16)
            ProtobufVarint.write(self.field << 3 | 2, to: &event)
            ProtobufVarint.write(UInt64(self.bytes.count), to: &event)
            event.append(contentsOf: self.bytes)
            guard let payload = try Wire.Event(serializedBytes: event).payload else {
                throw .malformedMessage("encoded payload field \(self.field) is no event payload")
            }
            return payload
        }
    }
}

extension ProtobufVarint {
    /// Appends `value` as a varint.
    static func write(_ value: UInt64, to bytes: inout [UInt8]) {
        var value = value
        while value >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: value) | 0x80)
            value >>= 7
        }
        bytes.append(UInt8(value))
    }

    /// The bytes of `value` as a varint.
    static func size(_ value: UInt64) -> Int {
        max(1, (64 - value.leadingZeroBitCount + 6) / 7)
    }

    /// Writes `value` as a varint at `offset` of `bytes` and moves `offset` past it; the caller
    /// made room for it (``size(_:)``).
    @inline(__always)
    static func put(_ value: UInt64, into bytes: UnsafeMutableRawBufferPointer, at offset: inout Int) {
        var value = value
        while value >= 0x80 {
            bytes[offset] = UInt8(truncatingIfNeeded: value) | 0x80
            offset += 1
            value >>= 7
        }
        bytes[offset] = UInt8(value)
        offset += 1
    }

    /// Writes `value` as four big-endian bytes (a frame's length prefix) at `offset` and moves
    /// `offset` past them.
    @inline(__always)
    static func putBigEndian(_ value: UInt32, into bytes: UnsafeMutableRawBufferPointer, at offset: inout Int) {
        bytes.storeBytes(of: value.bigEndian, toByteOffset: offset, as: UInt32.self)
        offset += 4
    }
}

extension FrameEncoder {
    /// The nested sizes of `Frame{stream_id, event{seq, payload}}`: what each length prefix says.
    private struct PayloadFrameSizes {
        var event: Int
        var frame: Int

        init(streamID: UInt64, seq: UInt64, payload: Wire.EncodedPayload) {
            // protobuf-c leaves out proto3 scalars at 0; a oneof member is always written.
            self.event =
                (seq == 0 ? 0 : 1 + ProtobufVarint.size(seq))
                + ProtobufVarint.size(payload.field << 3 | 2) + ProtobufVarint.size(UInt64(payload.bytes.count))
                + payload.bytes.count
            self.frame =
                (streamID == 0 ? 0 : 1 + ProtobufVarint.size(streamID))
                + 1 + ProtobufVarint.size(UInt64(self.event)) + self.event
        }
    }

    /// The body size (without the length prefix) of `Frame{stream_id, event{seq, payload}}`.
    public static func frameBodySize(streamID: UInt64, seq: UInt64, payload: Wire.EncodedPayload) -> Int {
        PayloadFrameSizes(streamID: streamID, seq: seq, payload: payload).frame
    }

    /// Appends one length-prefixed `Frame{stream_id, event{seq, payload}}` with the payload's
    /// bytes as they are: the same bytes ``encode(_:into:maximumFrameBytes:)`` writes for the
    /// frame holding the payload decoded.
    ///
    /// - throws: ``WireError/Code/messageTooLarge`` (and writes nothing) when the frame body
    ///   would exceed `maximumFrameBytes`.
    public static func encode(
        streamID: UInt64,
        seq: UInt64,
        payload: Wire.EncodedPayload,
        into buffer: inout ByteBuffer,
        maximumFrameBytes: Int = FrameDecoder.defaultMaximumFrameBytes
    ) throws(WireError) {
        let sizes = PayloadFrameSizes(streamID: streamID, seq: seq, payload: payload)
        guard sizes.frame <= maximumFrameBytes else {
            throw WireError(
                code: .messageTooLarge,
                message: "frame of \(sizes.frame) bytes exceeds the maximum of \(maximumFrameBytes) bytes"
            )
        }
        // One write of the whole frame: a `writeInteger` per header byte costs each its own
        // capacity check and exclusive access to the buffer's storage, per saved record.
        let total = FrameDecoder.lengthPrefixBytes + sizes.frame
        buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: total) { out in
            var at = 0
            ProtobufVarint.putBigEndian(UInt32(sizes.frame), into: out, at: &at)
            if streamID != 0 {
                ProtobufVarint.put(1 << 3, into: out, at: &at)  // Frame.stream_id
                ProtobufVarint.put(streamID, into: out, at: &at)
            }
            ProtobufVarint.put(5 << 3 | 2, into: out, at: &at)  // Frame.event
            ProtobufVarint.put(UInt64(sizes.event), into: out, at: &at)
            if seq != 0 {
                ProtobufVarint.put(1 << 3, into: out, at: &at)  // Event.seq
                ProtobufVarint.put(seq, into: out, at: &at)
            }
            ProtobufVarint.put(payload.field << 3 | 2, into: out, at: &at)
            ProtobufVarint.put(UInt64(payload.bytes.count), into: out, at: &at)
            payload.bytes.withUnsafeBytes { bytes in
                if let base = bytes.baseAddress, let target = out.baseAddress {
                    (target + at).copyMemory(from: base, byteCount: bytes.count)
                }
            }
            assert(at + payload.bytes.count == total, "frame header written differs from its computed size")
            return at + payload.bytes.count
        }
    }
}
