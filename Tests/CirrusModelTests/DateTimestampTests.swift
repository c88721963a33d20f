import CirrusWire
import Foundation
import Testing

@testable import CirrusModel

@Suite struct DateTimestampTests {
    @Test(arguments: [
        1_732_000_000.123_456_7, 0, -1, -0.5, 1e-3, 978_307_200.000_000_001, -62_135_596_800, 253_402_300_799.999,
    ])
    func dateToTimestampToDateIsExact(_ secondsSince1970: Double) {
        let date = Date(timeIntervalSince1970: secondsSince1970)
        let timestamp = date.wireTimestamp
        #expect((0..<1_000_000_000).contains(timestamp.nanos))
        #expect(Date(wireTimestamp: timestamp) == date)
    }

    @Test func timestampsNearTheReferenceDateKeepEveryNanosecond() {
        for nanos: Int32 in [0, 1, 7, 999_999_999, 123_456_789] {
            let timestamp = Wire.Timestamp(seconds: 978_307_200 + 12_345, nanos: nanos)
            #expect(Date(wireTimestamp: timestamp).wireTimestamp == timestamp)
        }
    }

    @Test func timestampsTodayKeepTheirTimeToWithinDatesResolution() {
        let timestamp = Wire.Timestamp(seconds: 1_732_000_000, nanos: 123_456_789)
        let again = Date(wireTimestamp: timestamp).wireTimestamp
        #expect(again.seconds == timestamp.seconds)
        #expect(abs(Int(again.nanos) - Int(timestamp.nanos)) < 200)
    }

    @Test func extremeValuesNeverTrap() {
        _ = Date(wireTimestamp: Wire.Timestamp(seconds: .max, nanos: .max))
        _ = Date(wireTimestamp: Wire.Timestamp(seconds: .min, nanos: .min))
        _ = Date(wireTimestamp: Wire.Timestamp(seconds: 0, nanos: -1))
        #expect(Date(timeIntervalSinceReferenceDate: .infinity).wireTimestamp.seconds == .max)
        #expect(Date(timeIntervalSinceReferenceDate: -.infinity).wireTimestamp.seconds == .min)
        #expect(Date(timeIntervalSinceReferenceDate: .nan).wireTimestamp == Wire.Timestamp(seconds: 978_307_200, nanos: 0))
        #expect(Date(timeIntervalSinceReferenceDate: 1e300).wireTimestamp.seconds == .max)
        #expect(Date(timeIntervalSinceReferenceDate: -1e300).wireTimestamp.seconds == .min)
    }

    @Test func nanosecondsRoundUpIntoTheNextSecond() {
        let date = Date(timeIntervalSinceReferenceDate: 0.999_999_999_9)
        let timestamp = date.wireTimestamp
        #expect(timestamp == Wire.Timestamp(seconds: 978_307_201, nanos: 0))
    }
}
