@testable import CirrusServer
import CirrusPostgres
import CirrusStore
import CirrusTestSupport
import CirrusWire
import Foundation
import Testing

private let key = LongLivedOperationKey(owner: "_alice", operationID: "across")
private let records = (0..<200).map { note("x\($0)", title: "across \($0)", zone: alicesZone) }
private let save = Wire.Open.Request.modifyRecords(Wire.ModifyRecordsRequest(recordsToSave: records))

/// How many of `records` are stored.
private func storedCount(in storage: PostgresStorage) async throws -> Int {
    let fetched = try await storage.fetchRecords(records.compactMap(\.recordID), desiredKeys: nil, in: alicesDatabase)
    return fetched.count { $0.value != nil }
}

/// Opens the save on `port` as a long-lived operation and reads its first 50 events (the node's
/// executor then waits at its gate), then closes that client.
private func openAndLeave(port: Int) async throws -> [Wire.Event] {
    let opener = try await TestClient.connect(port: port)
    _ = try await opener.handshake()
    try await opener.openLongLived(save, operationID: key.operationID, streamID: 1, window: 1_000)
    let opened = try await opener.follow(streamID: 1, window: 1_000, stopAfter: 50)
    #expect(opened.persisted)
    await opener.close()
    return opened.events
}

/// A client that resumes the save on `port` after seq 40 and has read events 41 to 50.
private func resumeAfter40(port: Int) async throws -> TestClient {
    let client = try await TestClient.connect(port: port)
    _ = try await client.handshake()
    try await client.resume(key.operationID, after: 40, streamID: 1, window: 1_000)
    let replayed = try await client.follow(streamID: 1, window: 1_000, stopAfter: 10)
    #expect(replayed.persisted)
    expectContiguous(replayed.events, from: 41)
    return client
}

/// Sends a plain `Cancel` on stream 1 and expects the `Complete` that confirms it.
private func cancel(_ client: TestClient) async throws {
    try await client.cancel(streamID: 1)
    let confirmed = try await client.follow(streamID: 1, window: 1_000)
    #expect(confirmed.complete?.error?.code == .operationCancelled, "\(String(describing: confirmed.complete))")
    #expect(confirmed.events.isEmpty)
}

/// Long-lived operations across nodes sharing one PostgreSQL database: a `Cancel` on any node
/// reaches the operation wherever it runs (even once that node is gone), and a stream following
/// an operation another node runs hears its events through the journal's signals, with the
/// journal's poll (and the heartbeat, for cancellations) as the fallback when signals are lost.
@Suite("Long-lived operations across nodes: cancel and signals")
struct LongLivedAcrossNodesTests {
    /// Node a runs the save and holds it at its gate (50 events); a client resumed on node b
    /// cancels it. The cancel reaches a's run (which stops at the gate that never opens): the
    /// operation ends as a local cancel ends it — no longer listed, nothing more saved.
    @Test func aCancelOnAnotherNodeStopsTheOperationWhereItRuns() async throws {
        let gate = Gate()
        try await withTwoNodes(
            a: (Node.leasing("a"), ChunkedSaveExecutor(gate: gate, pauseAt: 50)),
            b: (Node.leasing("b"), ChunkedSaveExecutor())
        ) { a, b in
            try await a.serving { portA in
                try await b.serving { portB in
                    _ = try await openAndLeave(port: portA)
                    try await eventually("a to hold the save after 50 records") { gate.waiting == 1 }
                    let client = try await resumeAfter40(port: portB)
                    try await cancel(client)
                    try await eventually("the cancel to reach a's run and drop the operation") {
                        try await b.storage.longLivedOperation(key) == nil && a.registry.runningCount == 0
                    }
                    #expect(gate.waiting == 0, "a's run stopped at its gate")
                    #expect(b.registry.runningCount == 0, "b never ran it")
                    #expect(try await client.listLongLived(streamID: 3).isEmpty, "no longer listed")
                    await client.close()
                }
            }
            #expect(try await storedCount(in: a.storage) == 50, "nothing saved after the cancel")
        }
    }

    /// Node a dies holding the save (its lease stays, as after a SIGKILL); a client resumed on
    /// node b cancels it while no node runs it. The mark is kept in the journal: b, taking the
    /// operation over once a's lease expired, completes it as cancelled without running it.
    @Test func aCancelOutlivesTheNodeRunningTheOperation() async throws {
        let gate = Gate()
        try await withTwoNodes(
            a: (Node.leasing("a"), ChunkedSaveExecutor(gate: gate, pauseAt: 50)),
            b: (Node.leasing("b"), ChunkedSaveExecutor())
        ) { a, b in
            try await b.serving { portB in
                try await a.serving { portA in
                    _ = try await openAndLeave(port: portA)
                    try await eventually("a to hold the save after 50 records") { gate.waiting == 1 }
                    await a.registry.shutdown(releasingLeases: false)
                }
                #expect(try await b.storage.longLivedOperation(key)?.lease?.node == "a")
                let client = try await resumeAfter40(port: portB)
                try await cancel(client)
                // The confirming Complete goes out at once; the mark follows (then, once a's
                // lease ran out, the takeover).
                try await eventually("the cancel to be marked") {
                    try await b.storage.longLivedOperation(key).map(\.cancelRequested) ?? true
                }
                try a.expireLeases()
                try await eventually("b to take the cancelled operation over and drop it") {
                    try await b.storage.longLivedOperation(key) == nil && b.registry.runningCount == 0
                }
                await client.close()
            }
            #expect(try await storedCount(in: b.storage) == 50, "b completed it without running it")
        }
    }

