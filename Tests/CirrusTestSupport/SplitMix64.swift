/// SplitMix64: a small seeded random number generator, the same on every platform, so a test
/// that draws random inputs (fuzzing, interleavings, cut connections) replays exactly from its
/// seed.
///
/// For example:
/// ```swift
/// var generator = SplitMix64(seed: 7)
/// let cut = Int.random(in: 100...50_000, using: &generator)
/// ```
public struct SplitMix64: RandomNumberGenerator, Sendable {
    private var state: UInt64

    public init(seed: UInt64) {
        self.state = seed
    }

    public mutating func next() -> UInt64 {
        self.state &+= 0x9E37_79B9_7F4A_7C15
        var z = self.state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
