internal import CCirrusProto

/// Reads the frame that opens a records save straight from its bytes: `Frame{stream_id,
/// open{operation_id, database_scope, container_identifier, configuration, group,
/// initial_window, modify_records{records_to_save, record_ids_to_delete, save_policy,
/// client_change_token, is_atomic, failures_only, omit_fields_as_sent}}}`, the frame every
/// `CKModifyRecordsOperation` sends, its records with their IDs, types, change tags, fields
/// (strings, numbers, bytes, dates, references and their lists), parents, shares and changed
/// keys. The server reads one per save, and for a save of many records it is the largest
/// frame it reads.
///
/// The generic path checks the nesting depth of the bytes, unpacks them into protobuf-c's tree of
/// C structs (an allocation per message and per string in the arena) and converts that tree to
/// Swift; this reads each part once into the Swift value. It returns the frame that path
/// returns, or nil for anything else: another operation, a record with share fields, a field
/// holding a location or an asset (or their lists), a field of another wire type, a singular
/// field seen twice or a second member of a oneof, an unknown field, a list not packed as
/// protobuf-c packs it (`int64`s and `double`s), a key or length longer than protobuf-c reads
/// (five bytes), a string holding a NUL, bytes cut short, or a frame whose C form would take
/// more than half the memory the generic path allows one decode (``memoryBudget``: what it
/// would refuse is left to it). Nil is never an error: ``FrameDecoder`` then decodes the frame
/// the generic way, which gives every frame it does not cover, valid or not, its usual result.
enum SaveRequestReader {
    typealias NotCovered = ProtobufReader.NotCovered

    /// Half of what a decode may take from an arena (``WireArena/defaultDecodeByteLimit``),
    /// counted as an overestimate of protobuf-c's allocations for the same bytes: past it the
    /// frame is left to the generic path, which refuses one past the whole limit.
    static let memoryBudget = WireArena.defaultDecodeByteLimit / 2

    /// The frame `body` holds, when it is a save request of the shape above.
    static func frame(_ body: UnsafeRawBufferPointer) -> Wire.Frame? {
        var reader = ProtobufReader(body)
        var budget = Budget()
        return try? Self.frame(&reader, &budget)
    }

    /// What protobuf-c would allocate unpacking the parts read so far, overestimated: each
    /// message's C struct, string (with its NUL), byte string and array of a repeated field,
    /// 16 bytes more per allocation, and 64 bytes per field read (protobuf-c's slabs of scanned
    /// members, allocated too, double as a message's fields pass sixteen).
    struct Budget {
        private(set) var spent = 0

        mutating func spend(_ bytes: Int) throws(NotCovered) {
            self.spent += bytes + 16
            guard self.spent <= SaveRequestReader.memoryBudget else { throw NotCovered() }
        }

        mutating func message<C>(_: C.Type) throws(NotCovered) { try self.spend(MemoryLayout<C>.size) }

        mutating func field() throws(NotCovered) { try self.spend(48) }

        mutating func array(_ count: Int) throws(NotCovered) {
            if count > 0 { try self.spend(count * 8) }
        }
    }

    // Each part is read by a throwing function and assigned from its result in place (as the
    // generated conversion from C does).

    private static func frame(_ reader: inout ProtobufReader, _ budget: inout Budget) throws(NotCovered) -> Wire.Frame {
        try budget.message(Cirrus__V1__Frame.self)
        var frame = Wire.Frame()
        var seen: UInt32 = 0
        while !reader.isAtEnd {
            let (field, wireType) = try reader.key()
            try budget.field()
            switch (field, wireType) {
            case (1, 0):  // Frame.stream_id
                try reader.once(1, &seen)
                frame.streamID = try reader.varint()
            case (4, 2):  // Frame.open
                try reader.once(2, &seen)
                var inner = try reader.message()
                frame.kind = .open(try Self.open(&inner, &budget))
            default:
                throw NotCovered()
            }
        }
        guard frame.kind != nil else { throw NotCovered() }
        return frame
    }

