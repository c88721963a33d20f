#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Reads the frame of nearly every saved record's event straight from its bytes, the inverse of
/// ``Wire/ModifyRecordsPerRecordSave/directPayload``: `Frame{stream_id, event{seq,
/// modify_records{per_record_save{record_id, record{ID, type, change tag, dates, creator, last
/// modifier}, fields_as_sent}}}}`. A client receives one such frame per saved record.
///
/// The generic path checks the nesting depth of the bytes, unpacks them into protobuf-c's tree of
/// C structs (an allocation per message and per string in the arena) and converts that tree to
/// Swift; this reads each part once into the Swift value. It returns the frame that path
/// returns, or nil for anything else: any other field, kind, payload or outcome, a field of
/// another wire type or seen twice, a key or length longer than protobuf-c reads (five bytes), a
/// string holding a NUL, bytes cut short. Nil is never an
/// error: ``FrameDecoder`` then decodes the frame the generic way, which gives every frame it
/// does not cover, valid or not, its usual result.
enum SaveEventReader {
    /// Bytes this reader leaves to the generic path.
    struct NotCovered: Error {}

    /// The frame `body` holds, when it is a saved record's event of the shape above.
    static func frame(_ body: UnsafeRawBufferPointer) -> Wire.Frame? {
        var reader = Reader(body)
        return try? Self.frame(&reader)
    }

    // Each part is read by a throwing function and assigned from its result in place (as the
    // generated conversion from C does): bound to a local first (`guard let`), every string and
    // ID was retained once more to be stored.

    private static func frame(_ reader: inout Reader) throws(NotCovered) -> Wire.Frame {
        var frame = Wire.Frame()
        var seen: UInt8 = 0
        while !reader.isAtEnd {
            let (field, wireType) = try reader.key()
            switch (field, wireType) {
            case (1, 0):  // Frame.stream_id
                try reader.once(1, &seen)
                frame.streamID = try reader.varint()
            case (5, 2):  // Frame.event
                try reader.once(2, &seen)
                var inner = try reader.message()
                frame.kind = .event(try Self.event(&inner))
            default:
                throw NotCovered()
            }
        }
        guard frame.kind != nil else { throw NotCovered() }
        return frame
    }

    private static func event(_ reader: inout Reader) throws(NotCovered) -> Wire.Event {
        var event = Wire.Event()
        var seen: UInt8 = 0
        while !reader.isAtEnd {
            let (field, wireType) = try reader.key()
            switch (field, wireType) {
            case (1, 0):  // Event.seq
                try reader.once(1, &seen)
                event.seq = try reader.varint()
            case (20, 2):  // Event.modify_records
                try reader.once(2, &seen)
                var payload = try reader.message()
                event.payload = .modifyRecords(Wire.ModifyRecordsEvent(callback: .perRecordSave(try Self.perRecordSave(in: &payload))))
            default:
                throw NotCovered()
            }
        }
        guard event.payload != nil else { throw NotCovered() }
        return event
    }

    /// `ModifyRecordsEvent{per_record_save}`.
    private static func perRecordSave(in reader: inout Reader) throws(NotCovered) -> Wire.ModifyRecordsPerRecordSave {
        let (field, wireType) = try reader.key()
        guard field == 2, wireType == 2 else { throw NotCovered() }
        var inner = try reader.message()
        guard reader.isAtEnd else { throw NotCovered() }
        var save = Wire.ModifyRecordsPerRecordSave()
        var seen: UInt8 = 0
        while !inner.isAtEnd {
            let (field, wireType) = try inner.key()
            switch (field, wireType) {
            case (1, 2):  // ModifyRecordsPerRecordSave.record_id
                try inner.once(1, &seen)
                var id = try inner.message()
                save.recordID = try Self.recordID(&id)
            case (2, 2):  // ModifyRecordsPerRecordSave.record (outcome)
                try inner.once(2, &seen)
                var record = try inner.message()
                save.outcome = .record(try Self.record(&record))
            case (4, 0):  // ModifyRecordsPerRecordSave.fields_as_sent
                try inner.once(4, &seen)
                save.fieldsAsSent = try inner.boolean()
            default:
                throw NotCovered()
            }
        }
        return save
    }

    /// `Record` with its parts 1–7 only.
    private static func record(_ reader: inout Reader) throws(NotCovered) -> Wire.Record {
        let record = Wire.Record()
        let parts = record._storage.fields  // new, so held once: written in place
        try reader.fields(of: 2, upTo: 7) { (field, inner) throws(NotCovered) in
            switch field {
            case 1: parts.pointee.recordID = try Self.recordID(&inner)
            case 2: parts.pointee.recordType = try inner.string()
            case 3: parts.pointee.recordChangeTag = try inner.string()
            case 4: parts.pointee.creationDate = try Self.timestamp(&inner)
            case 5: parts.pointee.modificationDate = try Self.timestamp(&inner)
            case 6: parts.pointee.creatorUserRecordID = try Self.recordID(&inner)
            default: parts.pointee.lastModifiedUserRecordID = try Self.recordID(&inner)
            }
        }
        return record
    }

