import CirrusWire
import Foundation
import Testing

@testable import CirrusStore

private func event(_ name: String) -> Wire.Event.Payload {
    .fetchRecords(Wire.FetchRecordsEvent(callback: .perRecordResult(Wire.RecordOutcome(recordID: recordID(name)))))
}

private func time(_ seconds: Int64, _ nanos: Int32 = 0) -> Wire.Timestamp {
    Wire.Timestamp(seconds: seconds, nanos: nanos)
}

/// The leases of running long-lived operations, on every engine: who holds an operation, who
/// may take it over, and the fencing of appends and completions by a node that lost it.
@Suite("The long-lived operation journal: leases")
struct OperationJournalLeaseTests {
    let key = LongLivedOperationKey(owner: "_alice", operationID: "op")
    let open = Wire.Open(operationID: "op", databaseScope: .private, containerIdentifier: container)

    @Test func aLeaseIsStoredAndReadBack() async throws {
        try await withJournalStore { storage, engine in
            let lease = LongLivedLease(node: "a", expiry: time(1_010, 7))
            let record = try await storage.registerLongLivedOperation(key, open: open, at: time(1_000), lease: lease)
            #expect(record.lease == lease)
            #expect(try await storage.longLivedOperation(key)?.lease == lease, "\(engine)")
            #expect(try await storage.unfinishedLongLivedOperations().map(\.lease) == [lease], "\(engine)")
            let unleased = LongLivedOperationKey(owner: "_alice", operationID: "unleased")
            _ = try await storage.registerLongLivedOperation(unleased, open: open, at: time(1_000))
            #expect(try await storage.longLivedOperation(unleased)?.lease == nil, "\(engine)")
        }
    }