    private static func open(_ reader: inout ProtobufReader, _ budget: inout Budget) throws(NotCovered) -> Wire.Open {
        try budget.message(Cirrus__V1__Open.self)
        var open = Wire.Open()
        var seen: UInt32 = 0
        while !reader.isAtEnd {
            let (field, wireType) = try reader.key()
            try budget.field()
            switch (field, wireType) {
            case (1, 2):  // Open.operation_id
                try reader.once(1, &seen)
                open.operationID = try Self.string(&reader, &budget)
            case (2, 0):  // Open.database_scope
                try reader.once(2, &seen)
                open.databaseScope = Wire.DatabaseScope(rawValue: try reader.int32())
            case (3, 2):  // Open.container_identifier
                try reader.once(3, &seen)
                open.containerIdentifier = try Self.string(&reader, &budget)
            case (4, 2):  // Open.configuration
                try reader.once(4, &seen)
                var inner = try reader.message()
                open.configuration = try Self.configuration(&inner, &budget)
            case (5, 2):  // Open.group: rare, decoded alone the generic way (as it is nested)
                try reader.once(5, &seen)
                var inner = try reader.message()
                try budget.spend(inner.count + 512)
                open.group = try inner.withRest { (bytes) throws(NotCovered) in
                    do { return try Wire.OperationGroup(serializedBytes: bytes) } catch { throw NotCovered() }
                }
            case (6, 0):  // Open.initial_window (uint32: protobuf-c keeps the low 32 bits)
                try reader.once(6, &seen)
                open.initialWindow = UInt32(truncatingIfNeeded: try reader.varint())
            case (20, 2):  // Open.modify_records, the only request read here
                try reader.once(7, &seen)
                var inner = try reader.message()
                open.request = .modifyRecords(try Self.modifyRecords(&inner, &budget))
            default:
                throw NotCovered()
            }
        }
        guard open.request != nil else { throw NotCovered() }
        return open
    }

    /// `OperationConfiguration`: every member is a one-field oneof (set = present).
    private static func configuration(
        _ reader: inout ProtobufReader, _ budget: inout Budget
    ) throws(NotCovered) -> Wire.OperationConfiguration {
        try budget.message(Cirrus__V1__OperationConfiguration.self)
        var configuration = Wire.OperationConfiguration()
        var seen: UInt32 = 0
        while !reader.isAtEnd {
            let (field, wireType) = try reader.key()
            try budget.field()
            switch (field, wireType) {
            case (1, 2):
                try reader.once(1, &seen)
                configuration.containerIdentifier = try Self.string(&reader, &budget)
            case (2, 0):
                try reader.once(2, &seen)
                configuration.qualityOfService = Wire.OperationQualityOfService(rawValue: try reader.int32())
            case (3, 0):
                try reader.once(3, &seen)
                configuration.allowsCellularAccess = try reader.boolean()
            case (4, 0):
                try reader.once(4, &seen)
                configuration.isLongLived = try reader.boolean()
            case (5, 0):
                try reader.once(5, &seen)
                configuration.timeoutIntervalForRequestMs = try reader.varint()
            case (6, 0):
                try reader.once(6, &seen)
                configuration.timeoutIntervalForResourceMs = try reader.varint()
            default:
                throw NotCovered()
            }
        }
        return configuration
    }

    private static func modifyRecords(
        _ reader: inout ProtobufReader, _ budget: inout Budget
    ) throws(NotCovered) -> Wire.ModifyRecordsRequest {
        try budget.message(Cirrus__V1__ModifyRecordsRequest.self)
        var request = Wire.ModifyRecordsRequest()
        request.recordsToSave.reserveCapacity(try reader.count(of: 1))
        var seen: UInt32 = 0
        while !reader.isAtEnd {
            let (field, wireType) = try reader.key()
            try budget.field()
            switch (field, wireType) {
            case (1, 2):  // records_to_save, repeated
                var inner = try reader.message()
                request.recordsToSave.append(try Self.record(&inner, &budget))
            case (2, 2):  // record_ids_to_delete, repeated
                request.recordIDsToDelete.append(try Self.recordID(&reader, &budget))
            case (3, 0):
                try reader.once(3, &seen)
                request.savePolicy = Wire.SavePolicy(rawValue: try reader.int32())
            case (4, 2):
                try reader.once(4, &seen)
                var inner = try reader.message()
                try budget.spend(inner.count)
                request.clientChangeToken = inner.rest()
            case (5, 0):
                try reader.once(5, &seen)
                request.isAtomic = try reader.boolean()
            case (6, 0):
                try reader.once(6, &seen)
                request.failuresOnly = try reader.boolean()
            case (7, 0):
                try reader.once(7, &seen)
                request.omitFieldsAsSent = try reader.boolean()
            default:
                throw NotCovered()
            }
        }
        try budget.array(request.recordsToSave.count)
        try budget.array(request.recordIDsToDelete.count)
        return request
    }

