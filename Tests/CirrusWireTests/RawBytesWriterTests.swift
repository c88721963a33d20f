import Testing

@testable import CirrusWire

/// Writing into a buffer sized beforehand (``RawBytesWriter``): the bytes written, in order, and
/// never a byte past the room, whatever is asked of it.
@Suite("Writing into a sized buffer")
struct RawBytesWriterTests {
    @Test func writesBytesVarintsAndStringsInOrder() throws {
        let long = String(repeating: "é", count: 40)  // 80 bytes of UTF-8, not a small string
        let small = "abc"
        let expected: [UInt8] = [0x08, 0xAC, 0x02, 0x00] + Array(long.utf8) + Array(small.utf8) + [1, 2, 3]
        let bytes = try #require(
            RawBytesWriter.bytes(count: expected.count) { out in
                out.byte(0x08)
                out.varint(300)
                out.varint(0)
                withUnsafePointer(to: long) { out.utf8(of: $0) }
                withUnsafePointer(to: small) { out.utf8(of: $0) }
                out.bytes([1, 2, 3])
                out.bytes([])
            })
        #expect(bytes == expected)
    }

    @Test func everyVarintLengthFitsExactly() throws {
        for value: UInt64 in [0, 1, 0x7F, 0x80, 0x3FFF, 0x4000, UInt64(UInt32.max), .max] {
            let size = ProtobufVarint.size(value)
            var reference: [UInt8] = []
            ProtobufVarint.write(value, to: &reference)
            #expect(RawBytesWriter.bytes(count: size) { $0.varint(value) } == reference)
            // One byte short: refused.
            #expect(RawBytesWriter.bytes(count: size - 1) { $0.varint(value) } == nil)
        }
    }

    /// A write that does not fit writes nothing and marks the writer; the count it was given
    /// must be met exactly, or there is no result.
    @Test func writingMoreOrLessThanTheRoomGivesNoBytes() {
        #expect(RawBytesWriter.bytes(count: 2) { $0.bytes([1, 2, 3]) } == nil)
        #expect(RawBytesWriter.bytes(count: 4) { $0.bytes([1, 2, 3]) } == nil)
        #expect(RawBytesWriter.bytes(count: 0) { $0.byte(1) } == nil)
        #expect(RawBytesWriter.bytes(count: 0) { _ in } == [])
        #expect(RawBytesWriter.bytes(count: -1) { _ in } == nil)
        let string = String(repeating: "x", count: 100)
        #expect(RawBytesWriter.bytes(count: 99) { out in withUnsafePointer(to: string) { out.utf8(of: $0) } } == nil)

        var buffer = [UInt8](repeating: 0xEE, count: 8)
        buffer.withUnsafeMutableBytes { raw in
            var out = RawBytesWriter(UnsafeMutableRawBufferPointer(rebasing: raw[0..<4]))
            out.bytes([1, 2, 3])
            out.bytes([4, 5])  // does not fit: nothing of it written
            #expect(out.overflowed)
            #expect(out.count == 3)
            out.varint(300)  // two bytes: the first fits, the second does not
            #expect(out.overflowed)
            #expect(out.count == 4)
            out.byte(6)
            #expect(out.count == 4)
        }
        // Nothing past the four bytes of room was touched.
        #expect(buffer[4...].allSatisfy { $0 == 0xEE })
        #expect(buffer[0..<4] == [1, 2, 3, 0xAC])
    }
}
