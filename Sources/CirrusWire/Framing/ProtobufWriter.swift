#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Writes protobuf messages from Swift values, the bytes protobuf-c packs for the same message:
/// fields in number order, proto3 scalars and strings left out at their defaults (a oneof member
/// and a repeated element are always written: the `…Always` variants), repeated numbers packed.
/// For the messages Cirrus writes straight from a caller's own values (CirrusKit's records)
/// instead of building the generated `Wire` structs and packing their C mirror.
///
/// A string holding U+0000 cannot be written (protobuf-c carries strings as C strings, so it
/// would cut them short there): the writer throws ``Unwritable`` and the caller takes the
/// generic path, which gives such a string its usual answer.
package struct ProtobufWriter {
    /// What the writer refuses: the caller writes the message the generic way instead.
    package struct Unwritable: Error {
        package init() {}
    }

    package var bytes: [UInt8]

    package init(bytes: [UInt8] = []) {
        self.bytes = bytes
    }

    /// The bytes of `value` as a varint.
    @inline(__always)
    package static func varintSize(_ value: UInt64) -> Int {
        ProtobufVarint.size(value)
    }

    @inline(__always)
    package mutating func varint(_ value: UInt64) {
        ProtobufVarint.write(value, to: &self.bytes)
    }

    /// A field's key: its number and wire type (0 varint, 1 fixed 64-bit, 2 length-delimited).
    @inline(__always)
    package mutating func key(_ field: UInt64, _ wireType: UInt64) {
        self.varint(field << 3 | wireType)
    }

    /// A string field; nothing when the string is empty.
    package mutating func string(_ field: UInt64, _ value: String) throws(Unwritable) {
        guard !value.isEmpty else { return }
        try self.stringAlways(field, value)
    }

    /// A string field, written even when empty (a oneof member, a repeated element).
    package mutating func stringAlways(_ field: UInt64, _ value: String) throws(Unwritable) {
        self.key(field, 2)
        let count = value.utf8.count
        self.varint(UInt64(count))
        // Through its C string, which holds the string's bytes where they lie (no hold on its
        // storage, as a view of its UTF-8 would take) and ends at the first U+0000.
        let whole = value.withCString { string in
            guard strlen(string) == count else { return false }
            self.bytes.append(contentsOf: UnsafeRawBufferPointer(start: string, count: count))
            return true
        }
        if !whole { throw Unwritable() }
    }

    /// A bytes field, written even when empty (a oneof member, a repeated element).
    package mutating func bytesAlways(_ field: UInt64, _ value: some Collection<UInt8>) {
        self.key(field, 2)
        self.varint(UInt64(value.count))
        // Copied from where they lie when they lie in one piece: appending a `Data` as a
        // collection goes through an iterator of it.
        let copied: Void? = value.withContiguousStorageIfAvailable { self.bytes.append(contentsOf: $0) }
        if copied == nil { self.bytes.append(contentsOf: value) }
    }

    /// ``bytesAlways(_:_:)-(_,Collection<UInt8>)`` for bytes in memory (a `Data`'s, through its
    /// `withUnsafeBytes`): called from another module, the generic one is not specialized, and
    /// reached a `Data`'s bytes through a protocol witness and its generic metadata every time
    /// (1.5 % of a client's CPU under 400-record saves).
    package mutating func bytesAlways(_ field: UInt64, _ value: UnsafeRawBufferPointer) {
        self.key(field, 2)
        self.varint(UInt64(value.count))
        self.bytes.append(contentsOf: value)
    }

    /// An `int64` field; nothing at 0.
    package mutating func int64(_ field: UInt64, _ value: Int64) {
        guard value != 0 else { return }
        self.int64Always(field, value)
    }

    /// An `int64` field, written even at 0 (a oneof member). Negative values take ten bytes.
    package mutating func int64Always(_ field: UInt64, _ value: Int64) {
        self.key(field, 0)
        self.varint(UInt64(bitPattern: value))
    }

    /// An `int32` field; nothing at 0. Negative values are sign-extended to ten bytes.
    package mutating func int32(_ field: UInt64, _ value: Int32) {
        guard value != 0 else { return }
        self.key(field, 0)
        self.varint(UInt64(bitPattern: Int64(value)))
    }

    /// A `bool` field; nothing when false.
    package mutating func bool(_ field: UInt64, _ value: Bool) {
        guard value else { return }
        self.key(field, 0)
        self.bytes.append(1)
    }

    /// A `double` field, written even at 0 (a oneof member).
    package mutating func doubleAlways(_ field: UInt64, _ value: Double) {
        self.key(field, 1)
        self.fixed64(value.bitPattern)
    }

    /// A repeated `int64` field, packed (proto3's default for repeated numbers): one
    /// length-delimited run of varints; nothing when empty.
    package mutating func packedInt64s(_ field: UInt64, _ values: [Int64]) {
        guard !values.isEmpty else { return }
        var size = 0
        for n in values { size += Self.varintSize(UInt64(bitPattern: n)) }
        self.key(field, 2)
        self.varint(UInt64(size))
        for n in values { self.varint(UInt64(bitPattern: n)) }
    }

    /// A repeated `double` field, packed: one length-delimited run of eight-byte values;
    /// nothing when empty.
    package mutating func packedDoubles(_ field: UInt64, _ values: [Double]) {
        guard !values.isEmpty else { return }
        self.key(field, 2)
        self.varint(UInt64(values.count * 8))
        for n in values { self.fixed64(n.bitPattern) }
    }

    /// Eight little-endian bytes.
    @inline(__always)
    package mutating func fixed64(_ value: UInt64) {
        withUnsafeBytes(of: value.littleEndian) { self.bytes.append(contentsOf: $0) }
    }

    /// A message field whose content `body` writes, written even when empty (protobuf-c writes a
    /// present message whatever it holds).
    package mutating func message<E: Error>(_ field: UInt64, _ body: (inout ProtobufWriter) throws(E) -> Void) throws(E) {
        let lengthAt = self.beginMessage(field)
        try body(&self)
        self.endMessage(lengthAt)
    }

    /// Starts a message field (see ``message(_:_:)``): its key, and one byte kept for its length.
    /// Returns where the length goes, for ``endMessage(_:)`` once the content is written.
    package mutating func beginMessage(_ field: UInt64) -> Int {
        self.key(field, 2)
        self.bytes.append(0)
        return self.bytes.count - 1
    }

    /// Ends the message field ``beginMessage(_:)`` started: its length goes in front of the
    /// content, which moves when the length needs more than the one byte kept.
    package mutating func endMessage(_ lengthAt: Int) {
        let length = self.bytes.count - lengthAt - 1
        if length < 0x80 {
            self.bytes[lengthAt] = UInt8(length)
            return
        }
        // The varint in two words on the stack (it takes at most 10 bytes), not in an array
        // of its own: a record of more than 127 bytes ends this way, one per record saved.
        var words: (UInt64, UInt64) = (0, 0)
        let count = withUnsafeMutableBytes(of: &words) { raw in
            var value = UInt64(length)
            var index = 0
            while value >= 0x80 {
                raw[index] = UInt8(truncatingIfNeeded: value) | 0x80
                value >>= 7
                index += 1
            }
            raw[index] = UInt8(value)
            return index + 1
        }
        withUnsafeBytes(of: words) { raw in
            self.bytes.replaceSubrange(lengthAt..<lengthAt + 1, with: raw[..<count])
        }
    }
}
