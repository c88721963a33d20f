import CirrusTestSupport
import CirrusWire
import Testing

@Suite("Codec fuzz")
struct CodecFuzzTests {
    /// Valid frames to mutate: every Frame sample the generator made.
    static let corpus: [[UInt8]] = (GeneratedSamples.maximal + GeneratedSamples.oneofCases)
        .compactMap { $0.value as? Wire.Frame }
        .map { $0.serializedBytes() }

    static func mutate(_ bytes: [UInt8], using generator: inout SplitMix64) -> [UInt8] {
        var bytes = bytes
        for _ in 0..<Int.random(in: 1...4, using: &generator) {
            switch Int.random(in: 0..<6, using: &generator) {
            case 0 where !bytes.isEmpty:
                bytes[Int.random(in: bytes.indices, using: &generator)] = .random(in: 0...255, using: &generator)
            case 1:
                bytes.insert(.random(in: 0...255, using: &generator), at: .random(in: 0...bytes.count, using: &generator))
            case 2 where !bytes.isEmpty:
                bytes.remove(at: .random(in: bytes.indices, using: &generator))
            case 3:
                bytes.removeLast(Int.random(in: 0...bytes.count, using: &generator))
            case 4 where !bytes.isEmpty:
                let start = Int.random(in: bytes.indices, using: &generator)
                let end = Int.random(in: start...bytes.count, using: &generator)
                bytes.insert(contentsOf: bytes[start..<end], at: .random(in: 0...bytes.count, using: &generator))
            default:
                if !bytes.isEmpty {
                    let index = Int.random(in: bytes.indices, using: &generator)
                    bytes[index] ^= 1 << UInt8.random(in: 0..<8, using: &generator)
                }
            }
        }
        return bytes
    }

    @Test func randomAndMutatedFramesThrowOrDecode() throws {
        #expect(!Self.corpus.isEmpty)
        var generator = SplitMix64(seed: 0xC1AA_05F0_22ED)
        let arena = WireArena()
        var decoded = 0
        var rejected = 0
        for iteration in 0..<20_000 {
            let bytes: [UInt8]
            if iteration.isMultiple(of: 2) {
                let count = Int.random(in: 0...96, using: &generator)
                bytes = (0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) }
            } else {
                let base = Self.corpus[Int.random(in: Self.corpus.indices, using: &generator)]
                bytes = Self.mutate(base, using: &generator)
            }
            do {
                let frame = iteration.isMultiple(of: 3)
                    ? try bytes.withUnsafeBytes { try Wire.Frame.decode($0, arena: arena) }
                    : try Wire.Frame(serializedBytes: bytes)
                // Whatever decoded must encode and decode again.
                _ = try Wire.Frame(serializedBytes: frame.serializedBytes())
                decoded += 1
            } catch let error as WireError {
                #expect(error.code == .malformedMessage)
                rejected += 1
            } catch {
                Issue.record("unexpected error \(error)")
            }
        }
        #expect(decoded + rejected == 20_000)
        #expect(decoded > 0 && rejected > 0)
        #expect(arena.chunkCount <= arena.retainedChunkLimit)
    }
}
