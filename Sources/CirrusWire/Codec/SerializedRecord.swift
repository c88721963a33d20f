extension Wire {
    /// A `Record` in protobuf wire format, as a store keeps it. A change feed sends it as it is,
    /// its zone owners renamed for the caller in the bytes
    /// (``recordWasChangedPayload(renamingOwner:to:)``), instead of decoding it into a
    /// ``Wire/Record`` and encoding that again.
    ///
    /// Only a *plain* record is kept this way: one without assets (their content and download
    /// handles are filled in by the store and the server), without share fields (a share's URL
    /// and current participant depend on the caller), with a record ID, and whose record IDs
    /// all name their zone (a decoded ID without one is sent with the default zone filled in).
    ///
    /// For example:
    /// ```swift
    /// if let stored = Wire.SerializedRecord(plain: [UInt8](row.data)) { … } else { decode it }
    /// ```
    public struct SerializedRecord: Sendable, Hashable {
        /// The serialized `Record`.
        public let bytes: [UInt8]

        /// `bytes`, when they are a plain, well-formed record; nil for any other, which the
        /// caller decodes (and reports malformed) as before.
        public init?(plain bytes: [UInt8]) {
            let checked = bytes.withUnsafeBufferPointer { input in
                (try? RecordRewriter(owner: nil, replacement: []).size(input, 0..<input.count, .record)) != nil
            }
            guard checked else { return nil }
            self.bytes = bytes
        }

        /// The record, decoded.
        ///
        /// - throws: ``WireError`` `.malformedMessage`.
        public func decoded() throws(WireError) -> Wire.Record {
            try Wire.Record(serializedBytes: self.bytes)
        }

        /// `Event.fetch_record_zone_changes{record_was_changed: RecordOutcome{record_id, record}}`
        /// carrying this record, with every zone owner named `owner` renamed `replacement` in the
        /// record's ID, parent, share and reference fields: the bytes of the event a decoded
        /// record gets once its IDs are mapped that way. Nil only if the bytes were not plain
        /// after all (``init(plain:)`` checked them): send the record decoded then.
        public func recordWasChangedPayload(renamingOwner owner: String, to replacement: String) -> Wire.EncodedPayload? {
            self.recordWasChangedPayload(OwnerRenaming(owner: owner, replacement: replacement))
        }

        /// A zone owner to rename in serialized records, and its new name: make one for many records.
        public struct OwnerRenaming: Sendable {
            let rewriter: RecordRewriter

            public init(owner: String, replacement: String) {
                self.rewriter = RecordRewriter(owner: Array(owner.utf8), replacement: Array(replacement.utf8))
            }
        }

        /// ``recordWasChangedPayload(renamingOwner:to:)`` with a renaming made once for many records.
        public func recordWasChangedPayload(_ renaming: OwnerRenaming) -> Wire.EncodedPayload? {
            let rewriter = renaming.rewriter
            let bytes = try? self.bytes.withUnsafeBufferPointer { input throws(RecordRewriter.Refusal) -> [UInt8] in
                guard let recordID = RecordRewriter.recordIDRange(input) else { throw RecordRewriter.Refusal() }
                let idSize = try rewriter.size(input, recordID, .recordID)
                let recordSize = try rewriter.size(input, 0..<input.count, .record)
                let outcomeSize =
                    1 + ProtobufVarint.size(UInt64(idSize)) + idSize
                    + 1 + ProtobufVarint.size(UInt64(recordSize)) + recordSize
                var out: [UInt8] = []
                out.reserveCapacity(1 + ProtobufVarint.size(UInt64(outcomeSize)) + outcomeSize)
                out.append(1 << 3 | 2)  // FetchRecordZoneChangesEvent.record_was_changed
                ProtobufVarint.write(UInt64(outcomeSize), to: &out)
                out.append(1 << 3 | 2)  // RecordOutcome.record_id
                ProtobufVarint.write(UInt64(idSize), to: &out)
                try rewriter.write(input, recordID, .recordID, into: &out)
                out.append(2 << 3 | 2)  // RecordOutcome.record
                ProtobufVarint.write(UInt64(recordSize), to: &out)
                try rewriter.write(input, 0..<input.count, .record, into: &out)
                return out
            }
            guard let bytes else { return nil }
            return Wire.EncodedPayload(field: Wire.EncodedPayload.fetchRecordZoneChangesField, bytes: bytes)
        }
    }
}

