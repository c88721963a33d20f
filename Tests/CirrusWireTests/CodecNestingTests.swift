import CirrusWire
import Testing

/// Wire bytes of `Frame` with `levels` sub-messages nested along the generated
/// recursion path (prefix, then the cycle over and over). Built outside-in
/// with precomputed lengths, so 10,000 levels cost linear time.
func nestedFrameBytes(levels: Int, path: (prefix: [UInt32], cycle: [UInt32])) -> [UInt8] {
    func fieldNumber(_ level: Int) -> UInt32 {
        level < path.prefix.count ? path.prefix[level] : path.cycle[(level - path.prefix.count) % path.cycle.count]
    }
    func varintSize(_ value: Int) -> Int {
        var value = value
        var size = 1
        while value >= 0x80 {
            value >>= 7
            size += 1
        }
        return size
    }
    func appendVarint(_ value: Int, to bytes: inout [UInt8]) {
        var value = value
        while value >= 0x80 {
            bytes.append(UInt8(value & 0x7F) | 0x80)
            value >>= 7
        }
        bytes.append(UInt8(value))
    }
    // contentLength[level] = bytes inside the field opened at `level`.
    var contentLength = Array(repeating: 0, count: levels + 1)
    if levels > 0 {
        for level in stride(from: levels - 1, through: 1, by: -1) {
            let inner = contentLength[level + 1]
            let tag = Int(fieldNumber(level)) << 3 | 2
            contentLength[level] = varintSize(tag) + varintSize(inner) + inner
        }
    }
    var bytes: [UInt8] = []
    for level in 0..<levels {
        appendVarint(Int(fieldNumber(level)) << 3 | 2, to: &bytes)
        appendVarint(level + 1 < levels ? contentLength[level + 1] : 0, to: &bytes)
    }
    return bytes
}

@Suite("Codec nesting")
struct CodecNestingTests {
    @Test func tenThousandLevelsAreRejectedNotACrash() throws {
        let path = try #require(GeneratedSamples.frameRecursion, "the protocol has a recursive message")
        let bytes = nestedFrameBytes(levels: 10_000, path: path)
        #expect(throws: WireError.self) { try Wire.Frame(serializedBytes: bytes) }
        do {
            _ = try Wire.Frame(serializedBytes: bytes)
        } catch {
            #expect(error.code == .malformedMessage)
        }
    }

    @Test func sixtyFourLevelsAreAcceptedSixtyFiveAreNot() throws {
        let path = try #require(GeneratedSamples.frameRecursion)
        _ = try Wire.Frame(serializedBytes: nestedFrameBytes(levels: 64, path: path))
        #expect(throws: WireError.self) {
            try Wire.Frame(serializedBytes: nestedFrameBytes(levels: 65, path: path))
        }
    }

    @Test func deepPredicateTreesEncodeAndDecodeWithinTheLimit() throws {
        var predicate = Wire.QueryPredicate(format: "leaf", node: .truePredicate(.init()))
        for _ in 0..<30 {
            predicate = Wire.QueryPredicate(node: .notPredicate(.init(operand: predicate)))
        }
        let decoded = try Wire.QueryPredicate(serializedBytes: predicate.serializedBytes())
        #expect(decoded == predicate)

        for _ in 0..<30 {
            predicate = Wire.QueryPredicate(node: .notPredicate(.init(operand: predicate)))
        }
        #expect(throws: WireError.self) { try Wire.QueryPredicate(serializedBytes: predicate.serializedBytes()) }
    }
}
