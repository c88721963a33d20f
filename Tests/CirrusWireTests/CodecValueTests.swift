import CirrusWire
import Testing

@Suite("Codec values")
struct CodecValueTests {
    @Test func hotMessagesStaySmall() {
        // Large payloads live out of line; a Frame copy must stay cheap.
        #expect(MemoryLayout<Wire.Frame>.size <= 256)
        #expect(MemoryLayout<Wire.Event>.size <= 256)
    }

    @Test func aFrameFitsAnExistentialsInlineStorage() {
        // Every frame crosses the channel pipeline as an `NIOAny` (an `Any` inside): a value of
        // up to three words is kept inline there, a larger one costs an allocation per handler.
        #expect(MemoryLayout<Wire.Frame>.size <= 3 * MemoryLayout<Int>.size)
        let frame = Wire.Frame(streamID: 9, kind: .event(Wire.Event(seq: 4)))
        var copy = frame
        copy.kind = .ping(Wire.Ping(nonce: 1))
        #expect(frame.kind == .event(Wire.Event(seq: 4)))
        #expect(copy.kind == .ping(Wire.Ping(nonce: 1)))
    }

    @Test func outOfLineFieldsKeepValueSemantics() {
        let original = Wire.NotPredicate(operand: .init(format: "a"))
        var copy = original
        copy.operand?.format = "b"
        #expect(original.operand?.format == "a")
        #expect(copy.operand?.format == "b")
        #expect(original != copy)
        copy.operand?.format = "a"
        #expect(original == copy)
        #expect(original.hashValue == copy.hashValue)
    }

    @Test func presenceFieldsDistinguishZeroFromAbsent() throws {
        let absent = Wire.Hello(clientName: "x")
        let empty = Wire.Hello(clientName: "x", bearerToken: "")
        #expect(absent.serializedBytes() != empty.serializedBytes())
        #expect(try Wire.Hello(serializedBytes: empty.serializedBytes()).bearerToken == "")
        #expect(try Wire.Hello(serializedBytes: absent.serializedBytes()).bearerToken == nil)
    }

    @Test func convenienceAPIsAreSafeAcrossTasks() async {
        let frames = GeneratedSamples.oneofCases.compactMap { $0.value as? Wire.Frame }
        let failures = await withTaskGroup(of: Int.self) { group in
            for task in 0..<8 {
                group.addTask {
                    var failures = 0
                    for round in 0..<500 {
                        let frame = frames[(task + round) % frames.count]
                        let decoded = try? Wire.Frame(serializedBytes: frame.serializedBytes())
                        if decoded != frame || frame.serializedSize != frame.serializedBytes().count {
                            failures += 1
                        }
                    }
                    return failures
                }
            }
            return await group.reduce(0, +)
        }
        #expect(failures == 0)
    }
}
