extension Wire {
    /// A record's `fields`, serialized ahead of time: where one thread prepares a record and
    /// another stores it (the SQLite engine's single writer), the preparing thread encodes the
    /// fields, the bulk of a record's bytes, and the storing thread encodes only the rest
    /// (``Wire/Record/serializedBytes(reusing:)``).
    ///
    /// It keeps the array it encoded. A record whose `fields` are still that array (the same
    /// storage: nothing replaced or changed them since) has exactly these fields; any change
    /// to a field makes the record's array a copy of its own, so it is never taken for this one.
    ///
    /// For example:
    /// ```swift
    /// let encoded = Wire.EncodedRecordFields(record.fields)   // off the writer
    /// let bytes = stored.serializedBytes(reusing: encoded)     // on it
    /// ```
    public struct EncodedRecordFields: Sendable {
        /// The fields encoded; held so that their storage is never changed in place.
        let fields: [Wire.RecordField]
        /// Each field as a `Record.fields` entry (key and length included), in order.
        let bytes: [UInt8]

        /// Written straight from the fields (``RecordFieldsWriter``) when they are of the kinds
        /// it writes, else packed through protobuf-c: the same bytes either way.
        public init(_ fields: [Wire.RecordField]) {
            self.fields = fields
            self.bytes = RecordFieldsWriter.bytes(of: fields) ?? Wire.Record(fields: fields).serializedBytes()
        }

        /// Whether `other` is the very array encoded here (same storage, so the same fields).
        public func encodes(_ other: [Wire.RecordField]) -> Bool {
            guard !fields.isEmpty, other.count == fields.count else { return false }
            return fields.withUnsafeBufferPointer { mine in
                other.withUnsafeBufferPointer { theirs in mine.baseAddress == theirs.baseAddress }
            }
        }
    }
}

extension Wire.Record {
    /// The record's serialized bytes, its fields taken from `encoded` when they are the ones it
    /// encoded, else the same as ``serializedBytes()``. The fields come after the record's other
    /// parts then, which protobuf decoders read alike: a decoded record is the same either way.
    ///
    /// The parts a store sets on every record (ID, type, change tag, dates, creator and last
    /// modifier) are written directly, sizes computed once, instead of through protobuf-c's
    /// tree of C structs, which computes every nested message's size again at each level;
    /// the rare others (parent, share, changed keys, share fields) go through protobuf-c.
    /// The bytes are those protobuf-c writes for the same parts, in the same order.
    public func serializedBytes(reusing encoded: Wire.EncodedRecordFields?) -> [UInt8] {
        guard let encoded, encoded.encodes(self.fields) else { return serializedBytes() }
        let rest = self.restSerialized()
        let written = RawBytesWriter.bytes(count: self.sizeReusing(encoded, rest: rest)) { out in
            self.write(reusing: encoded, rest: rest, to: &out)
        }
        // The sizes are read from the parts the writer writes: never nil.
        return written ?? serializedBytes()
    }

    /// ``serializedBytes(reusing:)`` written into `bytes`, replacing what it held, in its own
    /// storage when that has the room: a writer storing record after record keeps one buffer
    /// instead of allocating one per record.
    public func serialize(reusing encoded: Wire.EncodedRecordFields?, into bytes: inout [UInt8]) {
        guard let encoded, encoded.encodes(self.fields) else {
            bytes = serializedBytes()
            return
        }
        let rest = self.restSerialized()
        let written = RawBytesWriter.write(count: self.sizeReusing(encoded, rest: rest), into: &bytes) { out in
            self.write(reusing: encoded, rest: rest, to: &out)
        }
        // The sizes are read from the parts the writer writes: never false.
        if !written { bytes = serializedBytes() }
    }

    /// The rare parts written through protobuf-c (parent, share, changed keys, share fields),
    /// serialized; empty when the record has none.
    private func restSerialized() -> [UInt8] {
        guard self.parent != nil || self.share != nil || !self.changedKeys.isEmpty || self.shareFields != nil else {
            return []
        }
        var others = Wire.Record()
        others.parent = self.parent
        others.share = self.share
        others.changedKeys = self.changedKeys
        others.shareFields = self.shareFields
        return others.serializedBytes()
    }

    private func sizeReusing(_ encoded: Wire.EncodedRecordFields, rest: [UInt8]) -> Int {
        // Read in place, while `self` holds its storage.
        SystemPartsWriter.size(of: UnsafePointer(_storage.fields)) + rest.count + encoded.bytes.count
    }

    private func write(reusing encoded: Wire.EncodedRecordFields, rest: [UInt8], to out: inout RawBytesWriter) {
        SystemPartsWriter.write(UnsafePointer(_storage.fields), to: &out)
        out.bytes(rest)
        out.bytes(encoded.bytes)
    }
}
