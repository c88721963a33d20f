@testable import CirrusServer
import CirrusPostgres
import CirrusStore
import CirrusTestSupport
import CirrusWire
import Foundation
import Testing

private let key = LongLivedOperationKey(owner: "_alice", operationID: "moving")
private let records = (0..<200).map { note("m\($0)", title: "moved \($0)", zone: alicesZone) }

/// Every record of `records` is stored once, as the journal reports it: each saved once (a
/// second save would have been a conflict), with the change tag its event carries.
private func expectStoredOnce(_ events: [Wire.Event], in storage: PostgresStorage) async throws {
    let saved = events.compactMap(savedRecordOf)
    #expect(saved.count == events.count, "every event is a successful save")
    #expect(saved.map { $0.recordID?.recordName } == records.map { $0.recordID?.recordName }, "each record once, in order")
    let tags = Dictionary(saved.map { ($0.recordID?.recordName ?? "", $0.recordChangeTag) }, uniquingKeysWith: { a, _ in a })
    let fetched = try await storage.fetchRecords(records.compactMap(\.recordID), desiredKeys: nil, in: alicesDatabase)
    #expect(fetched.count == records.count)
    for outcome in fetched {
        guard let record = outcome.value else {
            Issue.record("\(outcome.id.recordName) is not stored")
            continue
        }
        #expect(tags[outcome.id.recordName] == record.recordChangeTag, "\(outcome.id.recordName) is stored as journaled")
    }
}

/// Long-lived operations across nodes sharing one PostgreSQL database: leases, takeover,
/// fencing, and `Resume` on a node that does not run the operation.
@Suite("Long-lived operations across nodes")
struct LongLivedLeaseTests {
    /// Node a dies in the middle of a long-lived save (its tasks stop, its leases stay as a
    /// SIGKILL leaves them); node b takes the save over once a's lease expired and continues it
    /// after its last journaled event: every event once, in order, every record once.
    @Test func anOperationOfADeadNodeContinuesOnAnother() async throws {
        let gate = Gate()
        try await withTwoNodes(
            a: (Node.leasing("a"), ChunkedSaveExecutor(gate: gate, pauseAt: 50)), b: (Node.leasing("b"), ChunkedSaveExecutor())
        ) { a, b in
            let before = try await a.serving { port in
                let client = try await TestClient.connect(port: port)
                _ = try await client.handshake()
                try await client.openLongLived(
                    .modifyRecords(Wire.ModifyRecordsRequest(recordsToSave: records)), operationID: key.operationID,
                    streamID: 1, window: 1_000)
                let before = try await client.follow(streamID: 1, window: 1_000, stopAfter: 50)
                try await eventually("a to hold the save after 50 records") { gate.waiting == 1 }
                // Death: nothing more of a's, and no release of its lease, which then runs out.
                await a.registry.shutdown(releasingLeases: false)
                // Read before the lease runs out: from then on b's sweep may take the save over
                // and journal more at any moment (on a loaded machine, before this closure ends).
                #expect(try await a.storage.longLivedOperation(key)?.lastSeq == 50)
                try a.expireLeases()
                await client.close()
                return before
            }
            #expect(before.persisted)

            try await eventually("b to take the save over and finish it") {
                try await b.storage.longLivedOperation(key)?.isCompleted == true
            }
            let record = try #require(try await b.storage.longLivedOperation(key))
            #expect(record.lease?.node == "b")
            #expect(record.complete?.error == nil, "\(String(describing: record.complete))")
            #expect(record.complete?.lastSeq == 200)
            let events = try await b.storage.longLivedEvents(key, after: 0, limit: 1_000)
            expectContiguous(events)
            #expect(events.count == 200)
            #expect(Array(events.prefix(50)) == before.events, "a's events stay as a journaled them")
            try await expectStoredOnce(events, in: b.storage)
        }
    }

