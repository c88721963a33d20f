import CirrusWire
import NIOCore
import Testing

@Suite("Codec arena")
struct CodecArenaTests {
    static let frame = GeneratedSamples.maximal.compactMap { $0.value as? Wire.Frame }.first ?? Wire.Frame()

    @Test func decodingOneHundredThousandTimesKeepsTheArenaSmall() throws {
        let bytes = Self.frame.serializedBytes()
        let arena = WireArena()
        for _ in 0..<100_000 {
            let decoded = try bytes.withUnsafeBytes { try Wire.Frame.decode($0, arena: arena) }
            #expect(decoded.streamID == Self.frame.streamID)
        }
        #expect(arena.highWaterChunkCount <= 2)
        #expect(arena.chunkCount <= arena.retainedChunkLimit)
    }

    @Test func encodingReusesTheArena() {
        let arena = WireArena()
        var buffer = ByteBufferAllocator().buffer(capacity: 4096)
        for _ in 0..<10_000 {
            buffer.clear()
            Self.frame.serialize(into: &buffer, arena: arena)
        }
        #expect(Array(buffer.readableBytesView) == Self.frame.serializedBytes())
        #expect(arena.highWaterChunkCount <= 2)
    }

    @Test func oversizedAllocationsAreFreedOnReset() throws {
        let chunk = Wire.AssetChunk(data: Array(repeating: 0x5A, count: 1 << 20))
        let bytes = chunk.serializedBytes()
        let arena = WireArena()
        for _ in 0..<3 {
            let decoded = try bytes.withUnsafeBytes { try Wire.AssetChunk.decode($0, arena: arena) }
            #expect(decoded == chunk)
            #expect(arena.chunkCount <= arena.retainedChunkLimit)
        }
    }

    @Test func oneOversizedBlockUpToTheLimitIsKeptForTheNextFrame() throws {
        let big = Wire.AssetChunk(data: Array(repeating: 0x5A, count: 1 << 20))
        let bytes = big.serializedBytes()
        let arena = WireArena(spareOversizedLimit: 2 << 20)
        #expect(arena.spareCapacity == 0)
        for _ in 0..<3 {
            #expect(try bytes.withUnsafeBytes { try Wire.AssetChunk.decode($0, arena: arena) } == big)
            #expect(arena.spareCapacity >= 1 << 20, "the chunk's block is kept after the reset")
            #expect(arena.chunkCount <= arena.retainedChunkLimit)
        }
        // Encoding reuses it too, and the bytes are right.
        var buffer = ByteBufferAllocator().buffer(capacity: 0)
        big.serialize(into: &buffer, arena: arena)
        #expect(Array(buffer.readableBytesView) == bytes)

        // A block above the limit is freed as before.
        let huge = Wire.AssetChunk(data: Array(repeating: 0x33, count: 3 << 20))
        let small = WireArena(spareOversizedLimit: 2 << 20)
        #expect(try huge.serializedBytes().withUnsafeBytes { try Wire.AssetChunk.decode($0, arena: small) } == huge)
        #expect(small.spareCapacity == 0)
        // The default keeps none.
        let none = WireArena()
        _ = try bytes.withUnsafeBytes { try Wire.AssetChunk.decode($0, arena: none) }
        #expect(none.spareCapacity == 0)
    }

    @Test func decodeMemoryLimitRejectsAmplification() throws {
        let arena = WireArena(decodeByteLimit: 64 * 1024)
        let frame = Wire.Frame(kind: .hello(.init(clientName: String(repeating: "x", count: 100_000))))
        let bytes = frame.serializedBytes()
        #expect(throws: WireError.self) { try bytes.withUnsafeBytes { try Wire.Frame.decode($0, arena: arena) } }
        arena.decodeByteLimit = 1 << 20
        #expect(try bytes.withUnsafeBytes { try Wire.Frame.decode($0, arena: arena) } == frame)
    }
}