    /// A cancel whose signal is lost (node a hears none) reaches a's run at its next heartbeat.
    @Test func aCancelWhoseSignalIsLostArrivesWithTheHeartbeat() async throws {
        let gate = Gate()
        try await withTwoNodes(
            a: (Node.leasing("a"), ChunkedSaveExecutor(gate: gate, pauseAt: 50)),
            b: (Node.leasing("b"), ChunkedSaveExecutor()),
            deaf: ["a"]
        ) { a, b in
            try await a.serving { portA in
                try await b.serving { portB in
                    _ = try await openAndLeave(port: portA)
                    try await eventually("a to hold the save after 50 records") { gate.waiting == 1 }
                    let client = try await resumeAfter40(port: portB)
                    try await cancel(client)
                    try await eventually("a's heartbeat to find the cancel and drop the operation") {
                        try await b.storage.longLivedOperation(key) == nil && a.registry.runningCount == 0
                    }
                    #expect(gate.waiting == 0)
                    await client.close()
                }
            }
            #expect(try await storedCount(in: a.storage) == 50)
        }
    }

    /// A stream on node b follows the save node a runs, with b's poll of the journal an hour
    /// apart: it has every event and the `Complete` only because a's appends signal b.
    @Test func aFollowerOnAnotherNodeWakesOnTheSignals() async throws {
        let gate = Gate()
        try await withTwoNodes(
            a: (Node.leasing("a"), ChunkedSaveExecutor(gate: gate, pauseAt: 50)),
            b: (Node.leasing("b", poll: .seconds(3_600)), ChunkedSaveExecutor())
        ) { a, b in
            try await a.serving { portA in
                try await b.serving { portB in
                    _ = try await openAndLeave(port: portA)
                    try await eventually("a to hold the save after 50 records") { gate.waiting == 1 }
                    let client = try await resumeAfter40(port: portB)
                    gate.open()
                    let live = try await client.follow(streamID: 1, window: 1_000)
                    expectContiguous(live.events, from: 51)
                    #expect(live.events.count == 150)
                    #expect(live.complete?.error == nil && live.complete?.lastSeq == 200, "\(String(describing: live.complete))")
                    await client.close()
                }
            }
            #expect(try await storedCount(in: a.storage) == 200)
        }
    }

    /// With every signal lost (node b hears none), the stream on b still has every event and
    /// the `Complete`, from its poll of the journal.
    @Test func aFollowerThatHearsNoSignalPollsTheJournal() async throws {
        let gate = Gate()
        try await withTwoNodes(
            a: (Node.leasing("a"), ChunkedSaveExecutor(gate: gate, pauseAt: 50)),
            b: (Node.leasing("b"), ChunkedSaveExecutor()),
            deaf: ["b"]
        ) { a, b in
            try await a.serving { portA in
                try await b.serving { portB in
                    _ = try await openAndLeave(port: portA)
                    try await eventually("a to hold the save after 50 records") { gate.waiting == 1 }
                    let client = try await resumeAfter40(port: portB)
                    gate.open()
                    let live = try await client.follow(streamID: 1, window: 1_000)
                    expectContiguous(live.events, from: 51)
                    #expect(live.events.count == 150)
                    #expect(live.complete?.error == nil && live.complete?.lastSeq == 200, "\(String(describing: live.complete))")
                    await client.close()
                }
            }
        }
    }

    /// Bad input stays refused on a node that does not run the operation: a `Resume` of an
    /// unknown ID, and of another user's operation (bob names alice's ID), get
    /// `UNKNOWN_OPERATION`; neither touches alice's operation, which a's run still holds.
    @Test func aResumeOfAnUnknownOrAnotherUsersOperationIsRefusedOnEveryNode() async throws {
        let gate = Gate()
        try await withTwoNodes(
            a: (Node.leasing("a"), ChunkedSaveExecutor(gate: gate, pauseAt: 50)),
            b: (Node.leasing("b"), ChunkedSaveExecutor())
        ) { a, b in
            try await a.serving { portA in
                try await b.serving { portB in
                    _ = try await openAndLeave(port: portA)
                    try await eventually("a to hold the save after 50 records") { gate.waiting == 1 }
                    for (user, operationID) in [("alice", "no-such-operation"), ("bob", key.operationID)] {
                        let client = try await TestClient.connect(port: portB, user: user)
                        _ = try await client.handshake()
                        try await client.resume(operationID, after: 0, streamID: 1)
                        let refused = try await client.follow(streamID: 1)
                        #expect(refused.complete?.error?.code == .unknownOperation, "\(user): \(refused)")
                        await client.close()
                    }
                    let record = try #require(try await b.storage.longLivedOperation(key))
                    #expect(!record.cancelRequested && !record.isCompleted)
                    #expect(a.registry.runningCount == 1 && gate.waiting == 1)
                    gate.open()
                    try await eventually("a to finish the save") { try await b.storage.longLivedOperation(key)?.isCompleted == true }
                }
            }
        }
    }
}
