import CirrusWire
import NIOCore
import Testing

/// A named message value for parameterized round-trip tests.
struct WireSample: Sendable, CustomTestStringConvertible {
    let name: String
    let value: any WireMessage

    init(_ name: String, _ value: any WireMessage) {
        self.name = name
        self.value = value
    }

    var testDescription: String { name }

    /// Swift → protobuf-c → bytes → Swift through every public entry point.
    func checkRoundTrip() throws {
        try Self.checkRoundTrip(value)
    }

    static func checkRoundTrip<M: WireMessage>(_ value: M) throws {
        let bytes = value.serializedBytes()
        #expect(value.serializedSize == bytes.count)

        let decoded = try M(serializedBytes: bytes)
        #expect(decoded == value)
        #expect(decoded.serializedBytes() == bytes, "encoding is deterministic")

        var buffer = ByteBufferAllocator().buffer(capacity: 0)
        buffer.writeInteger(UInt8(0xAB))  // packing appends after existing bytes
        value.serialize(into: &buffer)
        #expect(buffer.readInteger(as: UInt8.self) == 0xAB)
        #expect(Array(buffer.readableBytesView) == bytes)
        #expect(try M(buffer: buffer) == value)

        let arena = WireArena()
        let fromArena = try bytes.withUnsafeBytes { try M.decode($0, arena: arena) }
        #expect(fromArena == value)
        var arenaBuffer = ByteBuffer()
        value.serialize(into: &arenaBuffer, arena: arena)
        #expect(Array(arenaBuffer.readableBytesView) == bytes)
    }
}