/// Copies a serialized `Record`, renaming one zone owner wherever a decoded record's IDs would be
/// mapped (its ID, parent, share, and reference and reference-list fields), and refuses what
/// only a decoded record can be sent as: assets, share fields, record IDs without a zone, and
/// anything malformed. Lengths of the messages around a renamed owner are recomputed.
struct RecordRewriter {
    /// The owner name to rename; nil = check only.
    let owner: [UInt8]?
    let replacement: [UInt8]

    /// What a message is, as far as the rewrite cares.
    enum Kind {
        case record, recordID, zoneID, reference, field, value, referenceList
    }

    struct Refusal: Error {}

    /// The kind of the message in field `field` of a `kind` message, when the rewrite enters it;
    /// nil = its bytes are copied as they are.
    ///
    /// - throws: ``Refusal`` for a field only a decoded record can send.
    private static func child(of kind: Kind, field: UInt64) throws(Refusal) -> Kind? {
        switch (kind, field) {
        case (.record, 1): return .recordID  // record_id
        case (.record, 8): return .field  // fields
        case (.record, 9), (.record, 10): return .reference  // parent, share
        case (.record, 12): throw Refusal()  // share_fields
        case (.recordID, 2): return .zoneID  // zone_id
        case (.reference, 1): return .recordID  // record_id
        case (.field, 2): return .value  // value
        case (.value, 6): return .reference  // reference_value
        case (.value, 16): return .referenceList  // reference_list
        case (.value, 8), (.value, 18): throw Refusal()  // asset_value, asset_list
        case (.referenceList, 1): return .reference  // values
        default: return nil
        }
    }

    /// The content range of the record's `record_id` field.
    static func recordIDRange(_ input: UnsafeBufferPointer<UInt8>) -> Range<Int>? {
        var reader = FieldReader(input: input, range: 0..<input.count)
        var found: Range<Int>?
        while let field = try? reader.next() {
            if field.number == 1, field.wireType == 2 { found = field.value }
        }
        return found
    }

    /// A piece of a message as the rewrite sees it.
    private enum Part {
        /// Bytes copied as they are (a whole field: key and value).
        case copy(Range<Int>)
        /// A zone's owner to rename: the field's key.
        case owner(key: Range<Int>)
        /// A message the rewrite enters: the field's key, the message's bytes and its kind.
        case message(key: Range<Int>, body: Range<Int>, Kind)
    }

    /// What `field` of a `kind` message is to the rewrite.
    private func part(_ field: FieldReader.Field, of kind: Kind, _ input: UnsafeBufferPointer<UInt8>) throws(Refusal)
        -> Part
    {
        let child = try Self.child(of: kind, field: field.number)
        let isOwner = kind == .zoneID && field.number == 2
        guard field.wireType == 2 else {
            // A field a decoded record reads as a message or a string, in another wire type.
            if child != nil || isOwner { throw Refusal() }
            return .copy(field.key.lowerBound..<field.value.upperBound)
        }
        if let child { return .message(key: field.key, body: field.value, child) }
        if isOwner, let owner = self.owner, field.value.count == owner.count,
            input[field.value].elementsEqual(owner)
        {
            return .owner(key: field.key)
        }
        return .copy(field.key.lowerBound..<field.value.upperBound)
    }

    /// Refuses a record without an ID, or a record ID without a zone, once its fields are read.
    private static func checkRequired(_ kind: Kind, sawRequired: Bool) throws(Refusal) {
        if (kind == .recordID || kind == .record) && !sawRequired { throw Refusal() }
    }

    /// Whether `field` is the one a `kind` message must have (a record's ID, a record ID's zone).
    private static func isRequired(_ field: FieldReader.Field, of kind: Kind) -> Bool {
        switch kind {
        case .record: field.number == 1
        case .recordID: field.number == 2
        default: false
        }
    }

