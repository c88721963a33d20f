@testable import CirrusStore
import CirrusWire
import Foundation
import GRDB
import Testing

@testable import CirrusServer

/// A journal that leaves the event with seq `missing` out of every page it reads: a journal out
/// of order, as only a bug could make it.
private struct GappedJournal: ForwardingJournal {
    let base: SQLiteStorage
    let missing: UInt64

    func longLivedEncodedEvents(
        _ key: LongLivedOperationKey, after seq: UInt64, limit: Int
    ) async throws -> [Wire.EncodedEvent] {
        try await base.longLivedEncodedEvents(key, after: seq, limit: limit).filter { $0.seq != missing }
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