    /// A client resumes on node b an operation node a runs: b sends the journal after the
    /// client's seq, then the events a appends as they come, then the `Complete`. A second
    /// stream on b is refused while the first follows.
    @Test func aResumeOnANodeThatDoesNotRunTheOperationFollowsTheJournal() async throws {
        let gate = Gate()
        // No takeover here: no lease runs out.
        try await withTwoNodes(
            a: (Node.leasing("a"), ChunkedSaveExecutor(gate: gate, pauseAt: 50)),
            b: (Node.leasing("b"), ChunkedSaveExecutor())
        ) { a, b in
            try await a.serving { portA in
                try await b.serving { portB in
                    let opener = try await TestClient.connect(port: portA)
                    _ = try await opener.handshake()
                    try await opener.openLongLived(
                        .modifyRecords(Wire.ModifyRecordsRequest(recordsToSave: records)), operationID: key.operationID,
                        streamID: 1, window: 1_000)
                    let opened = try await opener.follow(streamID: 1, window: 1_000, stopAfter: 50)
                    #expect(opened.persisted)
                    try await eventually("a to hold the save after 50 records") { gate.waiting == 1 }
                    await opener.close()

                    let follower = try await TestClient.connect(port: portB)
                    _ = try await follower.handshake()
                    try await follower.resume(key.operationID, after: 20, streamID: 1, window: 1_000)
                    let replayed = try await follower.follow(streamID: 1, window: 1_000, stopAfter: 30)
                    #expect(replayed.persisted)
                    expectContiguous(replayed.events, from: 21)

                    // One stream per node follows it.
                    let second = try await TestClient.connect(port: portB)
                    _ = try await second.handshake()
                    try await second.resume(key.operationID, after: 0, streamID: 1, window: 1_000)
                    let refused = try await second.follow(streamID: 1, window: 1_000)
                    #expect(refused.complete?.error?.code == .operationAlreadyAttached, "\(refused)")
                    await second.close()

                    gate.open()
                    let live = try await follower.follow(streamID: 1, window: 1_000)
                    let events = replayed.events + live.events
                    expectContiguous(events, from: 21)
                    #expect(events.count == 180)
                    #expect(live.complete?.error == nil, "\(String(describing: live.complete))")
                    #expect(live.complete?.lastSeq == 200)
                    await follower.close()
                }
            }
            let record = try #require(try await a.storage.longLivedOperation(key))
            #expect(record.lease?.node == "a", "a ran it throughout")
            try await expectStoredOnce(try await a.storage.longLivedEvents(key, after: 0, limit: 1_000), in: b.storage)
        }
    }

    /// Node a stops renewing its lease while it holds the save at a gate (a process paused
    /// past its lease); b takes the save over and holds it at a gate of its own. When a wakes
    /// up, its next journaled modify is refused in its own transaction: it adds no event and
    /// writes no record (it would save records b saved again), and its run stops without
    /// completing. b finishes the save, and the stream following it on a reads the rest of the
    /// journal, b's `Complete` included.
    @Test func aNodePausedPastItsLeaseIsFenced() async throws {
        let gateA = Gate()
        let gateB = Gate()
        // a's heartbeats renew its lease until its run is at the gate, then a is paused: they
        // renew nothing, nor does it sweep, and its lease runs out.
        let pauseA = HeartbeatPause()
        try await withTwoNodes(
            a: (Node.leasing("a", sweep: .seconds(3_600)), ChunkedSaveExecutor(gate: gateA, pauseAt: 50)),
            b: (Node.leasing("b"), ChunkedSaveExecutor(gate: gateB, pauseAt: 100)),
            pausing: pauseA
        ) { a, b in
            try await a.serving { port in
                let client = try await TestClient.connect(port: port)
                _ = try await client.handshake()
                try await client.openLongLived(
                    .modifyRecords(Wire.ModifyRecordsRequest(recordsToSave: records)), operationID: key.operationID,
                    streamID: 1, window: 1_000)
                let before = try await client.follow(streamID: 1, window: 1_000, stopAfter: 50)
                try await eventually("a to hold the save after 50 records") { gateA.waiting == 1 }
                try await pauseA.pause()
                try a.expireLeases()
                try await eventually("b to take the save over and hold it after 100 records") { gateB.waiting == 1 }
                #expect(try await b.storage.longLivedOperation(key)?.lease?.node == "b")

                gateA.open()
                try await eventually("a's run to stop") { a.registry.runningCount == 0 }
                let held = try #require(try await b.storage.longLivedOperation(key))
                #expect(held.lastSeq == 100, "nothing of a's after b took over")
                #expect(held.checkpoint == LongLivedCheckpoint(items: 100).encoded())

                gateB.open()
                let after = try await client.follow(streamID: 1, window: 1_000)
                let events = before.events + after.events
                expectContiguous(events)
                #expect(events == (try await b.storage.longLivedEvents(key, after: 0, limit: 1_000)), "a's follower hears the journal")
                #expect(after.complete?.error == nil, "\(String(describing: after.complete))")
                #expect(after.complete?.lastSeq == 200)
                await client.close()
            }
            let record = try #require(try await b.storage.longLivedOperation(key))
            #expect(record.lease?.node == "b")
            let events = try await b.storage.longLivedEvents(key, after: 0, limit: 1_000)
            #expect(events.count == 200)
            try await expectStoredOnce(events, in: b.storage)
        }
    }
}
