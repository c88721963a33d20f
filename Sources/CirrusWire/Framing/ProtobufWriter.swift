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
        let appended = value.utf8.withContiguousStorageIfAvailable { utf8 -> Bool in
            guard let base = utf8.baseAddress else { return true }
            guard memchr(base, 0, utf8.count) == nil else { return false }
            self.bytes.append(contentsOf: utf8)
            return true
        }
        switch appended {
        case true?: return
        case false?: throw Unwritable()
        case nil:
            let utf8 = Array(value.utf8)
            guard !utf8.contains(0) else { throw Unwritable() }
            self.bytes.append(contentsOf: utf8)
        }
    }

    /// A bytes field, written even when empty (a oneof member, a repeated element).
    package mutating func bytesAlways(_ field: UInt64, _ value: some Collection<UInt8>) {
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

    /// Eight little-endian bytes.
    @inline(__always)
    package mutating func fixed64(_ value: UInt64) {
        withUnsafeBytes(of: value.littleEndian) { self.bytes.append(contentsOf: $0) }
    }

    /// A message field whose content `body` writes, written even when empty (protobuf-c writes a
    /// present message whatever it holds). The length goes in front of the content once it is
    /// known: one byte is kept for it, and the content moves when the length needs more.
    package mutating func message<E: Error>(_ field: UInt64, _ body: (inout ProtobufWriter) throws(E) -> Void) throws(E) {
        self.key(field, 2)
        let lengthAt = self.bytes.count
        self.bytes.append(0)
        try body(&self)
        let length = self.bytes.count - lengthAt - 1
        if length < 0x80 {
            self.bytes[lengthAt] = UInt8(length)
        } else {
            var prefix: [UInt8] = []
            ProtobufVarint.write(UInt64(length), to: &prefix)
            self.bytes[lengthAt] = prefix[0]
            self.bytes.insert(contentsOf: prefix[1...], at: lengthAt + 1)
        }
    }
}
