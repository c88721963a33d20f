/// When each operation of an open-loop run is meant to start: operation `i` at `i / rate`
/// seconds after the start, whatever happened to the ones before it.
///
/// Latency is measured from that intended start, so an operation that had to wait because the
/// server (or the in-flight cap) was slow counts its wait: no coordinated omission.
public struct OpenLoopSchedule: Sendable, Hashable {
    /// Operations per second.
    public let rate: Double

    public init(rate: Double) {
        self.rate = rate
    }

    /// Seconds from the start at which operation `index` (0-based) is meant to start.
    public func intendedOffset(of index: UInt64) -> Double {
        Double(index) / self.rate
    }

    /// How many operations are due within the first `seconds` (those with offset < seconds).
    public func dueCount(within seconds: Double) -> UInt64 {
        guard seconds > 0 else { return 0 }
        let exact = seconds * self.rate
        let count = exact.rounded(.up)
        return count >= Double(UInt64.max) ? .max : UInt64(count)
    }

    /// How late an operation that actually starts at `actual` seconds is, in seconds (0 when
    /// on time or early).
    public func lateness(of index: UInt64, actual: Double) -> Double {
        max(0, actual - self.intendedOffset(of: index))
    }
}
