import CirrusWire
import Foundation
import GRDB
import Synchronization
import Testing

@testable import CirrusStore

private func event(_ name: String) -> Wire.Event.Payload {
    .fetchRecords(Wire.FetchRecordsEvent(callback: .perRecordResult(Wire.RecordOutcome(recordID: recordID(name)))))
}

private let at = Wire.Timestamp(seconds: 1_000, nanos: 5)

@Suite("The long-lived operation journal")
struct OperationJournalTests {
    let key = LongLivedOperationKey(owner: "_alice", operationID: "op")
    let open = Wire.Open(operationID: "op", databaseScope: .private, containerIdentifier: container)

    @Test func registerAppendCompleteAcknowledge() async throws {
        try await withJournalStore { storage, engine in
            let record = try await storage.registerLongLivedOperation(key, open: open, at: at)
            #expect(record.lastSeq == 0 && !record.isCompleted)
            await #expect(throws: StoreError(.duplicateOperation, "operation op is already registered")) {
                _ = try await storage.registerLongLivedOperation(key, open: open, at: at)
            }
            let first = try await storage.appendLongLivedEvents([event("a"), event("b")], to: key, checkpoint: [1])
            let second = try await storage.appendLongLivedEvents([event("c")], to: key, checkpoint: nil)
            #expect((first + second).map(\.seq) == [1, 2, 3], "\(engine)")
            #expect(try await storage.longLivedEvents(key, after: 1, limit: 10) == Array((first + second).dropFirst()))
            #expect(try await storage.longLivedEvents(key, after: 0, limit: 2) == first)
            #expect(try await storage.longLivedOperation(key)?.checkpoint == [1], "nil keeps the checkpoint")
            #expect(try await storage.unfinishedLongLivedOperations().map(\.key) == [key])
            #expect(try await storage.acknowledgeLongLivedOperation(key) == false, "still running")

            let complete = try await storage.completeLongLivedOperation(
                key, complete: Wire.Complete(lastSeq: 99), at: Wire.Timestamp(seconds: 2_000))
            #expect(complete.lastSeq == 3, "\(engine): the journal's last seq")
            let stored = try #require(try await storage.longLivedOperation(key))
            #expect(stored.complete == complete)
            #expect(stored.creationDate == at)
            #expect(stored.completionDate == Wire.Timestamp(seconds: 2_000))
            #expect(stored.open == open)
            await #expect(throws: StoreError(.unknownOperation, "operation op is not running")) {
                _ = try await storage.appendLongLivedEvents([event("late")], to: key, checkpoint: nil)
            }
            #expect(try await storage.unfinishedLongLivedOperations().isEmpty)
            #expect(try await storage.longLivedOperationIDs(owner: "_alice", container: container, completedSince: at) == ["op"])
            #expect(try await storage.longLivedOperationIDs(owner: "_bob", container: container, completedSince: at) == [])
            #expect(
                try await storage.longLivedOperationIDs(
                    owner: "_alice", container: container, completedSince: Wire.Timestamp(seconds: 2_001)) == [])

            #expect(try await storage.acknowledgeLongLivedOperation(key))
            #expect(try await storage.longLivedOperation(key) == nil)
            #expect(try await storage.longLivedEvents(key, after: 0, limit: 10).isEmpty)
        }
    }

    /// Registering a modify hands back its saves' fields as the journal encoded them; a
    /// modification carrying them stores every record with its own fields, whether they are
    /// still the ones encoded, were changed since, or are given another record's encoding.
    @Test func aRegisteredSavesFieldEncodingsServeOnlyTheFieldsTheyEncoded() async throws {
        try await withJournalStore { storage, engine in
            let records = [
                note("a", [field("title", .stringValue("first")), field("n", .int64Value(1))]),
                note("b", [field("title", .stringValue("second"))]),
                note("c", [field("title", .stringValue("third")), field("when", .dateValue(Wire.Timestamp(seconds: 7)))]),
                note("d"),
            ]
            let open = Wire.Open(
                operationID: "save", databaseScope: .private, containerIdentifier: container,
                request: .modifyRecords(Wire.ModifyRecordsRequest(recordsToSave: records, savePolicy: .allKeys)))
            let registered = try await storage.registerLongLivedOperation(
                LongLivedOperationKey(owner: "_alice", operationID: "save"), open: open, at: at)
            let encodings = registered.fieldEncodings.encodings
            #expect(encodings.count == records.count, "\(engine)")
            for (encoding, record) in zip(encodings, records.prefix(3)) {
                #expect(encoding.encodes(record.fields), "\(engine)")
            }
            #expect(try await storage.longLivedOperation(registered.key)?.fieldEncodings.encodings.isEmpty == true)

            // b's fields changed after they were encoded; c and d are given a's encoding.
            var saving = records
            saving[1].fields[0].value = Wire.FieldValue(kind: .stringValue("changed"))
            var modification = RecordModification(saving: saving, savePolicy: .allKeys)
            modification.fieldEncodings = RecordFieldEncodings([encodings[0], encodings[1], encodings[0], encodings[0]])
            let result = try await storage.modifyRecords(modification, in: alice, by: "_alice")
            for index in saving.indices {
                let id = try #require(saving[index].recordID)
                #expect(result.saved(index)?.fields == saving[index].fields, "\(engine): save \(index)")
                #expect(try await storage.fetch(id).record?.fields == saving[index].fields, "\(engine): record \(index)")
            }
        }
    }

    @Test func journaledEventsReadInWireFormatAsStored() async throws {
        try await withJournalStore { storage, engine in
            _ = try await storage.registerLongLivedOperation(key, open: open, at: at)
            let events = try await storage.appendLongLivedEvents([event("a"), event("b"), event("c")], to: key, checkpoint: nil)
            let encoded = try await storage.longLivedEncodedEvents(key, after: 1, limit: 10)
            #expect(encoded.map(\.seq) == [2, 3], "\(engine)")
            #expect(try encoded.map { try $0.decoded() } == Array(events.dropFirst()))
            #expect(encoded == events.dropFirst().map(Wire.EncodedEvent.init))
        }
    }

    @Test(arguments: [
        ("another seq", Wire.Event(seq: 9, payload: event("x")).serializedBytes()),
        ("no payload", Wire.Event(seq: 2).serializedBytes()),
        ("cut off", Array(Wire.Event(seq: 2, payload: event("x")).serializedBytes().dropLast())),
    ])
    func aStoredEventThatIsNotItsRowsEventIsCorruptData(what: String, bytes: [UInt8]) async throws {
        try await withSQLiteStore { storage, _ in
            _ = try await storage.registerLongLivedOperation(key, open: open, at: at)
            _ = try await storage.appendLongLivedEvents([event("a"), event("b")], to: key, checkpoint: nil)
            try await storage.pool.write { db in
                try db.execute(
                    sql: "UPDATE long_lived_events SET event = ? WHERE seq = 2", arguments: [Data(bytes)])
            }
            #expect(try await storage.longLivedEncodedEvents(key, after: 0, limit: 1).map(\.seq) == [1])
            await #expect(throws: StoreError.self, "\(what)") {
                _ = try await storage.longLivedEncodedEvents(key, after: 0, limit: 10)
            }
            await #expect(throws: StoreError.self, "\(what)") {
                _ = try await storage.longLivedEvents(key, after: 1, limit: 10)
            }
        }
    }

    @Test func modifyAndItsEventsCommitTogether() async throws {
        try await withJournalStore { storage, engine in
            _ = try await storage.registerLongLivedOperation(key, open: open, at: at)
            let records = (0..<3).map { Wire.Record(recordID: recordID("n\($0)"), recordType: "Note") }
            let journaling = ModificationJournaling(
                operation: key,
                events: { result in
                    result.saves.map { save in
                        let event = Wire.ModifyRecordsPerRecordSave(recordID: save.id, outcome: save.value.map { .record($0) })
                        return .modifyRecords(Wire.ModifyRecordsEvent(callback: .perRecordSave(event)))
                    }
                },
                checkpoint: { _ in [7] })
            let (result, events) = try await storage.modifyRecords(
                RecordModification(saving: records), in: alice, by: "_alice", journaling: journaling)
            #expect(events.map(\.seq) == [1, 2, 3], "\(engine)")
            #expect(result.saves.count == 3)
            #expect(try await storage.longLivedEvents(key, after: 0, limit: 10) == events)
            for index in 0..<3 { #expect(try await storage.fetch(recordID("n\(index)")).record != nil, "\(engine)") }
            #expect(try await storage.longLivedOperation(key)?.checkpoint == [7])

            // The operation is gone: the records of a refused append are not written either.
            try await storage.removeLongLivedOperation(key)
            await #expect(throws: StoreError(.unknownOperation, "operation op is not running")) {
                _ = try await storage.modifyRecords(
                    RecordModification(saving: [Wire.Record(recordID: recordID("orphan"), recordType: "Note")]),
                    in: alice, by: "_alice", journaling: journaling)
            }
            let fetched = try await storage.fetchRecords([recordID("orphan")], desiredKeys: nil, in: alice)
            guard let error = fetched.first?.failure else {
                Issue.record("\(engine): the record was written without its events")
                return
            }
            #expect(error.code == .unknownItem)
        }
    }

    /// A long-lived modify fires subscriptions as any modify does: its notifications are in
    /// the subscribers' feeds and announced to the observers once it committed.
    @Test func aJournaledModifyNotifiesSubscribers() async throws {
        try await withJournalStore { storage, engine in
            let subscriptions = try #require(storage as? any SubscriptionStorage, "\(engine) implements SubscriptionStorage")
            let heard = Mutex<[StoredNotification]>([])
            subscriptions.observeNotifications { _, notifications in heard.withLock { $0 += notifications } }
            try await subscriptions.subscribe([S.query("notes")])
            _ = try await storage.registerLongLivedOperation(key, open: open, at: at)
            let journaling = ModificationJournaling(operation: key, events: { _ in [] }, checkpoint: { _ in nil })
            let records = (0..<2).map { Wire.Record(recordID: recordID("n\($0)"), recordType: "Note") }
            _ = try await storage.modifyRecords(
                RecordModification(saving: records), in: alice, by: "_alice", journaling: journaling)
            let stored = try await subscriptions.notifications()
            #expect(stored.map(\.summary) == ["notes:created:n0", "notes:created:n1"], "\(engine)")
            #expect(heard.withLock { $0 } == stored, "\(engine): announced after the commit")
        }
    }

    @Test func pruneDropsOnlyWhatCompletedBeforeTheCutoff() async throws {
        try await withJournalStore { storage, engine in
            let old = LongLivedOperationKey(owner: "_alice", operationID: "old")
            let running = LongLivedOperationKey(owner: "_alice", operationID: "running")
            for key in [old, running] {
                _ = try await storage.registerLongLivedOperation(key, open: open, at: at)
                _ = try await storage.appendLongLivedEvents([event("x")], to: key, checkpoint: nil)
            }
            _ = try await storage.completeLongLivedOperation(old, complete: Wire.Complete(), at: at)
            #expect(try await storage.pruneLongLivedOperations(completedBefore: Wire.Timestamp(seconds: 1_000, nanos: 5)) == 0)
            #expect(try await storage.pruneLongLivedOperations(completedBefore: Wire.Timestamp(seconds: 1_001)) == 1)
            #expect(try await storage.longLivedOperation(old) == nil)
            #expect(try await storage.longLivedEvents(old, after: 0, limit: 10).isEmpty)
            #expect(try await storage.longLivedOperation(running)?.lastSeq == 1, "\(engine)")
        }
    }

    @Test func anOperationIDIsTheOwnersWhateverTheContainer() async throws {
        try await withJournalStore { storage, engine in
            _ = try await storage.registerLongLivedOperation(key, open: open, at: at)
            var elsewhere = open
            elsewhere.containerIdentifier = "iCloud.com.example.other"
            await #expect(throws: StoreError(.duplicateOperation, "operation op is already registered"), "\(engine)") {
                _ = try await storage.registerLongLivedOperation(key, open: elsewhere, at: at)
            }
            // Another user's operation with the same ID is another operation.
            let bobs = LongLivedOperationKey(owner: "_bob", operationID: "op")
            _ = try await storage.registerLongLivedOperation(bobs, open: elsewhere, at: at)
            _ = try await storage.appendLongLivedEvents([event("b")], to: bobs, checkpoint: nil)
            #expect(try await storage.longLivedOperation(key)?.lastSeq == 0, "\(engine)")
            #expect(try await storage.longLivedOperation(bobs)?.open == elsewhere)
            #expect(try await storage.longLivedOperationIDs(owner: "_bob", container: container, completedSince: at) == [])
            #expect(
                try await storage.longLivedOperationIDs(owner: "_bob", container: elsewhere.containerIdentifier, completedSince: at)
                    == ["op"])
            #expect(Set(try await storage.unfinishedLongLivedOperations().map(\.key)) == [key, bobs])
        }
    }

    @Test func unknownOperations() async throws {
        try await withJournalStore { storage, engine in
            let unknown = LongLivedOperationKey(owner: "_alice", operationID: "nobody")
            let notRunning = StoreError(.unknownOperation, "operation nobody is not running")
            await #expect(throws: notRunning, "\(engine)") {
                _ = try await storage.appendLongLivedEvents([event("a")], to: unknown, checkpoint: nil)
            }
            await #expect(throws: notRunning, "\(engine)") {
                _ = try await storage.appendLongLivedEvents([], to: unknown, checkpoint: [1])
            }
            await #expect(throws: notRunning, "\(engine)") {
                _ = try await storage.completeLongLivedOperation(unknown, complete: Wire.Complete(), at: at)
            }
            #expect(try await storage.longLivedOperation(unknown) == nil)
            #expect(try await storage.longLivedEvents(unknown, after: 0, limit: 10).isEmpty)
            #expect(try await storage.acknowledgeLongLivedOperation(unknown) == false)
            try await storage.removeLongLivedOperation(unknown)
            #expect(try await storage.pruneLongLivedOperations(completedBefore: Wire.Timestamp(seconds: 9_999)) == 0)
            #expect(try await storage.unfinishedLongLivedOperations().isEmpty)
        }
    }

    @Test func operationsListOldestFirstAndACheckpointAloneKeepsTheSeq() async throws {
        try await withJournalStore { storage, engine in
            let names = ["c", "a", "b"]
            for (offset, name) in names.enumerated() {
                let key = LongLivedOperationKey(owner: "_alice", operationID: name)
                _ = try await storage.registerLongLivedOperation(key, open: open, at: Wire.Timestamp(seconds: 100 + Int64(offset)))
            }
            // Same creation date: by ID.
            let tied = LongLivedOperationKey(owner: "_alice", operationID: "0")
            _ = try await storage.registerLongLivedOperation(tied, open: open, at: Wire.Timestamp(seconds: 101))
            #expect(
                try await storage.longLivedOperationIDs(owner: "_alice", container: container, completedSince: at)
                    == ["c", "0", "a", "b"], "\(engine)")
            #expect(try await storage.unfinishedLongLivedOperations().map(\.key.operationID) == ["c", "0", "a", "b"], "\(engine)")

            let key = LongLivedOperationKey(owner: "_alice", operationID: "a")
            _ = try await storage.appendLongLivedEvents([event("1"), event("2")], to: key, checkpoint: [1])
            #expect(try await storage.appendLongLivedEvents([], to: key, checkpoint: [2]).isEmpty)
            let stored = try #require(try await storage.longLivedOperation(key))
            #expect(stored.lastSeq == 2, "\(engine): a checkpoint without events moves no seq")
            #expect(stored.checkpoint == [2])
            #expect(try await storage.appendLongLivedEvents([event("3")], to: key, checkpoint: nil).map(\.seq) == [3])
        }
    }

    @Test func concurrentAppendsGetGapFreeSeqs() async throws {
        try await withJournalStore { storage, engine in
            _ = try await storage.registerLongLivedOperation(key, open: open, at: at)
            let seqs = try await withThrowingTaskGroup(of: [UInt64].self) { group in
                for task in 0..<8 {
                    group.addTask {
                        var seqs: [UInt64] = []
                        for round in 0..<5 {
                            let appended = try await storage.appendLongLivedEvents(
                                [event("\(task)-\(round)-a"), event("\(task)-\(round)-b")], to: key, checkpoint: nil)
                            #expect(appended.count == 2 && appended[1].seq == appended[0].seq + 1, "one append's seqs follow")
                            seqs += appended.map(\.seq)
                        }
                        return seqs
                    }
                }
                return try await group.reduce(into: []) { $0 += $1 }
            }
            #expect(seqs.sorted() == Array(1...80), "\(engine)")
            let stored = try await storage.longLivedEvents(key, after: 0, limit: 100)
            #expect(stored.map(\.seq) == Array(1...80), "\(engine)")
            #expect(try await storage.longLivedOperation(key)?.lastSeq == 80)
        }
    }
}
