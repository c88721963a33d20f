import CirrusTestSupport
import CirrusWire
import Foundation
import Synchronization
import Testing

@testable import CirrusStore

private func event(_ name: String) -> Wire.Event.Payload {
    .fetchRecords(Wire.FetchRecordsEvent(callback: .perRecordResult(Wire.RecordOutcome(recordID: recordID(name)))))
}

private func time(_ seconds: Int64) -> Wire.Timestamp {
    Wire.Timestamp(seconds: seconds)
}

/// What a journal's observer heard (``OperationJournal/observeLongLivedOperations(_:)``).
private final class HeardSignals: Sendable {
    private let heard = Mutex<[LongLivedOperationSignal]>([])

    func append(_ signal: LongLivedOperationSignal) { heard.withLock { $0.append(signal) } }
    var all: [LongLivedOperationSignal] { heard.withLock { $0 } }
}

/// A client's cancellation of a long-lived operation, durable in the journal so that it reaches
/// whichever node runs the operation (or takes it over), and the signals every node hears, on
/// every engine.
@Suite("The long-lived operation journal: cancellations and signals")
struct OperationJournalCancellationTests {
    let key = LongLivedOperationKey(owner: "_alice", operationID: "op")
    let open = Wire.Open(operationID: "op", databaseScope: .private, containerIdentifier: container)

    @Test func aCancellationIsKeptAndTheOperationCompletesAsCancelled() async throws {
        try await withJournalStore { storage, engine in
            let heard = HeardSignals()
            storage.observeLongLivedOperations { heard.append($0) }
            _ = try await storage.registerLongLivedOperation(
                key, open: open, at: time(1_000), lease: LongLivedLease(node: "a", expiry: time(1_010)))
            let other = LongLivedOperationKey(owner: "_alice", operationID: "other")
            _ = try await storage.registerLongLivedOperation(
                other, open: open, at: time(1_000), lease: LongLivedLease(node: "a", expiry: time(1_010)))
            _ = try await storage.appendLongLivedEvents([event("1")], to: key, checkpoint: [1], by: "a")
            #expect(try await storage.longLivedOperation(key)?.cancelRequested == false, "\(engine)")

            #expect(try await storage.requestLongLivedCancellation(key), "\(engine)")
            #expect(try await storage.longLivedOperation(key)?.cancelRequested == true, "\(engine)")
            #expect(try await storage.longLivedOperation(other)?.cancelRequested == false, "\(engine)")
            let gone = LongLivedOperationKey(owner: "_alice", operationID: "gone")
            #expect(try await storage.longLivedCancellationsRequested(among: [key, other, gone]) == [key], "\(engine)")
            #expect(try await storage.longLivedCancellationsRequested(among: []).isEmpty)
            try await eventually("\(engine): the cancellation is signalled") { heard.all.contains(.cancelRequested(key)) }

            // A node taking it over (a's lease expired) finds the mark with the operation.
            let taken = try #require(
                try await storage.takeOverLongLivedOperation(key, lease: LongLivedLease(node: "b", expiry: time(1_030)), at: time(1_011)))
            #expect(taken.cancelRequested && taken.lastSeq == 1, "\(engine)")
            #expect(try await storage.unfinishedLongLivedOperations().first { $0.key == key }?.cancelRequested == true)

            // Whatever the node completes it with, it completes as cancelled.
            let success = Wire.Complete(lastSeq: 0, result: .query(Wire.QueryResult()))
            let stored = try await storage.completeLongLivedOperation(key, complete: success, at: time(1_012), by: "b")
            #expect(stored == OperationJournalRules.cancelled(lastSeq: 1), "\(engine)")
            #expect(try await storage.longLivedOperation(key)?.complete == OperationJournalRules.cancelled(lastSeq: 1))
            #expect(try await storage.longLivedCancellationsRequested(among: [key]).isEmpty, "\(engine): it completed")
            // The other operation completes as it says.
            let otherStored = try await storage.completeLongLivedOperation(other, complete: success, at: time(1_012), by: "a")
            #expect(otherStored.error == nil && otherStored.result == success.result, "\(engine)")
        }
    }

    @Test func aCancellationOfWhatIsNotRunningMarksNothing() async throws {
        try await withJournalStore { storage, engine in
            // Unknown.
            #expect(try await storage.requestLongLivedCancellation(key) == false, "\(engine)")
            // Another user's operation of the same ID: a different operation, not marked.
            _ = try await storage.registerLongLivedOperation(key, open: open, at: time(1_000))
            let bobs = LongLivedOperationKey(owner: "_bob", operationID: "op")
            #expect(try await storage.requestLongLivedCancellation(bobs) == false, "\(engine)")
            #expect(try await storage.longLivedOperation(key)?.cancelRequested == false, "\(engine)")
            // Completed.
            _ = try await storage.completeLongLivedOperation(key, complete: Wire.Complete(), at: time(1_001))
            #expect(try await storage.requestLongLivedCancellation(key) == false, "\(engine)")
            #expect(try await storage.longLivedOperation(key)?.cancelRequested == false, "\(engine)")
            #expect(try await storage.longLivedOperation(key)?.complete == Wire.Complete(), "\(engine)")
        }
    }

    @Test func appendsCompletionsAndDropsAreSignalled() async throws {
        try await withJournalStore { storage, engine in
            let heard = HeardSignals()
            storage.observeLongLivedOperations { heard.append($0) }
            _ = try await storage.registerLongLivedOperation(key, open: open, at: time(1_000))
            _ = try await storage.appendLongLivedEvents([event("1"), event("2")], to: key, checkpoint: nil)
            try await eventually("\(engine): the append is signalled") { heard.all.contains(.journaled(key, lastSeq: 2)) }
            // A journaled modify too (no items: only its events).
            let journaling = ModificationJournaling(operation: key, events: { _ in [event("3")] }, checkpoint: { _ in nil })
            _ = try await storage.modifyRecords(RecordModification(), in: alice, by: "_alice", journaling: journaling)
            try await eventually("\(engine): the modify is signalled") { heard.all.contains(.journaled(key, lastSeq: 3)) }
            _ = try await storage.completeLongLivedOperation(key, complete: Wire.Complete(), at: time(1_001))
            try await storage.removeLongLivedOperation(key)
            try await eventually("\(engine): the drop is signalled") { heard.all.contains(.journaled(key, lastSeq: 0)) }
            // In commit order: the appends, the completion (its last seq), the drop.
            let journaled = heard.all.compactMap { signal -> UInt64? in
                if case .journaled(let key, let seq) = signal, key == self.key { return seq }
                return nil
            }
            #expect(journaled == [2, 3, 3, 0], "\(engine)")
        }
    }
}
