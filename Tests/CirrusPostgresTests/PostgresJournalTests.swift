import CirrusStore
import CirrusTestSupport
import CirrusWire
import PostgresNIO
import Testing

@testable import CirrusPostgres

/// The long-lived operation journal on PostgreSQL as several nodes see it, and the
/// all-or-nothing commit of a journaled modify (the behaviour both engines share is in
/// CirrusStoreTests' `OperationJournalTests`).
@Suite("PostgreSQL long-lived operation journal")
struct PostgresJournalTests {
    let key = LongLivedOperationKey(owner: "_alice", operationID: "op")
    let open = Wire.Open(operationID: "op", databaseScope: .private, containerIdentifier: container)
    let at = Wire.Timestamp(seconds: 1_000, nanos: 5)

    private func event(_ name: String) -> Wire.Event.Payload {
        let id = Wire.RecordID(recordName: name, zoneID: zoneID("_defaultZone"))
        return .fetchRecords(Wire.FetchRecordsEvent(callback: .perRecordResult(Wire.RecordOutcome(recordID: id))))
    }

    private func note(_ name: String) -> Wire.Record {
        Wire.Record(recordID: Wire.RecordID(recordName: name, zoneID: zoneID("_defaultZone")), recordType: "Note")
    }

    /// One event per saved record, and the count of saves as the checkpoint.
    private func journaling(_ key: LongLivedOperationKey) -> ModificationJournaling {
        ModificationJournaling(
            operation: key,
            events: { result in
                result.saves.map { save in
                    let event = Wire.ModifyRecordsPerRecordSave(recordID: save.id, outcome: save.value.map { .record($0) })
                    return .modifyRecords(Wire.ModifyRecordsEvent(callback: .perRecordSave(event)))
                }
            },
            checkpoint: { result in [UInt8(result.saves.count)] })
    }

    /// Runs `body` with two storages open on one new database (two `cirrusd` nodes).
    private func withTwoNodes(_ body: (PostgresStorage, PostgresStorage) async throws -> Void) async throws {
        let url = try newDatabase()
        try await withPostgresStore(url) { first in
            try await withPostgresStore(url) { second in try await body(first, second) }
        }
    }

