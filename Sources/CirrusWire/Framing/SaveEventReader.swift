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
    typealias NotCovered = ProtobufReader.NotCovered

    /// The frame `body` holds, when it is a saved record's event of the shape above.
    static func frame(_ body: UnsafeRawBufferPointer) -> Wire.Frame? {
        var reader = ProtobufReader(body)
        return try? Self.frame(&reader)
    }

    // Each part is read by a throwing function and assigned from its result in place (as the
    // generated conversion from C does): bound to a local first (`guard let`), every string and
    // ID was retained once more to be stored.

    private static func frame(_ reader: inout ProtobufReader) throws(NotCovered) -> Wire.Frame {
        var frame = Wire.Frame()
        var seen: UInt32 = 0
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

    private static func event(_ reader: inout ProtobufReader) throws(NotCovered) -> Wire.Event {
        var event = Wire.Event()
        var seen: UInt32 = 0
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
    private static func perRecordSave(in reader: inout ProtobufReader) throws(NotCovered) -> Wire.ModifyRecordsPerRecordSave {
        let (field, wireType) = try reader.key()
        guard field == 2, wireType == 2 else { throw NotCovered() }
        var inner = try reader.message()
        guard reader.isAtEnd else { throw NotCovered() }
        var save = Wire.ModifyRecordsPerRecordSave()
        var seen: UInt32 = 0
        // The server writes the record's ID twice, first here then in the record: read once.
        var savedID: (bytes: ProtobufReader, id: Wire.RecordID)?
        while !inner.isAtEnd {
            let (field, wireType) = try inner.key()
            switch (field, wireType) {
            case (1, 2):  // ModifyRecordsPerRecordSave.record_id
                try inner.once(1, &seen)
                var id = try inner.message()
                let bytes = id
                save.recordID = try id.recordID()
                if let recordID = save.recordID { savedID = (bytes, recordID) }
            case (2, 2):  // ModifyRecordsPerRecordSave.record (outcome)
                try inner.once(2, &seen)
                var record = try inner.message()
                save.outcome = .record(try Self.record(&record, savedID: savedID))
            case (4, 0):  // ModifyRecordsPerRecordSave.fields_as_sent
                try inner.once(4, &seen)
                save.fieldsAsSent = try inner.boolean()
            default:
                throw NotCovered()
            }
        }
        return save
    }

    /// `Record` with its parts 1–7 only. An ID whose bytes are those of one read before — the
    /// save's `record_id`, or the creator for the last modifier — is that value (the same bytes
    /// read the same way), not read again: in nearly every event both pairs are equal.
    private static func record(
        _ reader: inout ProtobufReader, savedID: (bytes: ProtobufReader, id: Wire.RecordID)?
    ) throws(NotCovered) -> Wire.Record {
        let record = Wire.Record()
        let parts = record._storage.fields  // new, so held once: written in place
        var creator: ProtobufReader?
        try reader.fields(of: 2, upTo: 7) { (field, inner) throws(NotCovered) in
            switch field {
            case 1:
                if let savedID, inner.holdsSameBytes(as: savedID.bytes) {
                    parts.pointee.recordID = savedID.id
                } else {
                    parts.pointee.recordID = try inner.recordID()
                }
            case 2: parts.pointee.recordType = try inner.string()
            case 3: parts.pointee.recordChangeTag = try inner.string()
            case 4: parts.pointee.creationDate = try inner.timestamp()
            case 5: parts.pointee.modificationDate = try inner.timestamp()
            case 6:
                creator = inner
                parts.pointee.creatorUserRecordID = try inner.recordID()
            default:
                if let creator, inner.holdsSameBytes(as: creator), let creatorID = parts.pointee.creatorUserRecordID {
                    parts.pointee.lastModifiedUserRecordID = creatorID
                } else {
                    parts.pointee.lastModifiedUserRecordID = try inner.recordID()
                }
            }
        }
        return record
    }
}
