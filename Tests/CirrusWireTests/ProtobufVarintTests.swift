import Testing

@testable import CirrusWire

/// Varints as the hand-written encoders append them (``ProtobufVarint/write(_:to:)``): the
/// base-128 bytes, low group first, appended after what the array held, of the size
/// ``ProtobufVarint/size(_:)`` gives, read back as the value.
@Suite("Protobuf varints")
struct ProtobufVarintTests {
    /// The varint by its definition: seven bits a byte, low group first, the high bit set on
    /// every byte but the last.
    private static func reference(_ value: UInt64) -> [UInt8] {
        let count = value == 0 ? 1 : (64 - value.leadingZeroBitCount + 6) / 7
        return (0..<count).map { i in
            UInt8(truncatingIfNeeded: value >> UInt64(7 * i)) & 0x7F | (i < count - 1 ? 0x80 : 0)
        }
    }

    @Test func everyLengthIsWrittenAfterWhatTheArrayHeld() throws {
        var values: [UInt64] = [0, 1, 0x7F, .max, .max - 1, UInt64(Int64.max), UInt64(bitPattern: -1), UInt64(bitPattern: -300)]
        // Each side of every length boundary (7, 14, … 63 bits).
        for bits in stride(from: 7, through: 63, by: 7) {
            values += [(1 << UInt64(bits)) - 1, 1 << UInt64(bits), (1 << UInt64(bits)) + 1]
        }
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<2_000 {
            values.append(UInt64.random(in: 0...UInt64.max, using: &generator) >> UInt64.random(in: 0..<64, using: &generator))
        }
        for value in values {
            var bytes: [UInt8] = [0xAA, 0xBB]
            ProtobufVarint.write(value, to: &bytes)
            #expect(bytes == [0xAA, 0xBB] + Self.reference(value), "\(value)")
            #expect(bytes.count - 2 == ProtobufVarint.size(value), "\(value)")
            var index = 2
            #expect(try ProtobufVarint.read(bytes, at: &index) == value)
            #expect(index == bytes.count)
        }
    }
}
