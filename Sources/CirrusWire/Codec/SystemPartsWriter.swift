/// `Record` fields 1–7 in protobuf wire format, as protobuf-c writes them: proto3 scalars left
/// out at their default, a present message always written (even empty).
enum SystemPartsWriter {
    /// The size of the parts of the record whose fields `parts` points to (read in place: a
    /// copy of the fields would retain every part). The record must outlive the call.
    static func size(of parts: UnsafePointer<Wire.Record._Fields>) -> Int {
        var size = 0
        if let id = parts.pointee.recordID { size += message(recordID(id)) }
        size += string(parts.pointee.recordType) + string(parts.pointee.recordChangeTag)
        if let date = parts.pointee.creationDate { size += message(timestamp(date)) }
        if let date = parts.pointee.modificationDate { size += message(timestamp(date)) }
        if let id = parts.pointee.creatorUserRecordID { size += message(recordID(id)) }
        if let id = parts.pointee.lastModifiedUserRecordID { size += message(recordID(id)) }
        return size
    }

    /// Appends the parts of the record whose fields `parts` points to, as ``size(of:)`` reads them.
    static func write(_ parts: UnsafePointer<Wire.Record._Fields>, to out: inout [UInt8]) {
        if let id = parts.pointee.recordID { write(id, field: 1, to: &out) }
        write(parts.pointee.recordType, field: 2, to: &out)
        write(parts.pointee.recordChangeTag, field: 3, to: &out)
        if let date = parts.pointee.creationDate { write(date, field: 4, to: &out) }
        if let date = parts.pointee.modificationDate { write(date, field: 5, to: &out) }
        if let id = parts.pointee.creatorUserRecordID { write(id, field: 6, to: &out) }
        if let id = parts.pointee.lastModifiedUserRecordID { write(id, field: 7, to: &out) }
    }

    // MARK: Sizes (of a message's content; `message` and `string` add key and length)

    static func message(_ content: Int) -> Int { 1 + ProtobufVarint.size(UInt64(content)) + content }

    private static func string(_ value: String) -> Int {
        let count = value.utf8.count
        return count == 0 ? 0 : 1 + ProtobufVarint.size(UInt64(count)) + count
    }

    private static func varint(_ value: UInt64) -> Int { value == 0 ? 0 : 1 + ProtobufVarint.size(value) }

    private static func zoneID(_ zone: Wire.RecordZoneID) -> Int { string(zone.zoneName) + string(zone.ownerName) }

    static func recordID(_ id: Wire.RecordID) -> Int {
        string(id.recordName) + (id.zoneID.map { message(zoneID($0)) } ?? 0)
    }

    private static func timestamp(_ date: Wire.Timestamp) -> Int {
        // int64 and int32 alike: a negative value is ten bytes, sign-extended to 64 bits.
        varint(UInt64(bitPattern: date.seconds)) + varint(UInt64(bitPattern: Int64(date.nanos)))
    }

    // MARK: Writing

    private static func key(_ field: UInt8, _ wireType: UInt8, to out: inout [UInt8]) {
        out.append(field << 3 | wireType)
    }

    private static func write(_ value: String, field: UInt8, to out: inout [UInt8]) {
        let count = value.utf8.count
        guard count > 0 else { return }
        key(field, 2, to: &out)
        ProtobufVarint.write(UInt64(count), to: &out)
        out.append(contentsOf: value.utf8)
    }

    private static func write(_ value: UInt64, field: UInt8, to out: inout [UInt8]) {
        guard value != 0 else { return }
        key(field, 0, to: &out)
        ProtobufVarint.write(value, to: &out)
    }

    private static func write(_ zone: Wire.RecordZoneID, field: UInt8, to out: inout [UInt8]) {
        key(field, 2, to: &out)
        ProtobufVarint.write(UInt64(zoneID(zone)), to: &out)
        write(zone.zoneName, field: 1, to: &out)
        write(zone.ownerName, field: 2, to: &out)
    }

    static func write(_ id: Wire.RecordID, field: UInt8, to out: inout [UInt8]) {
        key(field, 2, to: &out)
        ProtobufVarint.write(UInt64(recordID(id)), to: &out)
        write(id.recordName, field: 1, to: &out)
        if let zone = id.zoneID { write(zone, field: 2, to: &out) }
    }

    private static func write(_ date: Wire.Timestamp, field: UInt8, to out: inout [UInt8]) {
        key(field, 2, to: &out)
        ProtobufVarint.write(UInt64(timestamp(date)), to: &out)
        write(UInt64(bitPattern: date.seconds), field: 1, to: &out)
        write(UInt64(bitPattern: Int64(date.nanos)), field: 2, to: &out)
    }
}
