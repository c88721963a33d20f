@testable import CirrusStore
import CirrusWire
import Foundation
import GRDB
import Testing

@testable import CirrusServer

/// A journal that leaves the event with seq `missing` out of every page it reads: a journal out
/// of order, as only a bug could make it.
private struct GappedJournal: OperationJournal {
    let base: SQLiteStorage
    let missing: UInt64

    func longLivedEncodedEvents(
        _ key: LongLivedOperationKey, after seq: UInt64, limit: Int
    ) async throws -> [Wire.EncodedEvent] {
        try await base.longLivedEncodedEvents(key, after: seq, limit: limit).filter { $0.seq != missing }
    }

    func registerLongLivedOperation(
        _ key: LongLivedOperationKey, open: Wire.Open, at date: Wire.Timestamp, lease: LongLivedLease?
    ) async throws -> LongLivedOperationRecord {
        try await base.registerLongLivedOperation(key, open: open, at: date, lease: lease)
    }

    func appendLongLivedEvents(
        _ payloads: [Wire.Event.Payload], to key: LongLivedOperationKey, checkpoint: [UInt8]?, by node: String?
    ) async throws -> [Wire.Event] {
        try await base.appendLongLivedEvents(payloads, to: key, checkpoint: checkpoint, by: node)
    }

    func modifyRecords(
        _ modification: RecordModification, in database: DatabaseKey, by user: String,
        journaling: ModificationJournaling
    ) async throws -> (result: RecordModificationResult, events: [Wire.Event]) {
        try await base.modifyRecords(modification, in: database, by: user, journaling: journaling)
    }

    func completeLongLivedOperation(
        _ key: LongLivedOperationKey, complete: Wire.Complete, at date: Wire.Timestamp, by node: String?
    ) async throws -> Wire.Complete {
        try await base.completeLongLivedOperation(key, complete: complete, at: date, by: node)
    }

    func takeOverLongLivedOperation(
        _ key: LongLivedOperationKey, lease: LongLivedLease, at now: Wire.Timestamp
    ) async throws -> LongLivedOperationRecord? {
        try await base.takeOverLongLivedOperation(key, lease: lease, at: now)
    }

    func renewLongLivedLeases(_ keys: [LongLivedOperationKey], lease: LongLivedLease) async throws -> Set<LongLivedOperationKey> {
        try await base.renewLongLivedLeases(keys, lease: lease)
    }

    func releaseLongLivedOperation(_ key: LongLivedOperationKey, node: String) async throws -> Bool {
        try await base.releaseLongLivedOperation(key, node: node)
    }

    func unheldLongLivedOperations(at now: Wire.Timestamp, limit: Int) async throws -> [LongLivedOperationKey] {
        try await base.unheldLongLivedOperations(at: now, limit: limit)
    }

    func longLivedOperationIDs(owner: String, container: String, completedSince cutoff: Wire.Timestamp) async throws
        -> [String]
    {
        try await base.longLivedOperationIDs(owner: owner, container: container, completedSince: cutoff)
    }

    func longLivedOperation(_ key: LongLivedOperationKey) async throws -> LongLivedOperationRecord? {
        try await base.longLivedOperation(key)
    }

    func acknowledgeLongLivedOperation(_ key: LongLivedOperationKey) async throws -> Bool {
        try await base.acknowledgeLongLivedOperation(key)
    }

    func removeLongLivedOperation(_ key: LongLivedOperationKey) async throws {
        try await base.removeLongLivedOperation(key)
    }

    func pruneLongLivedOperations(completedBefore cutoff: Wire.Timestamp) async throws -> Int {
        try await base.pruneLongLivedOperations(completedBefore: cutoff)
    }

    func unfinishedLongLivedOperations() async throws -> [LongLivedOperationRecord] {
        try await base.unfinishedLongLivedOperations()
    }

    func requestLongLivedCancellation(_ key: LongLivedOperationKey) async throws -> Bool {
        try await base.requestLongLivedCancellation(key)
    }

