public import NIOCore

extension Wire {
    /// The `records_to_save` of a `ModifyRecordsRequest` in protobuf wire format: each record a
    /// field entry (key, length, the `Record` message), in order. A client that writes its
    /// records straight from its own values (CirrusKit's `CKRecord`, through ``ProtobufWriter``)
    /// sends them without building a `Wire.Record` for each and packing its C mirror;
    /// ``FrameEncoder/encode(_:appendingRecordsToSave:into:maximumFrameBytes:)`` puts them in
    /// the request.
    public struct EncodedRecords: Sendable, Hashable {
        /// The entries, in order.
        public private(set) var bytes: [UInt8] = []
        /// How many records the entries hold.
        public private(set) var count = 0

        public init() {}

        public mutating func reserveCapacity(_ byteCount: Int) {
            self.bytes.reserveCapacity(byteCount)
        }

        /// Appends `record` as protobuf-c packs it.
        public mutating func append(_ record: Wire.Record) {
            let message = record.serializedBytes()
            ProtobufVarint.write(1 << 3 | 2, to: &self.bytes)
            ProtobufVarint.write(UInt64(message.count), to: &self.bytes)
            self.bytes.append(contentsOf: message)
            self.count += 1
        }

        /// A record being written in place (``beginRecord()``): the entries so far and the new
        /// one's key, with room for its length.
        package struct RecordWriter: ~Copyable {
            /// Writes the record's content.
            package var writer: ProtobufWriter
            fileprivate let start: Int
            fileprivate let lengthAt: Int
        }

        /// Starts a record written in place: the caller writes its content with the returned
        /// writer, then ``endRecord(_:keeping:)`` ends it. The entries move into the writer
        /// meanwhile (no copy); this value holds none until then.
        package mutating func beginRecord() -> RecordWriter {
            var writer = ProtobufWriter()
            swap(&writer.bytes, &self.bytes)
            let start = writer.bytes.count
            let lengthAt = writer.beginMessage(1)
            return RecordWriter(writer: writer, start: start, lengthAt: lengthAt)
        }

        /// Ends the record ``beginRecord()`` started: kept (its length set) or taken out again.
        package mutating func endRecord(_ record: consuming RecordWriter, keeping: Bool) {
            if keeping {
                record.writer.endMessage(record.lengthAt)
                self.count += 1
            } else {
                record.writer.bytes.removeSubrange(record.start...)
            }
            swap(&record.writer.bytes, &self.bytes)
        }

        /// The records, decoded (tests; a caller that needs the messages after all).
        ///
        /// - throws: ``WireError`` `.malformedMessage`.
        public func decoded() throws(WireError) -> [Wire.Record] {
            try Wire.ModifyRecordsRequest(serializedBytes: self.bytes).recordsToSave
        }
    }
}

