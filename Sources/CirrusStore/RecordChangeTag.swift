/// A saved record's change tag: its zone's row ID and the zone's change sequence at the save,
/// each in base 36 (lowercase), joined by "-" (`"1-2s"`). Both engines make it so.
package enum RecordChangeTag {
    /// The tag of the save numbered `seq` in zone `zoneID`; the same text as
    /// `String(zoneID, radix: 36) + "-" + String(seq, radix: 36)`, written digit by digit into one
    /// buffer: the two conversions and the concatenation took 2 % of the writer's time in
    /// 400-record saves.
    package static func make(zoneID: Int64, seq: Int64) -> String {
        guard zoneID >= 0, seq >= 0 else { return String(zoneID, radix: 36) + "-" + String(seq, radix: 36) }
        // 13 digits hold any Int64 in base 36: two of them and the dash.
        return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 27) { buffer in
            let dash = write(UInt64(zoneID), into: buffer, at: 0)
            buffer[dash] = UInt8(ascii: "-")
            let end = write(UInt64(seq), into: buffer, at: dash + 1)
            return String(decoding: UnsafeBufferPointer(rebasing: buffer[..<end]), as: UTF8.self)
        }
    }

    /// Writes `value`'s base-36 digits at `start`; the index after the last.
    private static func write(_ value: UInt64, into buffer: UnsafeMutableBufferPointer<UInt8>, at start: Int) -> Int {
        var count = 1
        var rest = value / 36
        while rest > 0 {
            count += 1
            rest /= 36
        }
        var index = start + count
        rest = value
        repeat {
            index -= 1
            let digit = UInt8(truncatingIfNeeded: rest % 36)
            buffer[index] = digit < 10 ? UInt8(ascii: "0") + digit : UInt8(ascii: "a") + digit - 10
            rest /= 36
        } while rest > 0
        return start + count
    }
}
