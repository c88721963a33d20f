import CirrusWire
import Foundation

extension Date {
    /// The seconds between the Unix epoch and Foundation's reference date (2001-01-01).
    private static let unixToReference: Int64 = 978_307_200

    /// The date of a wire timestamp.
    ///
    /// `Date` is a `Double` of seconds since 2001, so today's dates resolve about
    /// 0.1 µs: a timestamp's nanoseconds are rounded to the nearest representable
    /// date. Out-of-range `nanos` are added as they are, never trapped on.
    package init(wireTimestamp timestamp: Wire.Timestamp) {
        let (shifted, overflow) = timestamp.seconds.subtractingReportingOverflow(Self.unixToReference)
        let seconds = overflow ? Double(timestamp.seconds) - Double(Self.unixToReference) : Double(shifted)
        self.init(timeIntervalSinceReferenceDate: seconds + Double(timestamp.nanos) / 1_000_000_000)
    }

    /// The date as a wire timestamp, to the nearest nanosecond.
    ///
    /// `Date(wireTimestamp: date.wireTimestamp) == date` for every date whose
    /// resolution is coarser than a nanosecond (any date more than ~9 days from 2001).
    /// Infinite dates clamp to the extreme timestamps; NaN becomes 2001-01-01.
    package var wireTimestamp: Wire.Timestamp {
        let interval = timeIntervalSinceReferenceDate
        guard interval.isFinite else {
            if interval.isNaN { return Wire.Timestamp(seconds: Self.unixToReference, nanos: 0) }
            return interval > 0
                ? Wire.Timestamp(seconds: .max, nanos: 999_999_999) : Wire.Timestamp(seconds: .min, nanos: 0)
        }
        var whole = interval.rounded(.down)
        var nanos = ((interval - whole) * 1_000_000_000).rounded()
        if nanos >= 1_000_000_000 {
            whole += 1
            nanos = 0
        }
        guard let wholeSeconds = Int64(exactly: whole) else {
            return whole > 0
                ? Wire.Timestamp(seconds: .max, nanos: 999_999_999) : Wire.Timestamp(seconds: .min, nanos: 0)
        }
        let (seconds, overflow) = wholeSeconds.addingReportingOverflow(Self.unixToReference)
        if overflow { return Wire.Timestamp(seconds: .max, nanos: 999_999_999) }
        return Wire.Timestamp(seconds: seconds, nanos: Int32(nanos))
    }
}