    func longLivedCancellationsRequested(among keys: [LongLivedOperationKey]) async throws -> Set<LongLivedOperationKey> {
        try await base.longLivedCancellationsRequested(among: keys)
    }

    func observeLongLivedOperations(_ observer: @escaping @Sendable (LongLivedOperationSignal) -> Void) {
        base.observeLongLivedOperations(observer)
    }
}

/// Replays read from the journal, whose events go out as stored: what a bad journal does to the
/// stream that replays it.
@Suite("Long-lived replay from the journal")
struct LongLivedReplayTests {
    static let zones = (0..<5).map { Wire.RecordZone(zoneID: Wire.RecordZoneID(zoneName: "z\($0)", ownerName: "__defaultOwner__")) }

    /// Runs a long-lived save of five zones to its end in a server on `directory`, so that a
    /// later server replays its five events from the journal.
    private func journalFiveEvents(in directory: String) async throws {
        try await withLongLivedServer(directory: directory) { harness in
            let alice = try await TestClient.connect(port: harness.port)
            _ = try await alice.handshake()
            try await alice.openLongLived(
                .modifyRecordZones(Wire.ModifyRecordZonesRequest(recordZonesToSave: Self.zones)), operationID: "zones",
                streamID: 1)
            let followed = try await alice.follow(streamID: 1)
            #expect(followed.events.map(\.seq) == [1, 2, 3, 4, 5])
            #expect(followed.complete?.error == nil)
            await alice.close()
        }
    }

    @Test func aReplayMatchesTheLiveRunByteForByte() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cirrus-replay-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try await journalFiveEvents(in: directory)
        try await withLongLivedServer(directory: directory) { harness in
            let stored = try await harness.storage.longLivedEvents(
                LongLivedOperationKey(owner: "_alice", operationID: "zones"), after: 0, limit: 10)
            let alice = try await TestClient.connect(port: harness.port)
            _ = try await alice.handshake()
            try await alice.resume("zones", after: 0, streamID: 1)
            let replayed = try await alice.follow(streamID: 1)
            #expect(replayed.persisted)
            #expect(replayed.events == stored)
            #expect(replayed.complete?.error == nil)
        }
    }

    @Test func aCorruptJournaledEventEndsTheReplayWithAnInternalError() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cirrus-replay-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try await journalFiveEvents(in: directory)
        try await withLongLivedServer(directory: directory) { harness in
            try await harness.storage.pool.write { db in
                try db.execute(sql: "UPDATE long_lived_events SET event = X'0801' WHERE seq = 3")
            }
            let alice = try await TestClient.connect(port: harness.port)
            _ = try await alice.handshake()
            try await alice.resume("zones", after: 0, streamID: 1)
            let replayed = try await alice.follow(streamID: 1)
            // The page holding the bad row is refused whole: nothing of it goes out.
            #expect(replayed.events.isEmpty)
            #expect(replayed.complete?.error?.code == .internalError)
            // The connection goes on.
            try await alice.send(Wire.Frame(streamID: 0, kind: .ping(Wire.Ping(nonce: 9))))
            #expect(try await alice.nextFrame().kind == .pong(Wire.Pong(nonce: 9)))
        }
    }

    @Test func aJournalWithAGapEndsTheReplayBeforeTheGap() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cirrus-replay-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try await journalFiveEvents(in: directory)
        try await withLongLivedServer(directory: directory, journal: { GappedJournal(base: $0, missing: 3) }) { harness in
            let alice = try await TestClient.connect(port: harness.port)
            _ = try await alice.handshake()
            try await alice.resume("zones", after: 0, streamID: 1)
            let replayed = try await alice.follow(streamID: 1)
            // Events 1 and 2, then the stream ends: the client never sees a gap or a repeat.
            #expect(replayed.events.map(\.seq) == [1, 2])
            #expect(replayed.complete?.error?.code == .internalError)
            #expect(replayed.complete?.lastSeq == 2)
        }
    }
}