    /// `Record` without `share_fields` (a share's record is left to the generic path).
    private static func record(_ reader: inout ProtobufReader, _ budget: inout Budget) throws(NotCovered) -> Wire.Record {
        try budget.message(Cirrus__V1__Record.self)
        let record = Wire.Record()
        let parts = record._storage.fields  // new, so held once: written in place
        let fields = try reader.count(of: 8)
        if fields > 0 { parts.pointee.fields.reserveCapacity(fields) }
        var seen: UInt32 = 0
        while !reader.isAtEnd {
            let (field, wireType) = try reader.key()
            try budget.field()
            // Every part of a record is length-delimited.
            guard wireType == 2 else { throw NotCovered() }
            switch field {
            case 8:  // fields, repeated
                var inner = try reader.message()
                parts.pointee.fields.append(try Self.recordField(&inner, &budget))
            case 11:  // changed_keys, repeated
                parts.pointee.changedKeys.append(try Self.string(&reader, &budget))
            case 1...7, 9, 10:
                try reader.once(UInt8(field), &seen)
                switch field {
                case 1: parts.pointee.recordID = try Self.recordID(&reader, &budget)
                case 2: parts.pointee.recordType = try Self.string(&reader, &budget)
                case 3: parts.pointee.recordChangeTag = try Self.string(&reader, &budget)
                case 4: parts.pointee.creationDate = try Self.timestamp(&reader, &budget)
                case 5: parts.pointee.modificationDate = try Self.timestamp(&reader, &budget)
                case 6: parts.pointee.creatorUserRecordID = try Self.recordID(&reader, &budget)
                case 7: parts.pointee.lastModifiedUserRecordID = try Self.recordID(&reader, &budget)
                case 9: parts.pointee.parent = try Self.reference(&reader, &budget)
                default: parts.pointee.share = try Self.reference(&reader, &budget)
                }
            default:
                throw NotCovered()
            }
        }
        try budget.array(parts.pointee.fields.count)
        try budget.array(parts.pointee.changedKeys.count)
        return record
    }

    private static func recordField(
        _ reader: inout ProtobufReader, _ budget: inout Budget
    ) throws(NotCovered) -> Wire.RecordField {
        try budget.message(Cirrus__V1__RecordField.self)
        var field = Wire.RecordField()
        var seen: UInt32 = 0
        while !reader.isAtEnd {
            let (number, wireType) = try reader.key()
            try budget.field()
            switch (number, wireType) {
            case (1, 2):
                try reader.once(1, &seen)
                field.key = try Self.string(&reader, &budget)
            case (2, 2):
                try reader.once(2, &seen)
                var inner = try reader.message()
                field.value = try Self.value(&inner, &budget)
            case (3, 0):
                try reader.once(3, &seen)
                field.isEncrypted = try reader.boolean()
            default:
                throw NotCovered()
            }
        }
        return field
    }

    /// `FieldValue`, one member of its `kind` at most (protobuf-c keeps the last of several).
    private static func value(_ reader: inout ProtobufReader, _ budget: inout Budget) throws(NotCovered) -> Wire.FieldValue {
        try budget.message(Cirrus__V1__FieldValue.self)
        var value = Wire.FieldValue()
        while !reader.isAtEnd {
            guard value.kind == nil else { throw NotCovered() }
            let (field, wireType) = try reader.key()
            try budget.field()
            switch (field, wireType) {
            case (1, 2): value.kind = .stringValue(try Self.string(&reader, &budget))
            case (2, 0): value.kind = .int64Value(Int64(bitPattern: try reader.varint()))
            case (3, 1): value.kind = .doubleValue(Double(bitPattern: try reader.fixed64()))
            case (4, 2): value.kind = .bytesValue(try Self.bytes(&reader, &budget))
            case (5, 2): value.kind = .dateValue(try Self.timestamp(&reader, &budget))
            case (6, 2): value.kind = .referenceValue(try Self.reference(&reader, &budget))
            case (11, 2):
                var list = try reader.message()
                try budget.message(Cirrus__V1__StringList.self)
                value.kind = .stringList(Wire.StringList(values: try Self.repeated(&list, &budget) { (inner, budget) throws(NotCovered) in
                    try Self.string(&inner, &budget)
                }))
            case (12, 2):
                var list = try reader.message()
                try budget.message(Cirrus__V1__Int64List.self)
                value.kind = .int64List(Wire.Int64List(values: try Self.packed(&list, &budget) { (inner) throws(NotCovered) in
                    Int64(bitPattern: try inner.varint())
                }))
            case (13, 2):
                var list = try reader.message()
                try budget.message(Cirrus__V1__DoubleList.self)
                value.kind = .doubleList(Wire.DoubleList(values: try Self.packed(&list, &budget, stride: 8) { (inner) throws(NotCovered) in
                    Double(bitPattern: try inner.fixed64())
                }))
            case (14, 2):
                var list = try reader.message()
                try budget.message(Cirrus__V1__BytesList.self)
                value.kind = .bytesList(Wire.BytesList(values: try Self.repeated(&list, &budget) { (inner, budget) throws(NotCovered) in
                    try Self.bytes(&inner, &budget)
                }))
            case (15, 2):
                var list = try reader.message()
                try budget.message(Cirrus__V1__TimestampList.self)
                value.kind = .dateList(Wire.TimestampList(values: try Self.repeated(&list, &budget) { (inner, budget) throws(NotCovered) in
                    try Self.timestamp(&inner, &budget)
                }))
            case (16, 2):
                var list = try reader.message()
                try budget.message(Cirrus__V1__ReferenceList.self)
                value.kind = .referenceList(Wire.ReferenceList(values: try Self.repeated(&list, &budget) { (inner, budget) throws(NotCovered) in
                    try Self.reference(&inner, &budget)
                }))
            default:
                throw NotCovered()
            }
        }
        return value
    }

