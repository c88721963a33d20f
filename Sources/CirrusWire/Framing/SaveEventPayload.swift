extension Wire.ModifyRecordsPerRecordSave {
    /// This event as `Event.modify_records{per_record_save: self}`, written directly: the bytes
    /// protobuf-c writes for it, without building its tree of C structs (which computes every
    /// nested message's size again at each level). Nil for an event it does not cover, which
    /// goes out as a message.
    ///
    /// It covers the event of nearly every save: a saved record whose fields went back as the
    /// client sent them (`fields_as_sent`, so the record carries none) and that has only the
    /// parts a store sets on every record (ID, type, change tag, dates, creator and last
    /// modifier), no parent, share, changed keys or share fields.
    ///
    /// For example:
    /// ```swift
    /// let payload: OperationStream.Payload = save.directPayload.map { .encoded($0) } ?? .message(event)
    /// ```
    public var directPayload: Wire.EncodedPayload? {
        guard let recordID = self.recordID, case .record(let record)? = self.outcome,
            record.fields.isEmpty, record.parent == nil, record.share == nil, record.changedKeys.isEmpty,
            record.shareFields == nil
        else { return nil }
        return withExtendedLifetime(record) {
            // Read in place, while `record` holds its storage.
            let parts = UnsafePointer(record._storage.fields)
            return withUnsafePointer(to: recordID) { id in
                let idSize = SystemPartsWriter.recordID(id)
                let recordSize = SystemPartsWriter.size(of: parts)
                // ModifyRecordsPerRecordSave: record_id = 1, record = 2 (always written, even
                // empty: a oneof member), fields_as_sent = 4 (left out when false).
                let saveSize =
                    SystemPartsWriter.message(idSize) + SystemPartsWriter.message(recordSize) + (self.fieldsAsSent ? 2 : 0)
                let written = RawBytesWriter.bytes(count: SystemPartsWriter.message(saveSize)) { out in
                    out.byte(2 << 3 | 2)  // ModifyRecordsEvent.per_record_save
                    out.varint(UInt64(saveSize))
                    SystemPartsWriter.write(id, field: 1, to: &out)
                    out.byte(2 << 3 | 2)  // ModifyRecordsPerRecordSave.record
                    out.varint(UInt64(recordSize))
                    SystemPartsWriter.write(parts, to: &out)
                    if self.fieldsAsSent {
                        out.byte(4 << 3 | 0)  // ModifyRecordsPerRecordSave.fields_as_sent
                        out.byte(1)
                    }
                }
                // The sizes are read from the parts the writer writes: never nil (the message then).
                return written.map { Wire.EncodedPayload(field: Wire.EncodedPayload.modifyRecordsField, bytes: $0) }
            }
        }
    }
}