    @Test func aNodeThatLostItsLeaseCannotAppendOrComplete() async throws {
        try await withJournalStore { storage, engine in
            _ = try await storage.registerLongLivedOperation(
                key, open: open, at: time(1_000), lease: LongLivedLease(node: "a", expiry: time(1_010)))
            #expect(try await storage.appendLongLivedEvents([event("1")], to: key, checkpoint: [1], by: "a").map(\.seq) == [1])
            let lostByB = StoreError(.leaseLost, "operation op is no longer held by node b")
            await #expect(throws: lostByB, "\(engine)") {
                _ = try await storage.appendLongLivedEvents([event("x")], to: key, checkpoint: nil, by: "b")
            }
            await #expect(throws: lostByB, "\(engine)") {
                _ = try await storage.completeLongLivedOperation(key, complete: Wire.Complete(), at: time(1_001), by: "b")
            }
            // While a's lease holds, b cannot take the operation over; a still can (a restart).
            #expect(
                try await storage.takeOverLongLivedOperation(key, lease: LongLivedLease(node: "b", expiry: time(1_020)), at: time(1_010))
                    == nil, "\(engine)")
            #expect(try await storage.longLivedOperation(key)?.lease?.node == "a")

            // Once it expired b takes it over, as a left it: its last seq and checkpoint.
            let bLease = LongLivedLease(node: "b", expiry: time(1_030))
            let taken = try #require(try await storage.takeOverLongLivedOperation(key, lease: bLease, at: time(1_010, 1)))
            #expect(taken.lastSeq == 1 && taken.checkpoint == [1] && taken.lease == bLease, "\(engine)")
            #expect(try await storage.longLivedOperation(key)?.lease == bLease)

            // a, back from a pause, is fenced: no event, no completion, no record of a modify.
            let lostByA = StoreError(.leaseLost, "operation op is no longer held by node a")
            await #expect(throws: lostByA, "\(engine)") {
                _ = try await storage.appendLongLivedEvents([event("late")], to: key, checkpoint: [9], by: "a")
            }
            let journaling = ModificationJournaling(
                operation: key, events: { _ in [event("saved")] }, checkpoint: { _ in [9] }, node: "a")
            await #expect(throws: lostByA, "\(engine)") {
                _ = try await storage.modifyRecords(
                    RecordModification(saving: [Wire.Record(recordID: recordID("fenced"), recordType: "Note")]),
                    in: alice, by: "_alice", journaling: journaling)
            }
            let fetched = try await storage.fetchRecords([recordID("fenced")], desiredKeys: nil, in: alice)
            #expect(fetched.first?.failure?.code == .unknownItem, "\(engine): the fenced modify wrote nothing")
            await #expect(throws: lostByA, "\(engine)") {
                _ = try await storage.completeLongLivedOperation(key, complete: Wire.Complete(), at: time(1_011), by: "a")
            }
            #expect(try await storage.longLivedOperation(key)?.checkpoint == [1])

            // b continues right after a's last event, and completes it.
            #expect(try await storage.appendLongLivedEvents([event("2")], to: key, checkpoint: [2], by: "b").map(\.seq) == [2])
            let complete = try await storage.completeLongLivedOperation(key, complete: Wire.Complete(), at: time(1_012), by: "b")
            #expect(complete.lastSeq == 2)
            #expect(try await storage.longLivedEvents(key, after: 0, limit: 10).compactMap(\.payload) == [event("1"), event("2")])
        }
    }

    @Test func ofNodesTakingAnOperationOverAtOnceExactlyOneWins() async throws {
        try await withJournalStore { storage, engine in
            _ = try await storage.registerLongLivedOperation(
                key, open: open, at: time(1_000), lease: LongLivedLease(node: "dead", expiry: time(1_005)))
            _ = try await storage.appendLongLivedEvents([event("1"), event("2")], to: key, checkpoint: [2], by: "dead")
            let winners = try await withThrowingTaskGroup(of: LongLivedOperationRecord?.self) { group in
                for node in 0..<8 {
                    group.addTask {
                        try await storage.takeOverLongLivedOperation(
                            key, lease: LongLivedLease(node: "n\(node)", expiry: time(1_020)), at: time(1_006))
                    }
                }
                return try await group.reduce(into: [LongLivedOperationRecord]()) { winners, record in
                    if let record { winners.append(record) }
                }
            }
            #expect(winners.count == 1, "\(engine): \(winners.map { $0.lease?.node ?? "-" })")
            let winner = try #require(winners.first?.lease?.node)
            #expect(winners.first?.lastSeq == 2 && winners.first?.checkpoint == [2])
            #expect(try await storage.longLivedOperation(key)?.lease?.node == winner, "\(engine)")
            #expect(try await storage.appendLongLivedEvents([event("3")], to: key, checkpoint: nil, by: winner).map(\.seq) == [3])
        }
    }

    @Test func theHeartbeatRenewsOnlyWhatTheNodeHolds() async throws {
        try await withJournalStore { storage, engine in
            let keys = ["x", "y", "z"].map { LongLivedOperationKey(owner: "_alice", operationID: $0) }
            for key in keys {
                _ = try await storage.registerLongLivedOperation(
                    key, open: open, at: time(1_000), lease: LongLivedLease(node: "a", expiry: time(1_010)))
            }
            // Another node took y over; z completed (a renews what it completed until it lets go).
            _ = try await storage.takeOverLongLivedOperation(
                keys[1], lease: LongLivedLease(node: "b", expiry: time(1_030)), at: time(1_011))
            _ = try await storage.completeLongLivedOperation(keys[2], complete: Wire.Complete(), at: time(1_011), by: "a")
            let gone = LongLivedOperationKey(owner: "_alice", operationID: "gone")
            let renewed = try await storage.renewLongLivedLeases(
                keys + [gone], lease: LongLivedLease(node: "a", expiry: time(1_020, 3)))
            #expect(renewed == [keys[0], keys[2]], "\(engine)")
            #expect(try await storage.longLivedOperation(keys[0])?.lease == LongLivedLease(node: "a", expiry: time(1_020, 3)))
            #expect(try await storage.longLivedOperation(keys[1])?.lease == LongLivedLease(node: "b", expiry: time(1_030)))
            #expect(try await storage.renewLongLivedLeases([], lease: LongLivedLease(node: "a", expiry: time(1_040))).isEmpty)
        }
    }

    @Test func whatNoNodeHoldsIsListedAndMayBeTakenOver() async throws {
        try await withJournalStore { storage, engine in
            func register(_ id: String, _ lease: LongLivedLease?, at seconds: Int64) async throws -> LongLivedOperationKey {
                let key = LongLivedOperationKey(owner: "_alice", operationID: id)
                _ = try await storage.registerLongLivedOperation(key, open: open, at: time(seconds), lease: lease)
                return key
            }
            let held = try await register("held", LongLivedLease(node: "a", expiry: time(1_100)), at: 1_000)
            let expired = try await register("expired", LongLivedLease(node: "a", expiry: time(1_049)), at: 1_001)
            let unleased = try await register("unleased", nil, at: 1_002)
            let released = try await register("released", LongLivedLease(node: "a", expiry: time(1_100)), at: 1_003)
            let completed = try await register("completed", nil, at: 1_004)
            let atExpiry = try await register("at-expiry", LongLivedLease(node: "a", expiry: time(1_050)), at: 1_005)
            _ = try await storage.completeLongLivedOperation(completed, complete: Wire.Complete(), at: time(1_010))
            #expect(try await storage.releaseLongLivedOperation(released, node: "b") == false, "\(engine): b holds none")
            #expect(try await storage.releaseLongLivedOperation(released, node: "a"))
            #expect(try await storage.longLivedOperation(released)?.lease == nil)

            // A lease holds through its expiry instant.
            let now = time(1_050)
            #expect(try await storage.unheldLongLivedOperations(at: now, limit: 10) == [expired, unleased, released], "\(engine)")
            #expect(try await storage.unheldLongLivedOperations(at: now, limit: 2) == [expired, unleased])
            #expect(try await storage.unheldLongLivedOperations(at: now, limit: 0) == [])
            let lease = LongLivedLease(node: "b", expiry: time(1_060))
            for key in [expired, unleased, released] {
                #expect(try await storage.takeOverLongLivedOperation(key, lease: lease, at: now)?.lease == lease, "\(engine)")
            }
            #expect(try await storage.takeOverLongLivedOperation(held, lease: lease, at: now) == nil)
            #expect(try await storage.takeOverLongLivedOperation(atExpiry, lease: lease, at: now) == nil)
            #expect(try await storage.unheldLongLivedOperations(at: now, limit: 10) == [], "\(engine)")

            let notRunning = StoreError(.unknownOperation, "operation completed is not running")
            await #expect(throws: notRunning, "\(engine)") {
                _ = try await storage.takeOverLongLivedOperation(completed, lease: lease, at: now)
            }
            let unknown = LongLivedOperationKey(owner: "_alice", operationID: "nobody")
            await #expect(throws: StoreError(.unknownOperation, "operation nobody is not running"), "\(engine)") {
                _ = try await storage.takeOverLongLivedOperation(unknown, lease: lease, at: now)
            }
        }
    }
}
