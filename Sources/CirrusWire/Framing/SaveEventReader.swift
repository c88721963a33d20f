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
/// another wire type or seen twice, a string holding a NUL, bytes cut short. Nil is never an
/// error: ``FrameDecoder`` then decodes the frame the generic way, which gives every frame it
/// does not cover, valid or not, its usual result.
enum SaveEventReader {
    /// The frame `body` holds, when it is a saved record's event of the shape above.
    static func frame(_ body: UnsafeRawBufferPointer) -> Wire.Frame? {
        var reader = Reader(body)
        var streamID: UInt64 = 0
        var event: Wire.Event?
        var seen: UInt8 = 0
        while !reader.isAtEnd {
            guard let (field, wireType) = reader.key() else { return nil }
            switch (field, wireType) {
            case (1, 0):  // Frame.stream_id
                guard reader.once(1, &seen), let value = reader.varint() else { return nil }
                streamID = value
            case (5, 2):  // Frame.event
                guard reader.once(2, &seen), var inner = reader.message(), let value = Self.event(&inner) else { return nil }
                event = value
            default:
                return nil
            }
        }
        guard let event else { return nil }
        return Wire.Frame(streamID: streamID, kind: .event(event))
    }

    private static func event(_ reader: inout Reader) -> Wire.Event? {
        var seq: UInt64 = 0
        var save: Wire.ModifyRecordsPerRecordSave?
        var seen: UInt8 = 0
        while !reader.isAtEnd {
            guard let (field, wireType) = reader.key() else { return nil }
            switch (field, wireType) {
            case (1, 0):  // Event.seq
                guard reader.once(1, &seen), let value = reader.varint() else { return nil }
                seq = value
            case (20, 2):  // Event.modify_records
                guard reader.once(2, &seen), var payload = reader.message(), let value = Self.perRecordSave(in: &payload)
                else { return nil }
                save = value
            default:
                return nil
            }
        }
        guard let save else { return nil }
        return Wire.Event(seq: seq, payload: .modifyRecords(Wire.ModifyRecordsEvent(callback: .perRecordSave(save))))
    }

    /// `ModifyRecordsEvent{per_record_save}`.
    private static func perRecordSave(in reader: inout Reader) -> Wire.ModifyRecordsPerRecordSave? {
        guard let (field, wireType) = reader.key(), field == 2, wireType == 2, var inner = reader.message(),
            reader.isAtEnd
        else { return nil }
        var save = Wire.ModifyRecordsPerRecordSave()
        var seen: UInt8 = 0
        while !inner.isAtEnd {
            guard let (field, wireType) = inner.key() else { return nil }
            switch (field, wireType) {
            case (1, 2):  // ModifyRecordsPerRecordSave.record_id
                guard inner.once(1, &seen), var id = inner.message(), let value = Self.recordID(&id) else { return nil }
                save.recordID = value
            case (2, 2):  // ModifyRecordsPerRecordSave.record (outcome)
                guard inner.once(2, &seen), var record = inner.message(), let value = Self.record(&record) else {
                    return nil
                }
                save.outcome = .record(value)
            case (4, 0):  // ModifyRecordsPerRecordSave.fields_as_sent
                guard inner.once(4, &seen), let value = inner.varint() else { return nil }
                save.fieldsAsSent = value != 0
            default:
                return nil
            }
        }
        return save
    }

    /// `Record` with its parts 1–7 only.
    private static func record(_ reader: inout Reader) -> Wire.Record? {
        var record = Wire.Record()
        var seen: UInt8 = 0
        while !reader.isAtEnd {
            guard let (field, wireType) = reader.key(), wireType == 2, (1...7).contains(field),
                reader.once(UInt8(field), &seen), var inner = reader.message()
            else { return nil }
            switch field {
            case 1:
                guard let value = Self.recordID(&inner) else { return nil }
                record.recordID = value
            case 2:
                guard let value = inner.string() else { return nil }
                record.recordType = value
            case 3:
                guard let value = inner.string() else { return nil }
                record.recordChangeTag = value
            case 4:
                guard let value = Self.timestamp(&inner) else { return nil }
                record.creationDate = value
            case 5:
                guard let value = Self.timestamp(&inner) else { return nil }
                record.modificationDate = value
            case 6:
                guard let value = Self.recordID(&inner) else { return nil }
                record.creatorUserRecordID = value
            default:
                guard let value = Self.recordID(&inner) else { return nil }
                record.lastModifiedUserRecordID = value
            }
        }
        return record
    }

