import CirrusWire
import NIOCore
import Testing

@Suite("Codec")
struct CodecTests {
    @Test func frameEncodesToTheExpectedBytes() throws {
        let frame = Wire.Frame(streamID: 3, kind: .ping(.init(nonce: 7)))
        // stream_id = 3; ping (field 11, length 2) { nonce = 7 }
        #expect(frame.serializedBytes() == [0x08, 0x03, 0x5A, 0x02, 0x08, 0x07])
        #expect(frame.serializedSize == 6)
        #expect(try Wire.Frame(serializedBytes: [0x08, 0x03, 0x5A, 0x02, 0x08, 0x07]) == frame)
    }

    @Test func emptyInputIsTheDefaultMessage() throws {
        #expect(try Wire.Frame(serializedBytes: []) == Wire.Frame())
        #expect(Wire.Frame().serializedBytes() == [])
    }

    @Test func serializeAppendsAndBufferDecodeDoesNotConsume() throws {
        let frame = Wire.Frame(streamID: 1, kind: .goAway(.init(lastStreamID: 9, code: .internalError, reason: "bye")))
        var buffer = ByteBuffer(bytes: [1, 2, 3])
        buffer.moveReaderIndex(forwardBy: 3)
        frame.serialize(into: &buffer)
        #expect(buffer.readableBytes == frame.serializedSize)
        #expect(try Wire.Frame(buffer: buffer) == frame)
        #expect(buffer.readableBytes == frame.serializedSize)
    }

    @Test func unknownEnumValuesRoundTrip() throws {
        let frame = Wire.Frame(streamID: 0, kind: .error(.init(code: .unrecognized(4242), message: "?")))
        let decoded = try Wire.Frame(serializedBytes: frame.serializedBytes())
        guard case .error(let error)? = decoded.kind else {
            Issue.record("expected an error frame, got \(decoded)")
            return
        }
        #expect(error.code == .unrecognized(4242))
        #expect(error.code.rawValue == 4242)
        #expect(Wire.ErrorCode(rawValue: 14) == .serverRecordChanged)

        // A negative enum number (ten-byte varint) from the wire.
        let negative: [UInt8] = [0x08] + [0xFB, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01]
        #expect(try Wire.ConnectionError(serializedBytes: negative).code == .unrecognized(-5))
    }

    @Test func unknownFieldsAreSkipped() throws {
        let bytes: [UInt8] = [
            0x08, 0x07,  // nonce = 7
            0xF8, 0x06, 0x2A,  // field 111, varint
            0xF9, 0x06, 1, 2, 3, 4, 5, 6, 7, 8,  // field 111, fixed64
            0xFA, 0x06, 0x03, 0xAA, 0xBB, 0xCC,  // field 111, bytes
            0xFD, 0x06, 1, 2, 3, 4,  // field 111, fixed32
        ]
        let ping = try Wire.Ping(serializedBytes: bytes)
        #expect(ping == Wire.Ping(nonce: 7))
        #expect(ping.serializedBytes() == [0x08, 0x07])

        // An oneof case this version does not know is absent.
        let frame = try Wire.Frame(serializedBytes: [0x08, 0x05, 0xBA, 0x3E, 0x00])  // field 999, empty
        #expect(frame == Wire.Frame(streamID: 5))
    }

    static let malformedInputs: [(String, [UInt8])] = [
        ("truncated varint", [0x08, 0x80]),
        ("varint longer than ten bytes", [0x08] + Array(repeating: 0xFF, count: 10) + [0x01]),
        ("length past the end", [0x5A, 0x05, 0x08, 0x07]),
        ("huge length", [0x5A, 0xFF, 0xFF, 0xFF, 0xFF, 0x0F]),
        ("field number zero", [0x00, 0x01]),
        ("start group", [0x0B, 0x0C]),
        ("wire type 7", [0x0F]),
        ("truncated fixed64", [0x09, 0x01, 0x02]),
        ("message field sent as varint", [0x58, 0x01]),
        ("truncated nested message", [0x5A, 0x02, 0x08, 0x80]),
    ]

    @Test(arguments: malformedInputs)
    func malformedBytesAreRejected(_ name: String, _ bytes: [UInt8]) {
        #expect(throws: WireError.self, "\(name)") { try Wire.Frame(serializedBytes: bytes) }
        do {
            _ = try Wire.Frame(serializedBytes: bytes)
        } catch {
            #expect(error.code == .malformedMessage, "\(name): \(error)")
        }
    }

    @Test func invalidUTF8AndNULInStringsDoNotCrash() throws {
        // Hello.client_name (field 2) = FF FE 41
        let hello = try Wire.Hello(serializedBytes: [0x12, 0x03, 0xFF, 0xFE, 0x41])
        #expect(hello.clientName == "\u{FFFD}\u{FFFD}A")
        // protobuf-c strings are C strings: a NUL would cut the value short, so two different
        // names could arrive as one. The decoder refuses such a string instead.
        let error = #expect(throws: WireError.self) {
            try Wire.Hello(serializedBytes: [0x12, 0x03, 0x61, 0x00, 0x62])
        }
        #expect(error?.code == .malformedMessage)
        // Nested strings too: Frame.hello (field 2) holding that Hello.
        #expect(throws: WireError.self) {
            try Wire.Frame(serializedBytes: [0x12, 0x05, 0x12, 0x03, 0x61, 0x00, 0x62])
        }
        // NUL in bytes fields is fine.
        let asset = try Wire.Asset(serializedBytes: [0x0A, 0x03, 0x61, 0x00, 0x62])
        #expect(asset.sha256 == [0x61, 0x00, 0x62])
        // Encoding cannot carry a NUL either: it is cut there (CirrusModel refuses such values).
        #expect(Wire.Hello(clientName: "a\u{0}b").serializedBytes() == [0x12, 0x01, 0x61])
    }
}
