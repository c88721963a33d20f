import CirrusModel
import Foundation
import Histogram

/// What one operation of the load did.
struct BenchOutcome: Sendable {
    var kind: BenchOperationKind?
    var counts = BenchCounts()
    /// Error code names, one per failure (the operation's, or each failed item's).
    var errors: [String] = []
    /// The message of the first failure of each code name in `errors`.
    var messages: [String: String] = [:]
    /// Bytes of connections the operation made and dropped itself (handshake mode).
    var bytesIn: UInt64 = 0
    var bytesOut: UInt64 = 0
    /// The operation's own error, when it failed as a whole.
    var operationError: CKError?

    init(kind: BenchOperationKind?) {
        self.kind = kind
        self.counts.operations = 1
    }

    mutating func failed(_ error: any Error) {
        self.counts.failedOperations += 1
        self.operationError = (error as? CKError) ?? CKError(.internalError, message: "\(error)")
        self.note(error)
    }

    mutating func itemFailed(_ error: any Error) {
        self.counts.failedItems += 1
        self.note(error)
    }

    private mutating func note(_ error: any Error) {
        let code = BenchOutcome.codeName(error)
        self.errors.append(code)
        if self.messages[code] == nil {
            self.messages[code] = (error as? CKError)?.message ?? "\(error)"
        }
    }

    /// A CloudKit error code as a name (`networkFailure`, `serverRecordChanged` …); `other`
    /// for errors that are not `CKError`s.
    static func codeName(_ error: any Error) -> String {
        guard let error = error as? CKError else { return "other" }
        return codeName(error.code)
    }

    static func codeName(_ code: CKError.Code) -> String {
        let words = code.description.split(separator: " ")
        guard let first = words.first else { return "code\(code.rawValue)" }
        return String(first) + words.dropFirst().map { $0.prefix(1).uppercased() + $0.dropFirst() }.joined()
    }
}

/// Everything the run records, behind one lock: counts and histograms per phase.
final class BenchRecorder: Sendable {
    enum Phase: Sendable { case warmup, measured, done }

    struct State {
        var phase: Phase = .warmup
        var warmup = BenchCounts()
        var total = BenchCounts()
        var byKind: [BenchOperationKind: BenchCounts] = [:]
        var histogram = BenchRecorder.makeHistogram()
        var histogramByKind: [BenchOperationKind: Histogram<UInt64>] = [:]
        var errors: [String: UInt64] = [:]
        /// The first message seen for each code in `errors`.
        var errorMessages: [String: String] = [:]
        var delayedStarts: UInt64 = 0
        var extraBytesIn: UInt64 = 0
        var extraBytesOut: UInt64 = 0
        /// Measured operations started (operations mode hands out this many tickets).
        var ticketsTaken: UInt64 = 0
    }

    let state = Locked(State())

    static func makeHistogram() -> Histogram<UInt64> {
        // 1 µs … 1 hour, 3 significant digits; longer latencies stretch it.
        var histogram = Histogram<UInt64>(highestTrackableValue: 3_600_000_000, numberOfSignificantValueDigits: .three)
        histogram.autoResize = true
        return histogram
    }

    /// Records `outcome` of an operation that started in `phase`, with `latency` in µs.
    func record(_ outcome: BenchOutcome, phase: Phase, latencyMicroseconds: UInt64) {
        self.state.withLock { state in
            guard phase == .measured else {
                state.warmup.add(outcome.counts)
                return
            }
            state.total.add(outcome.counts)
            let value = max(latencyMicroseconds, 1)
            _ = state.histogram.record(value)
            if let kind = outcome.kind {
                state.byKind[kind, default: BenchCounts()].add(outcome.counts)
                _ = state.histogramByKind[kind, default: BenchRecorder.makeHistogram()].record(value)
            }
            for error in outcome.errors {
                state.errors[error, default: 0] += 1
            }
            for (code, message) in outcome.messages where state.errorMessages[code] == nil {
                state.errorMessages[code] = message
            }
            state.extraBytesIn += outcome.bytesIn
            state.extraBytesOut += outcome.bytesOut
        }
    }

    /// The phase a starting operation belongs to, taking a ticket when the measured phase has a
    /// fixed count; nil when no more operations may start.
    func begin(limit: UInt64?) -> Phase? {
        self.state.withLock { state in
            switch state.phase {
            case .done: return nil
            case .warmup: return .warmup
            case .measured:
                if let limit {
                    guard state.ticketsTaken < limit else { return nil }
                }
                state.ticketsTaken += 1
                return .measured
            }
        }
    }

    var phase: Phase { self.state.withLock { $0.phase } }

    func set(_ phase: Phase) {
        self.state.withLock { $0.phase = phase }
    }
}
