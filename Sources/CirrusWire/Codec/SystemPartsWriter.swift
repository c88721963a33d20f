/// `Record` fields 1–7 in protobuf wire format, as protobuf-c writes them: proto3 scalars left
/// out at their default, a present message always written (even empty).
///
/// Every part is read in place through a pointer: binding a part to a value (`if let id =
/// parts.pointee.recordID`) copies it, retaining each of its strings, and passing a string read
/// through a pointer to a function retains it too. Read this way, each string is retained once
/// (while its bytes are appended), not four to six times; this runs twice for each saved record.
enum SystemPartsWriter {
    /// The size of the parts of the record whose fields `parts` points to (read in place: a
    /// copy of the fields would retain every part). The record must outlive the call.
    static func size(of parts: UnsafePointer<Wire.Record._Fields>) -> Int {
        var size = 0
        if let id = some(parts.pointer(to: \.recordID)) { size += message(recordID(id)) }
        size += string(parts.pointer(to: \.recordType)) + string(parts.pointer(to: \.recordChangeTag))
        if let date = parts.pointee.creationDate { size += message(timestamp(date)) }
        if let date = parts.pointee.modificationDate { size += message(timestamp(date)) }
        if let id = some(parts.pointer(to: \.creatorUserRecordID)) { size += message(recordID(id)) }
        if let id = some(parts.pointer(to: \.lastModifiedUserRecordID)) { size += message(recordID(id)) }
        return size
    }

    /// Writes the parts of the record whose fields `parts` points to, as ``size(of:)`` reads them.
    static func write(_ parts: UnsafePointer<Wire.Record._Fields>, to out: inout RawBytesWriter) {
        if let id = some(parts.pointer(to: \.recordID)) { write(id, field: 1, to: &out) }
        write(parts.pointer(to: \.recordType), field: 2, to: &out)
        write(parts.pointer(to: \.recordChangeTag), field: 3, to: &out)
        if let date = parts.pointee.creationDate { write(date, field: 4, to: &out) }
        if let date = parts.pointee.modificationDate { write(date, field: 5, to: &out) }
        if let id = some(parts.pointer(to: \.creatorUserRecordID)) { write(id, field: 6, to: &out) }
        if let id = some(parts.pointer(to: \.lastModifiedUserRecordID)) { write(id, field: 7, to: &out) }
    }

    // MARK: Reading in place

    /// The value `optional` points to, in place; nil when there is none.
    ///
    /// An optional is a single-payload enum, which Swift lays out with its payload at offset 0
    /// (its tag, when it needs one, after the payload: `docs/ABI/TypeLayout.rst`), so an
    /// optional holding a value starts with that value; the compiler reads a payload in place
    /// the same way. The random records of `SaveEventPayloadTests` and `EncodedRecordFieldsTests`
    /// take every part through here, present and absent.
    static func some<Value>(_ optional: UnsafePointer<Value?>?) -> UnsafePointer<Value>? {
        guard let optional, optional.pointee != nil else { return nil }
        return UnsafeRawPointer(optional).assumingMemoryBound(to: Value.self)
    }

    // MARK: Sizes (of a message's content; `message` and `string` add key and length)

    static func message(_ content: Int) -> Int { 1 + ProtobufVarint.size(UInt64(content)) + content }

    private static func string(_ value: UnsafePointer<String>?) -> Int {
        guard let value else { return 0 }
        let count = value.pointee.utf8.count
        return count == 0 ? 0 : 1 + ProtobufVarint.size(UInt64(count)) + count
    }

    private static func varint(_ value: UInt64) -> Int { value == 0 ? 0 : 1 + ProtobufVarint.size(value) }

    private static func zoneID(_ zone: UnsafePointer<Wire.RecordZoneID>) -> Int {
        string(zone.pointer(to: \.zoneName)) + string(zone.pointer(to: \.ownerName))
    }

    static func recordID(_ id: UnsafePointer<Wire.RecordID>) -> Int {
        string(id.pointer(to: \.recordName)) + (some(id.pointer(to: \.zoneID)).map { message(zoneID($0)) } ?? 0)
    }

    private static func timestamp(_ date: Wire.Timestamp) -> Int {
        // int64 and int32 alike: a negative value is ten bytes, sign-extended to 64 bits.
        varint(UInt64(bitPattern: date.seconds)) + varint(UInt64(bitPattern: Int64(date.nanos)))
    }

    // MARK: Writing

    private static func key(_ field: UInt8, _ wireType: UInt8, to out: inout RawBytesWriter) {
        out.byte(field << 3 | wireType)
    }

    private static func write(_ value: UnsafePointer<String>?, field: UInt8, to out: inout RawBytesWriter) {
        guard let value else { return }
        let count = value.pointee.utf8.count
        guard count > 0 else { return }
        key(field, 2, to: &out)
        out.varint(UInt64(count))
        out.utf8(of: value)
    }

    private static func write(_ value: UInt64, field: UInt8, to out: inout RawBytesWriter) {
        guard value != 0 else { return }
        key(field, 0, to: &out)
        out.varint(value)
    }

    private static func write(_ zone: UnsafePointer<Wire.RecordZoneID>, field: UInt8, to out: inout RawBytesWriter) {
        key(field, 2, to: &out)
        out.varint(UInt64(zoneID(zone)))
        write(zone.pointer(to: \.zoneName), field: 1, to: &out)
        write(zone.pointer(to: \.ownerName), field: 2, to: &out)
    }

    static func write(_ id: UnsafePointer<Wire.RecordID>, field: UInt8, to out: inout RawBytesWriter) {
        key(field, 2, to: &out)
        out.varint(UInt64(recordID(id)))
        write(id.pointer(to: \.recordName), field: 1, to: &out)
        if let zone = some(id.pointer(to: \.zoneID)) { write(zone, field: 2, to: &out) }
    }

    private static func write(_ date: Wire.Timestamp, field: UInt8, to out: inout RawBytesWriter) {
        key(field, 2, to: &out)
        out.varint(UInt64(timestamp(date)))
        write(UInt64(bitPattern: date.seconds), field: 1, to: &out)
        write(UInt64(bitPattern: Int64(date.nanos)), field: 2, to: &out)
    }
}
