@testable import CirrusKit
import CirrusTestSupport
import CirrusWire
import Dispatch
import Foundation
import NIOConcurrencyHelpers
import Testing

/// What a receiver saw: each delivery's seq (0 for `Complete`) and whether it ran on the thread
/// that delivered it. The delivering thread is marked in its own thread dictionary (a `pthread_t`
/// may be reused by a thread created after the delivering one exited).
private final class Seen: Sendable {
    private let entries = NIOLockedValueBox<[(seq: UInt64, onDeliveringThread: Bool)]>([])
    private let mark = "cirrus.test.delivering.\(UUID().uuidString)"

    func markDeliveringThread() { Thread.current.threadDictionary[self.mark] = true }

    func note(_ delivery: StreamDelivery) {
        let seq: UInt64
        switch delivery {
        case .event(let event): seq = event.seq
        default: seq = 0
        }
        let same = Thread.current.threadDictionary[self.mark] != nil
        self.entries.withLockedValue { $0.append((seq, same)) }
    }

    var seqs: [UInt64] { self.entries.withLockedValue { $0.map(\.seq) } }
    var onDeliveringThread: [Bool] { self.entries.withLockedValue { $0.map(\.onDeliveringThread) } }
}

private func event(_ seq: UInt64) -> StreamDelivery { .event(Wire.Event(seq: seq)) }

/// Runs `body` on a thread of its own (as an event loop would deliver) and waits for it.
private func onOwnThread(_ seen: Seen, _ body: @escaping @Sendable () -> Void) async {
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
        Thread {
            seen.markDeliveringThread()
            body()
            continuation.resume()
        }.start()
    }
}

@Suite("Deliveries in place: an async convenience call's callbacks without a thread hand-off")
struct ClientStreamInPlaceTests {
    @Test func acceptedDeliveriesRunOnTheDeliveringThreadBeforeDeliverReturns() async throws {
        let seen = Seen()
        let stream = ClientStream(
            open: Wire.Open(operationID: "op"), window: 8, queue: DispatchQueue(label: "callbacks"),
            deliversInPlace: { _ in true }
        ) { seen.note($0) }
        let countWhenDeliverReturned = NIOLockedValueBox(-1)
        await onOwnThread(seen) {
            stream.deliver(contentsOf: [event(1), .complete(Wire.Complete(lastSeq: 1))])
            countWhenDeliverReturned.withLockedValue { $0 = seen.seqs.count }
        }
        #expect(countWhenDeliverReturned.withLockedValue { $0 } == 2)
        #expect(seen.seqs == [1, 0])
        #expect(seen.onDeliveringThread == [true, true])
    }

    @Test func refusedDeliveriesGoToTheQueue() async throws {
        let seen = Seen()
        let queue = DispatchQueue(label: "callbacks")
        let stream = ClientStream(
            open: Wire.Open(operationID: "op"), window: 8, queue: queue, deliversInPlace: { _ in false }
        ) { seen.note($0) }
        await onOwnThread(seen) {
            stream.deliver(contentsOf: [event(1), .complete(Wire.Complete(lastSeq: 1))])
        }
        try await eventually { seen.seqs.count == 2 }
        #expect(seen.seqs == [1, 0])
        #expect(seen.onDeliveringThread == [false, false])
    }

    /// A delivery still running on the queue (say, waiting for an asset download that needs
    /// the event loop) keeps later ones off the delivering thread: they queue behind it, in
    /// order, and `deliver` returns at once instead of waiting for the queue.
    /// (Were it run in place, `deliver` would wait for the blocked queue: the time limit ends
    /// the test.)
    @Test(.timeLimit(.minutes(1)))
    func nothingRunsInPlaceBehindADeliveryStillOnTheQueue() async throws {
        let seen = Seen()
        let release = DispatchSemaphore(value: 0)
        let firstStarted = DispatchSemaphore(value: 0)
        let stream = ClientStream(
            open: Wire.Open(operationID: "op"), window: 8, queue: DispatchQueue(label: "callbacks"),
            // The first burst (seq 1) is refused, the ones after it accepted.
            deliversInPlace: { deliveries in
                if case .event(let event) = deliveries.first, event.seq == 1 { return false }
                return true
            }
        ) { delivery in
            if case .event(let event) = delivery, event.seq == 1 {
                firstStarted.signal()
                release.wait()
            }
            seen.note(delivery)
        }
        await onOwnThread(seen) {
            stream.deliver(contentsOf: [event(1)])
            firstStarted.wait()
            // Accepted, but seq 1 is still running on the queue: this must not wait for it.
            stream.deliver(contentsOf: [event(2), .complete(Wire.Complete(lastSeq: 2))])
            #expect(seen.seqs.isEmpty)
            release.signal()
        }
        try await eventually { seen.seqs.count == 3 }
        #expect(seen.seqs == [1, 2, 0])
        #expect(seen.onDeliveringThread == [false, false, false])

        // Once the queue is idle again, accepted deliveries run in place again.
        await onOwnThread(seen) {
            stream.deliver(contentsOf: [event(3)])
        }
        #expect(seen.seqs == [1, 2, 0])  // The Complete ended the stream: nothing after it.
    }

    @Test func anAsyncFetchHandsOnlyRecordsWithoutDownloadsToTheLoop() {
        let operation = CKFetchRecordsOperation(recordIDs: [])
        func outcome(_ record: Wire.Record) -> StreamDelivery {
            let outcome = Wire.RecordOutcome(recordID: Wire.RecordID(recordName: "r"), outcome: .record(record))
            return .event(Wire.Event(seq: 1, payload: .fetchRecords(Wire.FetchRecordsEvent(callback: .perRecordResult(outcome)))))
        }
        var plain = Wire.Record(recordID: Wire.RecordID(recordName: "r"), recordType: "Note")
        plain.fields = [Wire.RecordField(key: "title", value: Wire.FieldValue(kind: .stringValue("x")))]
        var inline = plain
        inline.fields.append(
            Wire.RecordField(key: "photo", value: Wire.FieldValue(kind: .assetValue(Wire.Asset(content: .inlineData([1]))))))
        var download = plain
        download.fields.append(
            Wire.RecordField(
                key: "photo",
                value: Wire.FieldValue(kind: .assetList(Wire.AssetList(values: [Wire.Asset(content: .downloadHandle("h"))])))))
        let complete = StreamDelivery.complete(Wire.Complete(lastSeq: 1))
        #expect(operation.canDeliverInPlace([outcome(plain), complete]))
        #expect(operation.canDeliverInPlace([outcome(inline), complete]))
        #expect(!operation.canDeliverInPlace([outcome(plain), outcome(download), complete]))
        #expect(!operation.canDeliverInPlace([.failed(.network("gone"))]))
        #expect(!operation.canDeliverInPlace([.persisted(Wire.Persisted())]))
        #expect(!CKFetchRecordZoneChangesOperation().canDeliverInPlace([complete]))
        #expect(CKModifyRecordsOperation().canDeliverInPlace([complete]))

        let query = CKQueryOperation(query: CKQuery(recordType: "Note", predicate: CKPredicate(value: true)))
        func match(_ record: Wire.Record) -> StreamDelivery {
            let outcome = Wire.RecordOutcome(recordID: Wire.RecordID(recordName: "r"), outcome: .record(record))
            return .event(Wire.Event(seq: 1, payload: .query(Wire.QueryEvent(callback: .recordMatched(outcome)))))
        }
        #expect(query.canDeliverInPlace([match(plain), match(inline), complete]))
        #expect(!query.canDeliverInPlace([match(plain), match(download)]))
    }
}