extension FrameEncoder {
    /// Appends one length-prefixed `Frame{stream_id, open}` whose `ModifyRecordsRequest` saves
    /// `records` (before its own `records_to_save`, which must be empty): the bytes
    /// ``encode(_:into:maximumFrameBytes:)`` writes for the frame with the records decoded into
    /// the request. The rest of the frame goes through protobuf-c; the records are copied in.
    ///
    /// - throws: ``WireError/Code/messageTooLarge`` (and writes nothing) when the frame body
    ///   would exceed `maximumFrameBytes`; `.malformedMessage` when `frame` is no `Open` of a
    ///   modify-records request without records of its own.
    public static func encode(
        _ frame: Wire.Frame,
        appendingRecordsToSave records: Wire.EncodedRecords,
        into buffer: inout ByteBuffer,
        maximumFrameBytes: Int = FrameDecoder.defaultMaximumFrameBytes
    ) throws(WireError) {
        guard case .open(var open) = frame.kind, case .modifyRecords(let request) = open.request,
            request.recordsToSave.isEmpty
        else {
            throw WireError(
                code: .malformedMessage,
                message: "records to save go only into the Open of a modify-records request without records of its own")
        }
        // protobuf-c writes fields in number order: the records (`records_to_save = 1`) come
        // before the rest of the request, and the request (`Open.modify_records = 20`) after the
        // rest of the `Open` (fields 1 to 6).
        open.request = nil
        let rest = open.serializedBytes()
        let requestRest = request.serializedBytes()
        let requestSize = records.bytes.count + requestRest.count
        let requestKey: UInt64 = 20 << 3 | 2
        let openSize =
            rest.count + ProtobufVarint.size(requestKey) + ProtobufVarint.size(UInt64(requestSize)) + requestSize
        let frameSize =
            (frame.streamID == 0 ? 0 : 1 + ProtobufVarint.size(frame.streamID))
            + 1 + ProtobufVarint.size(UInt64(openSize)) + openSize
        guard frameSize <= maximumFrameBytes else {
            throw WireError(
                code: .messageTooLarge,
                message: "frame of \(frameSize) bytes exceeds the maximum of \(maximumFrameBytes) bytes"
            )
        }
        let total = FrameDecoder.lengthPrefixBytes + frameSize
        buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: total) { out in
            var at = 0
            ProtobufVarint.putBigEndian(UInt32(frameSize), into: out, at: &at)
            if frame.streamID != 0 {
                ProtobufVarint.put(1 << 3, into: out, at: &at)  // Frame.stream_id
                ProtobufVarint.put(frame.streamID, into: out, at: &at)
            }
            ProtobufVarint.put(4 << 3 | 2, into: out, at: &at)  // Frame.open
            ProtobufVarint.put(UInt64(openSize), into: out, at: &at)
            func copy(_ bytes: [UInt8]) {
                bytes.withUnsafeBytes { bytes in
                    if let base = bytes.baseAddress, let target = out.baseAddress {
                        (target + at).copyMemory(from: base, byteCount: bytes.count)
                    }
                }
                at += bytes.count
            }
            copy(rest)
            ProtobufVarint.put(requestKey, into: out, at: &at)
            ProtobufVarint.put(UInt64(requestSize), into: out, at: &at)
            copy(records.bytes)
            copy(requestRest)
            assert(at == total, "frame written differs from its computed size")
            return at
        }
    }
}

extension Wire.Open {
    /// The open's serialized bytes, for storing it, with a save's records written directly:
    /// each as ``Wire/Record/serializedBytes(reusing:)`` writes a stored record (its system
    /// parts and fields straight from the values, the rare other parts through protobuf-c); the
    /// rest of the open goes through protobuf-c. They decode to an open equal to this one, and
    /// are the bytes ``serializedBytes()`` gives but where a record has a parent, a share,
    /// changed keys or share fields: its fields come after those then.
    ///
    /// The journal of long-lived operations stores every open it runs; packing a save of 400
    /// records through protobuf-c's tree of C structs took a tenth of the server's CPU.
    public func serializedBytesWritingRecords() -> [UInt8] {
        var encodings: [Wire.EncodedRecordFields] = []
        return self.serializedBytesWritingRecords(keeping: &encodings)
    }

    /// ``serializedBytesWritingRecords()``, handing back each saved record's fields as encoded
    /// for it, in `recordsToSave` order (none for another request), so that whoever then stores
    /// those records reuses them (``Wire/Record/serializedBytes(reusing:)``) instead of encoding
    /// the same fields again.
    public func serializedBytesWritingRecords(keeping encodings: inout [Wire.EncodedRecordFields]) -> [UInt8] {
        guard case .modifyRecords(var request) = self.request, !request.recordsToSave.isEmpty else {
            return self.serializedBytes()
        }
        var records: [UInt8] = []
        encodings.reserveCapacity(encodings.count + request.recordsToSave.count)
        for record in request.recordsToSave {
            let encoded = Wire.EncodedRecordFields(record.fields)
            encodings.append(encoded)
            let bytes = record.serializedBytes(reusing: encoded)
            ProtobufVarint.write(1 << 3 | 2, to: &records)  // ModifyRecordsRequest.records_to_save
            ProtobufVarint.write(UInt64(bytes.count), to: &records)
            records.append(contentsOf: bytes)
        }
        // In field number order, as protobuf-c writes them (see `FrameEncoder.encode(_:appendingRecordsToSave:…)`).
        request.recordsToSave = []
        let requestRest = request.serializedBytes()
        var open = self
        open.request = nil
        let rest = open.serializedBytes()
        var out: [UInt8] = []
        out.reserveCapacity(rest.count + 12 + records.count + requestRest.count)
        out.append(contentsOf: rest)
        ProtobufVarint.write(20 << 3 | 2, to: &out)  // Open.modify_records
        ProtobufVarint.write(UInt64(records.count + requestRest.count), to: &out)
        out.append(contentsOf: records)
        out.append(contentsOf: requestRest)
        return out
    }
}