    private static func recordID(_ reader: inout Reader) -> Wire.RecordID? {
        var id = Wire.RecordID()
        var seen: UInt8 = 0
        while !reader.isAtEnd {
            guard let (field, wireType) = reader.key(), wireType == 2, reader.once(UInt8(truncatingIfNeeded: field), &seen),
                var inner = reader.message()
            else { return nil }
            switch field {
            case 1:
                guard let value = inner.string() else { return nil }
                id.recordName = value
            case 2:
                var zone = Wire.RecordZoneID()
                var zoneSeen: UInt8 = 0
                while !inner.isAtEnd {
                    guard let (field, wireType) = inner.key(), wireType == 2, field == 1 || field == 2,
                        inner.once(UInt8(field), &zoneSeen), var part = inner.message(), let value = part.string()
                    else { return nil }
                    if field == 1 { zone.zoneName = value } else { zone.ownerName = value }
                }
                id.zoneID = zone
            default:
                return nil
            }
        }
        return id
    }

    private static func timestamp(_ reader: inout Reader) -> Wire.Timestamp? {
        var timestamp = Wire.Timestamp()
        var seen: UInt8 = 0
        while !reader.isAtEnd {
            guard let (field, wireType) = reader.key(), wireType == 0, field == 1 || field == 2,
                reader.once(UInt8(field), &seen), let value = reader.varint()
            else { return nil }
            // int64 and int32: protobuf-c keeps the low 64 and 32 bits of the varint.
            if field == 1 {
                timestamp.seconds = Int64(bitPattern: value)
            } else {
                timestamp.nanos = Int32(truncatingIfNeeded: value)
            }
        }
        return timestamp
    }

    /// A cursor over protobuf bytes; every read is bounds-checked and nil when cut short.
    private struct Reader {
        private let bytes: UnsafeRawBufferPointer
        private var at = 0

        init(_ bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

        var isAtEnd: Bool { self.at >= self.bytes.count }

        /// A varint of at most ten bytes, as protobuf-c reads one.
        mutating func varint() -> UInt64? {
            var value: UInt64 = 0
            var shift: UInt64 = 0
            while self.at < self.bytes.count, shift < 70 {
                let byte = self.bytes[self.at]
                self.at += 1
                value |= UInt64(byte & 0x7F) << shift
                if byte & 0x80 == 0 { return value }
                shift += 7
            }
            return nil
        }

        /// A key: field number and wire type.
        mutating func key() -> (field: UInt64, wireType: UInt8)? {
            guard let key = self.varint() else { return nil }
            return (key >> 3, UInt8(key & 7))
        }

        /// The next length-delimited field's content, as a reader of its own; this one moves past it.
        mutating func message() -> Reader? {
            guard let length = self.varint(), length <= UInt64(self.bytes.count - self.at) else { return nil }
            let start = self.at
            self.at += Int(length)
            return Reader(UnsafeRawBufferPointer(rebasing: self.bytes[start..<self.at]))
        }

        /// All of this reader's bytes as a string, the one `WireCConvert` makes of protobuf-c's
        /// copy of them (invalid UTF-8 repaired); nil when they hold a NUL (protobuf-c hands
        /// strings over NUL-terminated, and the generic path refuses such a string).
        mutating func string() -> String? {
            let rest = UnsafeRawBufferPointer(rebasing: self.bytes[self.at...])
            self.at = self.bytes.count
            guard let base = rest.baseAddress, rest.count > 0 else { return "" }
            guard memchr(base, 0, rest.count) == nil else { return nil }
            return WireCConvert.string(rest)
        }

        /// Marks `field` (1…8) seen; false when it was already, or is out of that range.
        func once(_ field: UInt8, _ seen: inout UInt8) -> Bool {
            guard field >= 1, field <= 8 else { return false }
            let bit: UInt8 = 1 << (field - 1)
            guard seen & bit == 0 else { return false }
            seen |= bit
            return true
        }
    }
}
