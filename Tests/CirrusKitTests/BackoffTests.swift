import Testing

@testable import CirrusKit

@Suite("Reconnect backoff")
struct BackoffTests {
    @Test("No delay before the first attempt; then exponential, jittered in its upper half, capped")
    func backoff() {
        #expect(ConnectionManager.backoff(failures: 0, base: 0.1, maximum: 10) == 0)
        for failures in 1...12 {
            let ceiling = min(10, 0.1 * Double(1 << (failures - 1)))
            for _ in 0..<50 {
                let delay = ConnectionManager.backoff(failures: failures, base: 0.1, maximum: 10)
                #expect(delay >= ceiling / 2 && delay <= ceiling)
            }
        }
        #expect(ConnectionManager.backoff(failures: 1000, base: 0.1, maximum: 10) <= 10)
    }

    @Test("Delays are not all the same (jitter)")
    func jitter() {
        let delays = Set((0..<20).map { _ in ConnectionManager.backoff(failures: 5, base: 0.1, maximum: 10) })
        #expect(delays.count > 1)
    }
}