    /// The size of the `kind` message in `range` once rewritten.
    func size(_ input: UnsafeBufferPointer<UInt8>, _ range: Range<Int>, _ kind: Kind) throws(Refusal) -> Int {
        var reader = FieldReader(input: input, range: range)
        var total = 0
        var sawRequired = false
        while let field = try reader.next() {
            sawRequired = sawRequired || Self.isRequired(field, of: kind)
            switch try self.part(field, of: kind, input) {
            case .copy(let bytes):
                total += bytes.count
            case .owner(let key):
                total += key.count + ProtobufVarint.size(UInt64(self.replacement.count)) + self.replacement.count
            case .message(let key, let body, let child):
                let inner = try self.size(input, body, child)
                total += key.count + ProtobufVarint.size(UInt64(inner)) + inner
            }
        }
        try Self.checkRequired(kind, sawRequired: sawRequired)
        return total
    }

    /// Appends the `kind` message in `range`, rewritten, to `out`.
    func write(
        _ input: UnsafeBufferPointer<UInt8>, _ range: Range<Int>, _ kind: Kind, into out: inout [UInt8]
    ) throws(Refusal) {
        var reader = FieldReader(input: input, range: range)
        var sawRequired = false
        while let field = try reader.next() {
            sawRequired = sawRequired || Self.isRequired(field, of: kind)
            switch try self.part(field, of: kind, input) {
            case .copy(let bytes):
                out.append(contentsOf: UnsafeBufferPointer(rebasing: input[bytes]))
            case .owner(let key):
                out.append(contentsOf: UnsafeBufferPointer(rebasing: input[key]))
                ProtobufVarint.write(UInt64(self.replacement.count), to: &out)
                out.append(contentsOf: self.replacement)
            case .message(let key, let body, let child):
                out.append(contentsOf: UnsafeBufferPointer(rebasing: input[key]))
                ProtobufVarint.write(UInt64(try self.size(input, body, child)), to: &out)
                try self.write(input, body, child, into: &out)
            }
        }
        try Self.checkRequired(kind, sawRequired: sawRequired)
    }
}

/// Reads the fields of one protobuf message, without decoding their values.
struct FieldReader {
    /// One field: its number, wire type, the range of its key and the range of its value (a
    /// length-delimited field's content, without the length).
    struct Field {
        var number: UInt64
        var wireType: UInt64
        var key: Range<Int>
        var value: Range<Int>
    }

    let input: UnsafeBufferPointer<UInt8>
    private var index: Int
    private let end: Int

    init(input: UnsafeBufferPointer<UInt8>, range: Range<Int>) {
        self.input = input
        self.index = range.lowerBound
        self.end = range.upperBound
    }

    /// The next field, nil at the message's end.
    ///
    /// - throws: ``RecordRewriter/Refusal`` when the bytes are not a well-formed message.
    mutating func next() throws(RecordRewriter.Refusal) -> Field? {
        guard self.index < self.end else { return nil }
        let keyStart = self.index
        let key = try self.varint()
        let keyRange = keyStart..<self.index
        let number = key >> 3
        guard number != 0 else { throw RecordRewriter.Refusal() }
        let valueStart: Int
        switch key & 7 {
        case 0:
            valueStart = self.index
            _ = try self.varint()
        case 1, 5:
            let width = key & 7 == 1 ? 8 : 4
            guard self.end - self.index >= width else { throw RecordRewriter.Refusal() }
            valueStart = self.index
            self.index += width
        case 2:
            let length = try self.varint()
            guard length <= UInt64(self.end - self.index) else { throw RecordRewriter.Refusal() }
            valueStart = self.index
            self.index += Int(length)
        default:
            throw RecordRewriter.Refusal()  // groups, or no wire type at all
        }
        return Field(number: number, wireType: key & 7, key: keyRange, value: valueStart..<self.index)
    }

    private mutating func varint() throws(RecordRewriter.Refusal) -> UInt64 {
        var value: UInt64 = 0
        var shift: UInt64 = 0
        while self.index < self.end, shift < 64 {
            let byte = self.input[self.index]
            self.index += 1
            value |= UInt64(byte & 0x7F) << shift
            if byte & 0x80 == 0 { return value }
            shift += 7
        }
        throw RecordRewriter.Refusal()
    }
}