    private static func recordID(_ reader: inout Reader) throws(NotCovered) -> Wire.RecordID {
        var id = Wire.RecordID()
        try reader.fields(of: 2, upTo: 2) { (field, inner) throws(NotCovered) in
            if field == 1 { id.recordName = try inner.string() } else { id.zoneID = try Self.zoneID(&inner) }
        }
        return id
    }

    private static func zoneID(_ reader: inout Reader) throws(NotCovered) -> Wire.RecordZoneID {
        var zone = Wire.RecordZoneID()
        try reader.fields(of: 2, upTo: 2) { (field, inner) throws(NotCovered) in
            if field == 1 { zone.zoneName = try inner.string() } else { zone.ownerName = try inner.string() }
        }
        return zone
    }

    private static func timestamp(_ reader: inout Reader) throws(NotCovered) -> Wire.Timestamp {
        var timestamp = Wire.Timestamp()
        try reader.fields(of: 0, upTo: 2) { (field, value) throws(NotCovered) in
            // int64 and int32: protobuf-c keeps the low 64 and 32 bits of the varint.
            if field == 1 {
                timestamp.seconds = Int64(bitPattern: try value.varint())
            } else {
                timestamp.nanos = Int32(truncatingIfNeeded: try value.varint())
            }
        }
        return timestamp
    }

    /// A cursor over protobuf bytes; every read is bounds-checked and throws when cut short.
    private struct Reader {
        private let bytes: UnsafeRawBufferPointer
        private var at = 0

        init(_ bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

        var isAtEnd: Bool { self.at >= self.bytes.count }

        /// A varint of at most `maximumBytes` bytes: ten for a value, five for a key or a
        /// length, as protobuf-c reads them (its value keeps the low 64 bits).
        mutating func varint(maximumBytes: Int = 10) throws(NotCovered) -> UInt64 {
            var value: UInt64 = 0
            var shift: UInt64 = 0
            let end = min(self.bytes.count, self.at + maximumBytes)
            while self.at < end {
                let byte = self.bytes[self.at]
                self.at += 1
                value |= UInt64(byte & 0x7F) << shift
                if byte & 0x80 == 0 { return value }
                shift += 7
            }
            throw NotCovered()
        }

        /// A bool varint: true when any of its bytes holds a bit, as protobuf-c reads one (the
        /// tenth byte's high bits, which a 64-bit value drops, count too).
        mutating func boolean() throws(NotCovered) -> Bool {
            let start = self.at
            _ = try self.varint()
            return self.bytes[start..<self.at].contains { $0 & 0x7F != 0 }
        }

        /// A key: field number and wire type.
        mutating func key() throws(NotCovered) -> (field: UInt64, wireType: UInt8) {
            let key = try self.varint(maximumBytes: 5)
            return (key >> 3, UInt8(key & 7))
        }

        /// The next length-delimited field's content, as a reader of its own; this one moves past it.
        mutating func message() throws(NotCovered) -> Reader {
            let length = try self.varint(maximumBytes: 5)
            guard length <= UInt64(self.bytes.count - self.at) else { throw NotCovered() }
            let start = self.at
            self.at += Int(length)
            return Reader(UnsafeRawBufferPointer(rebasing: self.bytes[start..<self.at]))
        }

        /// All of this reader's bytes as a string, the one `WireCConvert` makes of protobuf-c's
        /// copy of them (invalid UTF-8 repaired); throws when they hold a NUL (protobuf-c hands
        /// strings over NUL-terminated, and the generic path refuses such a string).
        mutating func string() throws(NotCovered) -> String {
            let rest = UnsafeRawBufferPointer(rebasing: self.bytes[self.at...])
            self.at = self.bytes.count
            guard let base = rest.baseAddress, rest.count > 0 else { return "" }
            guard memchr(base, 0, rest.count) == nil else { throw NotCovered() }
            return WireCConvert.string(rest)
        }

        /// Reads each field of this message through `read`: every one must be of `wireType`,
        /// numbered 1…`last` (8 at most) and seen once. A length-delimited field's content comes
        /// as a reader of its own, a varint as this reader at its value.
        mutating func fields(
            of wireType: UInt8, upTo last: UInt64,
            _ read: (_ field: UInt64, _ value: inout Reader) throws(NotCovered) -> Void
        ) throws(NotCovered) {
            var seen: UInt8 = 0
            while !self.isAtEnd {
                let (field, type) = try self.key()
                guard type == wireType, field >= 1, field <= last else { throw NotCovered() }
                try self.once(UInt8(field), &seen)
                if wireType == 2 {
                    var inner = try self.message()
                    try read(field, &inner)
                } else {
                    try read(field, &self)
                }
            }
        }

        /// Marks `field` (1…8) seen; throws when it was already, or is out of that range.
        func once(_ field: UInt8, _ seen: inout UInt8) throws(NotCovered) {
            guard field >= 1, field <= 8 else { throw NotCovered() }
            let bit: UInt8 = 1 << (field - 1)
            guard seen & bit == 0 else { throw NotCovered() }
            seen |= bit
        }
    }
}