    // MARK: Parts

    /// A list message's `repeated` field 1 of length-delimited elements, each read by `element`
    /// from a reader at its length.
    private static func repeated<Element>(
        _ list: inout ProtobufReader, _ budget: inout Budget,
        _ element: (inout ProtobufReader, inout Budget) throws(NotCovered) -> Element
    ) throws(NotCovered) -> [Element] {
        var values: [Element] = []
        while !list.isAtEnd {
            let (field, wireType) = try list.key()
            try budget.field()
            guard field == 1, wireType == 2 else { throw NotCovered() }
            values.append(try element(&list, &budget))
        }
        try budget.array(values.count)
        return values
    }

    /// A list message's packed `repeated` field 1 (in one run or several, as protobuf-c joins
    /// them): varints, or `stride`-byte values whose run must be a multiple of `stride`.
    private static func packed<Element>(
        _ list: inout ProtobufReader, _ budget: inout Budget, stride: Int = 0,
        _ element: (inout ProtobufReader) throws(NotCovered) -> Element
    ) throws(NotCovered) -> [Element] {
        var values: [Element] = []
        while !list.isAtEnd {
            let (field, wireType) = try list.key()
            try budget.field()
            guard field == 1, wireType == 2 else { throw NotCovered() }
            var run = try list.message()
            guard stride == 0 || run.count % stride == 0 else { throw NotCovered() }
            while !run.isAtEnd { values.append(try element(&run)) }
        }
        try budget.array(values.count)
        return values
    }

    /// A length-delimited string field at `reader`.
    private static func string(_ reader: inout ProtobufReader, _ budget: inout Budget) throws(NotCovered) -> String {
        var inner = try reader.message()
        try budget.spend(inner.count + 1)
        return try inner.string()
    }

    /// A length-delimited `bytes` field at `reader`.
    private static func bytes(_ reader: inout ProtobufReader, _ budget: inout Budget) throws(NotCovered) -> [UInt8] {
        var inner = try reader.message()
        try budget.spend(inner.count)
        return inner.rest()
    }

    private static func recordID(_ reader: inout ProtobufReader, _ budget: inout Budget) throws(NotCovered) -> Wire.RecordID {
        var inner = try reader.message()
        // Five allocations at most (the ID, its zone, three strings no longer than the bytes,
        // with their NULs) and four fields.
        try budget.spend(
            MemoryLayout<Cirrus__V1__RecordID>.size + MemoryLayout<Cirrus__V1__RecordZoneID>.size + inner.count + 5 * 17 + 4 * 64)
        return try inner.recordID()
    }

    private static func timestamp(_ reader: inout ProtobufReader, _ budget: inout Budget) throws(NotCovered) -> Wire.Timestamp {
        var inner = try reader.message()
        try budget.spend(MemoryLayout<Cirrus__V1__Timestamp>.size + 2 * 64)  // the message, two fields
        return try inner.timestamp()
    }

    /// `Reference{record_id, action}`.
    private static func reference(_ reader: inout ProtobufReader, _ budget: inout Budget) throws(NotCovered) -> Wire.Reference {
        var inner = try reader.message()
        try budget.message(Cirrus__V1__Reference.self)
        var reference = Wire.Reference()
        var seen: UInt32 = 0
        while !inner.isAtEnd {
            let (field, wireType) = try inner.key()
            try budget.field()
            switch (field, wireType) {
            case (1, 2):
                try inner.once(1, &seen)
                reference.recordID = try Self.recordID(&inner, &budget)
            case (2, 0):
                try inner.once(2, &seen)
                reference.action = Wire.ReferenceAction(rawValue: try inner.int32())
            default:
                throw NotCovered()
            }
        }
        return reference
    }
}