    @Test func anOperationJournaledThroughOneNodeIsReadAndContinuedThroughAnother() async throws {
        try await withTwoNodes { node1, node2 in
            _ = try await node1.registerLongLivedOperation(key, open: open, at: at)
            await #expect(throws: StoreError(.duplicateOperation, "operation op is already registered")) {
                _ = try await node2.registerLongLivedOperation(key, open: open, at: at)
            }
            let appended = try await node1.appendLongLivedEvents([event("a"), event("b")], to: key, checkpoint: [1])
            let (result, modified) = try await node1.modifyRecords(
                RecordModification(saving: [note("n0"), note("n1")]), in: alice, by: "_alice", journaling: journaling(key))
            #expect(!result.hasFailures)
            #expect((appended + modified).map(\.seq) == [1, 2, 3, 4])

            let unfinished = try await node2.unfinishedLongLivedOperations()
            #expect(unfinished.map(\.key) == [key])
            #expect(unfinished.first?.open == open)
            #expect(unfinished.first?.lastSeq == 4)
            #expect(unfinished.first?.checkpoint == [2])
            #expect(unfinished.first?.creationDate == at)
            #expect(try await node2.longLivedEvents(key, after: 0, limit: 100) == appended + modified)
            #expect(try await node2.longLivedEvents(key, after: 2, limit: 1) == [modified[0]])
            #expect(try await node2.longLivedOperationIDs(owner: "_alice", container: container, completedSince: at) == ["op"])

            // Both nodes append at once: the seqs go on from 4 without gap or repeat.
            try await withThrowingTaskGroup(of: Void.self) { group in
                for (index, node) in [node1, node2, node1, node2].enumerated() {
                    group.addTask {
                        for round in 0..<5 {
                            _ = try await node.appendLongLivedEvents([event("\(index)-\(round)")], to: key, checkpoint: nil)
                        }
                    }
                }
                try await group.waitForAll()
            }
            #expect(try await node1.longLivedEvents(key, after: 0, limit: 100).map(\.seq) == Array(1...24))

            let complete = try await node2.completeLongLivedOperation(key, complete: Wire.Complete(), at: at)
            #expect(complete.lastSeq == 24)
            #expect(try await node1.unfinishedLongLivedOperations().isEmpty)
            #expect(try await node1.longLivedOperation(key)?.complete == complete)
            #expect(try await node1.acknowledgeLongLivedOperation(key))
            #expect(try await node2.longLivedOperation(key) == nil)
            #expect(try await node2.longLivedEvents(key, after: 0, limit: 100).isEmpty)
        }
    }

    @Test func aJournaledModifyWhoseTransactionFailsLeavesNeitherRecordsNorEvents() async throws {
        try await withPostgresStore { storage in
            _ = try await storage.registerLongLivedOperation(key, open: open, at: at)
            // A check the server runs at COMMIT, after the records and the events were written.
            try await storage.connection { connection in
                try await connection.query(
                    PostgresQuery(
                        unsafeSQL: """
                            CREATE FUNCTION refuse_commit() RETURNS trigger LANGUAGE plpgsql
                            AS 'BEGIN RAISE EXCEPTION ''refused at commit''; END'
                            """), logger: storage.logger)
                try await connection.query(
                    """
                    CREATE CONSTRAINT TRIGGER refuse_events AFTER INSERT ON long_lived_events
                    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION refuse_commit()
                    """, logger: storage.logger)
            }
            await #expect(throws: StoreError.self) {
                _ = try await storage.modifyRecords(
                    RecordModification(saving: [note("n0"), note("n1")]), in: alice, by: "_alice", journaling: journaling(key))
            }
            let fetched = try await storage.fetchRecords(
                [note("n0").recordID, note("n1").recordID].compactMap { $0 }, desiredKeys: nil, in: alice)
            #expect(fetched.map { $0.failure?.code } == [.unknownItem, .unknownItem], "no record was kept")
            #expect(try await storage.longLivedEvents(key, after: 0, limit: 10).isEmpty, "no event was kept")
            let stored = try #require(try await storage.longLivedOperation(key))
            #expect(stored.lastSeq == 0 && stored.checkpoint == nil)
            #expect(try await storage.rowCount(of: "records") == 0)

            // Without the check the same modify commits both.
            try await storage.connection {
                _ = try await $0.query("DROP TRIGGER refuse_events ON long_lived_events", logger: storage.logger)
            }
            let (result, events) = try await storage.modifyRecords(
                RecordModification(saving: [note("n0"), note("n1")]), in: alice, by: "_alice", journaling: journaling(key))
            #expect(!result.hasFailures)
            #expect(events.map(\.seq) == [1, 2])
            #expect(try await storage.rowCount(of: "records") == 2)
            #expect(try await storage.longLivedEvents(key, after: 0, limit: 10) == events)
        }
    }

    @Test func aJournaledModifyOfAnOperationAnotherNodeCompletedWritesNothing() async throws {
        try await withTwoNodes { node1, node2 in
            _ = try await node1.registerLongLivedOperation(key, open: open, at: at)
            _ = try await node2.completeLongLivedOperation(key, complete: Wire.Complete(), at: at)
            await #expect(throws: StoreError(.unknownOperation, "operation op is not running")) {
                _ = try await node1.modifyRecords(
                    RecordModification(saving: [note("late")]), in: alice, by: "_alice", journaling: journaling(key))
            }
            let fetched = try await node1.fetchRecords([note("late").recordID].compactMap { $0 }, desiredKeys: nil, in: alice)
            #expect(fetched.first?.failure?.code == .unknownItem)
            #expect(try await node2.longLivedOperation(key)?.lastSeq == 0)
            #expect(try await node2.longLivedEvents(key, after: 0, limit: 10).isEmpty)
        }
    }
}
