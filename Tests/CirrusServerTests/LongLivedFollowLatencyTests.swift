@testable import CirrusServer
import CirrusPostgres
import CirrusStore
import CirrusTestSupport
import CirrusWire
import Foundation
import Testing

/// How long an event appended on node a takes to reach a stream following the operation on
/// node b (README → Long-lived operations → Several nodes): with b hearing a's signals, and
/// with b only polling the journal every 250 ms (what a follower did before the signals). A
/// measurement, printed; it checks only that every event arrives, in order.
@Suite("Long-lived operations across nodes: follow latency")
struct LongLivedFollowLatencyTests {
    static let rounds = 40

    @Test func eventsAppendedOnOneNodeReachAFollowerOnAnother() async throws {
        let signalled = try await measure(deaf: [], poll: .seconds(1))
        let polled = try await measure(deaf: ["b"], poll: .milliseconds(250))
        print("cross-node follow latency, \(Self.rounds) events: with signals \(signalled); poll every 250 ms, no signals \(polled)")
    }

    /// Appends one event at a time on node a while b's follower waits for it; the time from
    /// the append's start to the follower having the event, summarized.
    private func measure(deaf: Set<String>, poll: Duration) async throws -> String {
        var samples: [Duration] = []
        try await withTwoNodes(
            a: (Node.leasing("a", lease: .seconds(3_600)), ChunkedSaveExecutor()),
            b: (Node.leasing("b", lease: .seconds(3_600), poll: poll), ChunkedSaveExecutor()),
            deaf: deaf
        ) { a, b in
            let key = LongLivedOperationKey(owner: "_alice", operationID: "latency")
            let open = Wire.Open(
                operationID: key.operationID, databaseScope: .private, containerIdentifier: container,
                request: .fetchRecords(Wire.FetchRecordsRequest()))
            // Held by a for the whole measurement: no node's sweep takes it.
            let lease = LongLivedLease(node: "a", expiry: Wire.Timestamp(seconds: SQLiteStorage.systemClock().seconds + 3_600))
            _ = try await a.storage.registerLongLivedOperation(key, open: open, at: SQLiteStorage.systemClock(), lease: lease)
            let (run, attachment) = try await b.registry.attach(
                operationID: key.operationID, caller: ClientIdentity(userRecordName: "_alice"), after: 0
            ).get()
            defer { run.release(attachment) }
            let clock = ContinuousClock()
            for round in 1...Self.rounds {
                let seq = UInt64(round - 1)
                let waiting = Task {
                    let next = try await run.next(after: seq, attachment: attachment, limit: 10)
                    return (next, clock.now)
                }
                // The follower waits; appends land at every phase of its poll.
                try await Task.sleep(for: .milliseconds(20 + (round * 37) % 230))
                let start = clock.now
                let payload = Wire.Event.Payload.fetchRecords(
                    Wire.FetchRecordsEvent(callback: .perRecordResult(Wire.RecordOutcome(recordID: recordID("r\(round)")))))
                _ = try await a.storage.appendLongLivedEvents([payload], to: key, checkpoint: nil, by: "a")
                let (next, end) = try await waiting.value
                guard case .encoded(let events) = next else {
                    Issue.record("round \(round): \(next)")
                    return
                }
                #expect(events.map(\.seq) == [seq + 1], "round \(round)")
                samples.append(end - start)
            }
        }
        return Self.summary(samples)
    }

    private static func summary(_ samples: [Duration]) -> String {
        let milliseconds = samples.map { Double($0.components.seconds) * 1_000 + Double($0.components.attoseconds) / 1e15 }.sorted()
        guard !milliseconds.isEmpty else { return "no samples" }
        func at(_ fraction: Double) -> Double { milliseconds[min(milliseconds.count - 1, Int(Double(milliseconds.count) * fraction))] }
        let mean = milliseconds.reduce(0, +) / Double(milliseconds.count)
        return String(format: "median %.1f ms, mean %.1f ms, p90 %.1f ms, max %.1f ms", at(0.5), mean, at(0.9), milliseconds.last ?? 0)
    }
}
