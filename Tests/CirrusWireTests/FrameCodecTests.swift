import CirrusTestSupport
import CirrusWire
import NIOCore
import NIOEmbedded
import NIOTestUtils
import Testing

private func lengthPrefixed(_ frames: [Wire.Frame]) throws -> ByteBuffer {
    var buffer = ByteBuffer()
    for frame in frames {
        try FrameEncoder.encode(frame, into: &buffer)
    }
    return buffer
}

private let sampleFrames: [Wire.Frame] = [
    Wire.Frame(streamID: 0, kind: .hello(Wire.Hello(protocolVersion: 1, clientName: "tëst ✈︎ 客户端"))),
    Wire.Frame(streamID: 0, kind: .ping(Wire.Ping(nonce: .max))),
    Wire.Frame(streamID: 7, kind: .open(Wire.Open(operationID: "op", initialWindow: 64))),
    Wire.Frame(streamID: 7, kind: .event(Wire.Event(seq: 1))),
    Wire.Frame(streamID: 7, kind: .window(Wire.Window(credit: 10))),
    Wire.Frame(streamID: 7, kind: .complete(Wire.Complete(lastSeq: 1))),
    Wire.Frame(streamID: 0, kind: .goAway(Wire.GoAway(lastStreamID: 7, code: .shuttingDown, reason: "bye"))),
    Wire.Frame(),
]

@Suite("Frame decoder and encoder")
struct FrameCodecTests {
    @Test func everyByteSplitDecodesTheSame() throws {
        let pairs = try sampleFrames.map { frame in (try lengthPrefixed([frame]), [frame]) }
        try ByteToMessageDecoderVerifier.verifyDecoder(inputOutputPairs: pairs) {
            FrameDecoder()
        }
    }

    @Test func severalFramesInOneBuffer() throws {
        let channel = EmbeddedChannel(handler: ByteToMessageHandler(FrameDecoder()))
        try channel.writeInbound(try lengthPrefixed(sampleFrames))
        for expected in sampleFrames {
            #expect(try channel.readInbound(as: Wire.Frame.self) == expected)
        }
        #expect(try channel.readInbound(as: Wire.Frame.self) == nil)
        #expect(try channel.finish().isClean)
    }

    @Test func oversizeLengthIsRefusedBeforeTheBodyArrives() throws {
        let channel = EmbeddedChannel(handler: ByteToMessageHandler(FrameDecoder(maximumFrameBytes: 1024)))
        var buffer = ByteBuffer()
        buffer.writeInteger(UInt32(1025))
        let error = #expect(throws: WireError.self) { try channel.writeInbound(buffer) }
        #expect(error?.code == .frameTooLarge)
        _ = try? channel.finish()
    }

    @Test func maximalLengthPrefixIsRefused() throws {
        var decoder = FrameDecoder()
        var buffer = ByteBuffer(bytes: [0xFF, 0xFF, 0xFF, 0xFF])
        let error = #expect(throws: WireError.self) { try decoder.decode(buffer: &buffer) }
        #expect(error?.code == .frameTooLarge)
    }

    @Test func frameAtExactlyTheMaximumIsAccepted() throws {
        let frame = Wire.Frame(streamID: 0, kind: .ping(Wire.Ping(nonce: 1)))
        let size = frame.serializedBytes().count
        var decoder = FrameDecoder(maximumFrameBytes: size)
        var buffer = try lengthPrefixed([frame])
        #expect(try decoder.decode(buffer: &buffer) == frame)
    }

    @Test func garbageBodyIsMalformed() throws {
        var decoder = FrameDecoder()
        var buffer = ByteBuffer()
        buffer.writeInteger(UInt32(6))
        buffer.writeBytes([0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF])
        let error = #expect(throws: WireError.self) { try decoder.decode(buffer: &buffer) }
        #expect(error?.code == .malformedMessage)
    }

    @Test func encoderRefusesAFrameAboveTheMaximum() throws {
        let frame = Wire.Frame(streamID: 0, kind: .goAway(Wire.GoAway(reason: String(repeating: "x", count: 200))))
        var buffer = ByteBuffer(bytes: [1, 2, 3])
        let error = #expect(throws: WireError.self) {
            try FrameEncoder.encode(frame, into: &buffer, maximumFrameBytes: 100)
        }
        #expect(error?.code == .messageTooLarge)
        #expect(buffer.readableBytes == 3, "nothing half-written is left behind")
    }

    @Test func lengthPrefixIsBigEndian() throws {
        let frame = Wire.Frame(streamID: 1, kind: .ping(Wire.Ping(nonce: 2)))
        let buffer = try lengthPrefixed([frame])
        let body = frame.serializedBytes()
        #expect(Array(buffer.readableBytesView.prefix(4)) == [0, 0, 0, UInt8(body.count)])
        #expect(Array(buffer.readableBytesView.dropFirst(4)) == body)
    }

    /// Random and mutated frames: the decoder throws or decodes, never crashes or hangs.
    @Test func randomAndMutatedInputNeverCrashes() throws {
        var rng = SplitMix64(seed: 0xC1_A0)
        let valid = try sampleFrames.map { try lengthPrefixed([$0]) }
        var decoded = 0
        var refused = 0
        for round in 0..<20_000 {
            var bytes: [UInt8]
            if round % 2 == 0 {
                bytes = (0..<Int(rng.next() % 64)).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
            } else {
                bytes = Array(valid[Int(rng.next() % UInt64(valid.count))].readableBytesView)
                for _ in 0..<(1 + rng.next() % 4) where !bytes.isEmpty {
                    let index = Int(rng.next() % UInt64(bytes.count))
                    switch rng.next() % 3 {
                    case 0: bytes[index] = UInt8(truncatingIfNeeded: rng.next())
                    case 1: bytes.remove(at: index)
                    default: bytes.insert(UInt8(truncatingIfNeeded: rng.next()), at: index)
                    }
                }
            }
            var decoder = FrameDecoder(maximumFrameBytes: 1 << 16)
            var buffer = ByteBuffer(bytes: bytes)
            do {
                while try decoder.decode(buffer: &buffer) != nil {
                    decoded += 1
                }
            } catch is WireError {
                refused += 1
            }
        }
        #expect(decoded > 0)
        #expect(refused > 0)
    }
}

