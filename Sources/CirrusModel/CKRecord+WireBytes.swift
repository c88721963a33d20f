import CirrusWire
import Foundation

extension CKRecord {
    /// Appends the record to `records` as a save sends it, written straight from its values:
    /// the bytes protobuf-c packs for ``wireRecordForSave(changedKeysOnly:encodeAsset:)``'s
    /// message, without that message, its C mirror or the copies of every string and value
    /// they take. Returns the values the record's fields were written from (see
    /// ``SentFieldValues``).
    ///
    /// Only a record whose fields all come back from the wire as themselves is written this way:
    /// every field is sent (`changedKeysOnly` leaves none out) and of a kind ``SentFieldValues``
    /// takes, no key is empty or both plain and encrypted, it is no share, and no string holds
    /// U+0000. For any other, nothing is appended and nil returned: the caller builds the message
    /// (``wireRecordForSave(changedKeysOnly:encodeAsset:)``), which gives such a record its
    /// usual answer.
    package func writeForSave(changedKeysOnly: Bool, to records: inout Wire.EncodedRecords) -> SentFieldValues? {
        guard self.wireShareFields() == nil else { return nil }
        // Written under the record's lock from its state in place, without closures around the
        // parts (a closure's captures cost a retain each here, per record).
        var record = records.beginRecord()
        let sent = self.withState { (state) -> SentFieldValues? in
            try? self.write(state, changedKeysOnly: changedKeysOnly, to: &record.writer)
        }
        records.endRecord(record, keeping: sent != nil)
        return sent
    }

    /// `Record`'s parts in number order, as protobuf-c writes them.
    private func write(
        _ state: borrowing State, changedKeysOnly: Bool, to out: inout ProtobufWriter
    ) throws(ProtobufWriter.Unwritable) -> SentFieldValues {
        try Self.write(self.recordID, field: 1, to: &out)
        try out.string(2, self.recordType)
        if let tag = state.recordChangeTag { try out.string(3, tag) }
        if let date = state.creationDate { Self.write(date, field: 4, to: &out) }
        if let date = state.modificationDate { Self.write(date, field: 5, to: &out) }
        if let id = state.creatorUserRecordID { try Self.write(id, field: 6, to: &out) }
        if let id = state.lastModifiedUserRecordID { try Self.write(id, field: 7, to: &out) }
        let changed: Set<FieldKey>? = changedKeysOnly ? Set(state.changedKeys) : nil
        try Self.write(state.fields, encrypted: false, changed: changed, to: &out)
        try Self.write(state.encryptedFields, encrypted: true, changed: changed, to: &out)
        if !state.encryptedFields.isEmpty, !state.fields.isEmpty {
            // A key both plain and encrypted decodes as one of the two.
            for key in state.encryptedFields.keys where state.fields[key] != nil { throw ProtobufWriter.Unwritable() }
        }
        if let parent = state.parent { try Self.write(parent, field: 9, to: &out) }
        if let share = state.share { try Self.write(share, field: 10, to: &out) }
        // Read only by the `changedKeys` save policy: not sent with any other.
        if changedKeysOnly { for key in state.changedKeys { try out.stringAlways(11, key) } }
        return SentFieldValues(fields: state.fields, encryptedFields: state.encryptedFields)
    }

    /// `Record.fields` entries (`RecordField{key, value, is_encrypted}`), in key order.
    private static func write(
        _ values: [FieldKey: FieldValue], encrypted: Bool, changed: Set<FieldKey>?, to out: inout ProtobufWriter
    ) throws(ProtobufWriter.Unwritable) {
        if values.isEmpty { return }
        // The dictionary's indices sorted by key, in a temporary buffer (on the stack for a
        // record's usual few fields), rather than an array of its pairs (allocated, and a retain
        // of every key and value into it) or its keys with each value looked up again (hashing
        // its key).
        try withUnsafeTemporaryAllocation(of: [FieldKey: FieldValue].Index.self, capacity: values.count) {
            (buffer) throws(ProtobufWriter.Unwritable) in
            var order = buffer
            _ = order.initialize(from: values.indices)
            defer { order.deinitialize() }
            order.sort { values.keys[$0] < values.keys[$1] }
            for index in order {
                let key = values.keys[index]
                guard !key.isEmpty, changed?.contains(key) ?? true else {
                    throw ProtobufWriter.Unwritable()
                }
                let field = out.beginMessage(8)
                try out.stringAlways(1, key)
                let kind = out.beginMessage(2)
                try Self.write(values.values[index], to: &out)
                out.endMessage(kind)
                out.bool(3, encrypted)
                out.endMessage(field)
            }
        }
    }

    /// `FieldValue`'s `kind` member, for the kinds ``SentFieldValues`` takes.
    private static func write(_ value: FieldValue, to out: inout ProtobufWriter) throws(ProtobufWriter.Unwritable) {
        switch value {
        case .string(let v): try out.stringAlways(1, v)
        case .int64(let v): out.int64Always(2, v)
        case .double(let v): out.doubleAlways(3, v)
        case .bytes(let v): v.withUnsafeBytes { out.bytesAlways(4, $0) }
        case .date(let v):
            guard Date(wireTimestamp: v.wireTimestamp) == v else { throw ProtobufWriter.Unwritable() }
            write(v, field: 5, to: &out)
        case .stringList(let v):
            let list = out.beginMessage(11)
            for string in v { try out.stringAlways(1, string) }
            out.endMessage(list)
        case .int64List(let v):
            let list = out.beginMessage(12)
            out.packedInt64s(1, v)
            out.endMessage(list)
        case .doubleList(let v):
            let list = out.beginMessage(13)
            out.packedDoubles(1, v)
            out.endMessage(list)
        case .bytesList(let v):
            let list = out.beginMessage(14)
            for bytes in v { bytes.withUnsafeBytes { out.bytesAlways(1, $0) } }
            out.endMessage(list)
        case .dateList(let v):
            let list = out.beginMessage(15)
            for date in v {
                guard Date(wireTimestamp: date.wireTimestamp) == date else { throw ProtobufWriter.Unwritable() }
                write(date, field: 1, to: &out)
            }
            out.endMessage(list)
        case .reference, .location, .asset, .referenceList, .locationList, .assetList:
            throw ProtobufWriter.Unwritable()
        }
    }

    /// A `Timestamp` message field.
    private static func write(_ date: Date, field: UInt64, to out: inout ProtobufWriter) {
        let timestamp = date.wireTimestamp
        let message = out.beginMessage(field)
        out.int64(1, timestamp.seconds)
        out.int32(2, timestamp.nanos)
        out.endMessage(message)
    }

    /// A `RecordID` message field (its zone always given).
    private static func write(_ id: ID, field: UInt64, to out: inout ProtobufWriter) throws(ProtobufWriter.Unwritable) {
        let message = out.beginMessage(field)
        try out.string(1, id.recordName)
        let zone = out.beginMessage(2)
        try out.string(1, id.zoneID.zoneName)
        try out.string(2, id.zoneID.ownerName)
        out.endMessage(zone)
        out.endMessage(message)
    }

    /// A `Reference` message field.
    private static func write(_ reference: Reference, field: UInt64, to out: inout ProtobufWriter) throws(ProtobufWriter.Unwritable) {
        let message = out.beginMessage(field)
        try write(reference.recordID, field: 1, to: &out)
        // `wireReference`: REFERENCE_ACTION_DELETE_SELF = 2, REFERENCE_ACTION_NONE = 1.
        out.key(2, 0)
        out.varint(reference.action == .deleteSelf ? 2 : 1)
        out.endMessage(message)
    }
}
