/// `Record.fields` entries (field 8: `RecordField{key, value, is_encrypted}`) written straight
/// from `Wire.RecordField` values with ``ProtobufWriter``: the bytes protobuf-c packs for
/// `Wire.Record(fields:)`, without building that message's C mirror in an arena, sizing every
/// nested message again at each level and packing it. The server encodes every saved record's
/// fields this way ahead of its single writer (``Wire/EncodedRecordFields``).
///
/// The kinds records mostly hold are written here: strings, numbers, bytes, dates, references
/// and their lists. For fields holding a location or an asset (or their lists), or a string with
/// U+0000 (which protobuf-c cuts short), it returns nil and the caller packs the record through
/// protobuf-c, which is always right.
enum RecordFieldsWriter {
    /// The entries of `fields`, in order; nil when one of them is not written here (see above).
    static func bytes(of fields: [Wire.RecordField]) -> [UInt8]? {
        var out = ProtobufWriter()
        out.bytes.reserveCapacity(fields.count * 48)
        do throws(ProtobufWriter.Unwritable) {
            for field in fields {
                let entry = out.beginMessage(8)
                try out.string(1, field.key)
                if let value = field.value {
                    let message = out.beginMessage(2)
                    if let kind = value.kind { try write(kind, to: &out) }
                    out.endMessage(message)
                }
                out.bool(3, field.isEncrypted)
                out.endMessage(entry)
            }
        } catch {
            return nil
        }
        return out.bytes
    }

    /// `FieldValue`'s `kind` member (a oneof member: written even at its default).
    private static func write(_ kind: Wire.FieldValue.Kind, to out: inout ProtobufWriter) throws(ProtobufWriter.Unwritable) {
        switch kind {
        case .stringValue(let v): try out.stringAlways(1, v)
        case .int64Value(let v): out.int64Always(2, v)
        case .doubleValue(let v): out.doubleAlways(3, v)
        case .bytesValue(let v): out.bytesAlways(4, v)
        case .dateValue(let v): write(v, field: 5, to: &out)
        case .referenceValue(let v): try write(v, field: 6, to: &out)
        case .stringList(let list):
            let message = out.beginMessage(11)
            for string in list.values { try out.stringAlways(1, string) }
            out.endMessage(message)
        case .int64List(let list):
            let message = out.beginMessage(12)
            out.packedInt64s(1, list.values)
            out.endMessage(message)
        case .doubleList(let list):
            let message = out.beginMessage(13)
            out.packedDoubles(1, list.values)
            out.endMessage(message)
        case .bytesList(let list):
            let message = out.beginMessage(14)
            for bytes in list.values { out.bytesAlways(1, bytes) }
            out.endMessage(message)
        case .dateList(let list):
            let message = out.beginMessage(15)
            for date in list.values { write(date, field: 1, to: &out) }
            out.endMessage(message)
        case .referenceList(let list):
            let message = out.beginMessage(16)
            for reference in list.values { try write(reference, field: 1, to: &out) }
            out.endMessage(message)
        case .locationValue, .assetValue, .locationList, .assetList:
            throw ProtobufWriter.Unwritable()
        }
    }

    /// A `Timestamp` message field.
    private static func write(_ date: Wire.Timestamp, field: UInt64, to out: inout ProtobufWriter) {
        let message = out.beginMessage(field)
        out.int64(1, date.seconds)
        out.int32(2, date.nanos)
        out.endMessage(message)
    }

    /// A `Reference` message field.
    private static func write(_ reference: Wire.Reference, field: UInt64, to out: inout ProtobufWriter) throws(ProtobufWriter.Unwritable) {
        let message = out.beginMessage(field)
        if let id = reference.recordID {
            let idMessage = out.beginMessage(1)
            try out.string(1, id.recordName)
            if let zone = id.zoneID {
                let zoneMessage = out.beginMessage(2)
                try out.string(1, zone.zoneName)
                try out.string(2, zone.ownerName)
                out.endMessage(zoneMessage)
            }
            out.endMessage(idMessage)
        }
        // An enum is an int32: nothing at 0, a negative number sign-extended to ten bytes.
        out.int32(2, reference.action.rawValue)
        out.endMessage(message)
    }
}
