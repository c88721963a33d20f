import Testing

@testable import CirrusStore

/// A saved record's change tag (``RecordChangeTag``), written digit by digit.
@Suite("Record change tags")
struct RecordChangeTagTests {
    /// The tag is the text the two base-36 conversions and the dash make, for the edges of each
    /// digit count, the largest values, negative ones (not made by the stores, still answered
    /// the same) and 20,000 random pairs.
    @Test func theTagIsTheTwoNumbersInBase36() {
        var values: [Int64] = [0, 1, 9, 10, 35, 36, 37, 1_295, 1_296, Int64.max, Int64.max - 1, -1, -36, Int64.min]
        var power: Int64 = 36
        while power <= Int64.max / 36 {
            values += [power - 1, power, power + 1]
            power *= 36
        }
        var generator = SystemRandomNumberGenerator()
        var pairs = values.flatMap { zone in values.map { (zone, $0) } }
        for _ in 0..<20_000 {
            let scale = Int64.random(in: 1...62, using: &generator)
            pairs.append(
                (
                    Int64.random(in: 0...(Int64(1) << scale), using: &generator),
                    Int64.random(in: 0...(Int64(1) << scale), using: &generator)
                ))
        }
        for (zone, seq) in pairs {
            let expected = String(zone, radix: 36) + "-" + String(seq, radix: 36)
            let made = RecordChangeTag.make(zoneID: zone, seq: seq)
            if made != expected {
                Issue.record("zone \(zone), seq \(seq): \(made), expected \(expected)")
                return
            }
        }
    }
}
