#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A cursor over protobuf bytes for the readers that take the frames sent most straight into
/// Swift values (``SaveEventReader``, ``SaveRequestReader``); every read is bounds-checked and
/// throws ``NotCovered`` when cut short or not read as protobuf-c reads it, and the reader then
/// leaves the whole frame to the generic path.
struct ProtobufReader {
    /// Bytes a direct reader leaves to the generic path (nesting check, protobuf-c, conversion),
    /// which gives them their usual result, valid or not.
    struct NotCovered: Error {}

    private let bytes: UnsafeRawBufferPointer
    private var at = 0

    init(_ bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    var isAtEnd: Bool { self.at >= self.bytes.count }

    /// The bytes not read yet.
    var count: Int { self.bytes.count - self.at }

    /// A varint of at most `maximumBytes` bytes: ten for a value, five for a key or a
    /// length, as protobuf-c reads them (its value keeps the low 64 bits).
    @inline(__always)
    mutating func varint(maximumBytes: Int = 10) throws(NotCovered) -> UInt64 {
        // Most keys, lengths and small numbers are one byte: read in place at the caller.
        if self.at < self.bytes.count, maximumBytes > 0 {
            let byte = self.bytes[self.at]
            if byte < 0x80 {
                self.at += 1
                return UInt64(byte)
            }
        }
        return try self.longVarint(maximumBytes: maximumBytes)
    }

    /// ``varint(maximumBytes:)`` of more than one byte (or none at all).
    private mutating func longVarint(maximumBytes: Int) throws(NotCovered) -> UInt64 {
        var value: UInt64 = 0
        var shift: UInt64 = 0
        let end = min(self.bytes.count, self.at + maximumBytes)
        while self.at < end {
            let byte = self.bytes[self.at]
            self.at += 1
            value |= UInt64(byte & 0x7F) << shift
            if byte & 0x80 == 0 { return value }
            shift += 7
        }
        throw NotCovered()
    }

    /// A bool varint: true when any of its bytes holds a bit, as protobuf-c reads one (the
    /// tenth byte's high bits, which a 64-bit value drops, count too).
    mutating func boolean() throws(NotCovered) -> Bool {
        let start = self.at
        _ = try self.varint()
        return self.bytes[start..<self.at].contains { $0 & 0x7F != 0 }
    }

    /// An `int32` or enum varint: protobuf-c keeps its low 32 bits.
    mutating func int32() throws(NotCovered) -> Int32 {
        Int32(truncatingIfNeeded: try self.varint())
    }

    /// Eight little-endian bytes (a `double` or `fixed64`).
    mutating func fixed64() throws(NotCovered) -> UInt64 {
        guard self.count >= 8 else { throw NotCovered() }
        var value: UInt64 = 0
        for index in 0..<8 { value |= UInt64(self.bytes[self.at + index]) << (8 * UInt64(index)) }
        self.at += 8
        return value
    }

    /// Whether the bytes not read yet are those `other` has not read yet: a part a frame
    /// repeats (a saved record's ID beside its record, a last modifier who is its creator)
    /// is then the value already read from the first, read the same way from the same bytes.
    func holdsSameBytes(as other: ProtobufReader) -> Bool {
        let count = self.count
        guard count == other.count else { return false }
        guard count > 0, let base = self.bytes.baseAddress, let otherBase = other.bytes.baseAddress else { return true }
        return memcmp(base + self.at, otherBase + other.at, count) == 0
    }

    /// A key: field number and wire type.
    mutating func key() throws(NotCovered) -> (field: UInt64, wireType: UInt8) {
        let key = try self.varint(maximumBytes: 5)
        return (key >> 3, UInt8(key & 7))
    }

    /// The next length-delimited field's content, as a reader of its own; this one moves past it.
    mutating func message() throws(NotCovered) -> ProtobufReader {
        let length = try self.varint(maximumBytes: 5)
        guard length <= UInt64(self.count) else { throw NotCovered() }
        let start = self.at
        self.at += Int(length)
        return ProtobufReader(UnsafeRawBufferPointer(rebasing: self.bytes[start..<self.at]))
    }

    /// All of this reader's bytes as a string, the one `WireCConvert` makes of protobuf-c's
    /// copy of them (invalid UTF-8 repaired); throws when they hold a NUL (protobuf-c hands
    /// strings over NUL-terminated, and the generic path refuses such a string).
    mutating func string() throws(NotCovered) -> String {
        let rest = UnsafeRawBufferPointer(rebasing: self.bytes[self.at...])
        self.at = self.bytes.count
        guard let base = rest.baseAddress, rest.count > 0 else { return "" }
        guard memchr(base, 0, rest.count) == nil else { throw NotCovered() }
        return WireCConvert.string(rest)
    }

    /// All of this reader's bytes, as `WireCConvert` copies a `bytes` field.
    mutating func rest() -> [UInt8] {
        let rest = UnsafeRawBufferPointer(rebasing: self.bytes[self.at...])
        self.at = self.bytes.count
        return [UInt8](rest)
    }

    /// All of this reader's bytes as a Swift value, read by `read` without copying them: for a
    /// part the generic path decodes alone as well as nested (see ``SaveRequestReader``).
    mutating func withRest<Result>(_ read: (UnsafeRawBufferPointer) throws(NotCovered) -> Result) throws(NotCovered) -> Result {
        let rest = UnsafeRawBufferPointer(rebasing: self.bytes[self.at...])
        self.at = self.bytes.count
        return try read(rest)
    }

    /// How many of the fields from here to the end are numbered `field` and length-delimited
    /// (the entries of a repeated field, to size its array once); throws when a field cannot be
    /// stepped over.
    func count(of field: UInt64) throws(NotCovered) -> Int {
        var rest = self
        var count = 0
        while !rest.isAtEnd {
            let (number, wireType) = try rest.key()
            switch wireType {
            case 0: _ = try rest.varint()
            case 1: _ = try rest.fixed64()
            case 2:
                _ = try rest.message()
                if number == field { count += 1 }
            default: throw NotCovered()
            }
        }
        return count
    }

    /// Reads each field of this message through `read`: every one must be of `wireType`,
    /// numbered 1…`last` (32 at most) and seen once. A length-delimited field's content comes
    /// as a reader of its own, a varint as this reader at its value.
    mutating func fields(
        of wireType: UInt8, upTo last: UInt64,
        _ read: (_ field: UInt64, _ value: inout ProtobufReader) throws(NotCovered) -> Void
    ) throws(NotCovered) {
        var seen: UInt32 = 0
        while !self.isAtEnd {
            let (field, type) = try self.key()
            guard type == wireType, field >= 1, field <= last else { throw NotCovered() }
            try self.once(UInt8(field), &seen)
            if wireType == 2 {
                var inner = try self.message()
                try read(field, &inner)
            } else {
                try read(field, &self)
            }
        }
    }

    /// Marks `field` (1…32) seen; throws when it was already, or is out of that range: a
    /// singular field written twice (which protobuf-c merges or overwrites) is left to it.
    func once(_ field: UInt8, _ seen: inout UInt32) throws(NotCovered) {
        guard field >= 1, field <= 32 else { throw NotCovered() }
        let bit: UInt32 = 1 << (field - 1)
        guard seen & bit == 0 else { throw NotCovered() }
        seen |= bit
    }

    // MARK: Parts both directions carry

    /// `RecordID{record_name, zone_id}`.
    mutating func recordID() throws(NotCovered) -> Wire.RecordID {
        var id = Wire.RecordID()
        try self.fields(of: 2, upTo: 2) { (field, inner) throws(NotCovered) in
            if field == 1 { id.recordName = try inner.string() } else { id.zoneID = try inner.zoneID() }
        }
        return id
    }

    /// `RecordZoneID{zone_name, owner_name}`.
    mutating func zoneID() throws(NotCovered) -> Wire.RecordZoneID {
        var zone = Wire.RecordZoneID()
        try self.fields(of: 2, upTo: 2) { (field, inner) throws(NotCovered) in
            if field == 1 { zone.zoneName = try inner.string() } else { zone.ownerName = try inner.string() }
        }
        return zone
    }

    /// `Timestamp{seconds, nanos}`.
    mutating func timestamp() throws(NotCovered) -> Wire.Timestamp {
        var timestamp = Wire.Timestamp()
        try self.fields(of: 0, upTo: 2) { (field, value) throws(NotCovered) in
            // int64 and int32: protobuf-c keeps the low 64 and 32 bits of the varint.
            if field == 1 {
                timestamp.seconds = Int64(bitPattern: try value.varint())
            } else {
                timestamp.nanos = try value.int32()
            }
        }
        return timestamp
    }
}
