@testable import CirrusServer
import CirrusStore
import CirrusWire
import Foundation
import Testing

/// Long-lived operations of the shared database are followed again only while their caller
/// still reaches what they are about: `Resume` (and the journal it replays) and
/// `fetchLongLivedOperation(withID:)` answer a participant removed since, or one whose share
/// was deleted, exactly as for an operation that does not exist. Alice owns the zone; bob and
/// dave are read-write participants of her album's hierarchy share.
@Suite("Shared database: long-lived operations re-check access")
struct SharedLongLivedAccessTests {
    static let albums = Wire.RecordZoneID(zoneName: "Albums", ownerName: "_alice")
    static let alice = DatabaseKey.private(container: container, user: "_alice")

    static func record(_ name: String, parent: String? = nil, share: String? = nil) -> Wire.Record {
        var record = Wire.Record(recordID: Wire.RecordID(recordName: name, zoneID: albums), recordType: "Photo")
        record.parent = parent.map { Wire.Reference(recordID: Wire.RecordID(recordName: $0, zoneID: albums), action: .none) }
        record.share = share.map { Wire.Reference(recordID: Wire.RecordID(recordName: $0, zoneID: albums), action: .none) }
        return record
    }

    static func invite(_ user: String) -> Wire.ShareParticipant {
        Wire.ShareParticipant(
            userIdentity: Wire.UserIdentity(userRecordID: Wire.RecordID(recordName: user)), role: .privateUser,
            permission: .readWrite)
    }

    /// Alice's album (root of share `s1` with bob and dave, both accepted) and a photo in it.
    static func shareAlbum(_ storage: SQLiteStorage) async throws {
        for user in ["_alice", "_bob", "_dave"] { _ = try await storage.createUser(user, at: Wire.Timestamp(seconds: 1)) }
        _ = try await storage.modifyZones(saving: [Wire.RecordZone(zoneID: albums)], deleting: [], in: alice)
        let share = Wire.Record(
            recordID: Wire.RecordID(recordName: "s1", zoneID: albums), recordType: "cloudkit.share",
            shareFields: Wire.ShareFields(participants: [invite("_bob"), invite("_dave")]))
        let result = try await storage.modifyRecords(
            RecordModification(saving: [record("album", share: "s1"), share, record("photo", parent: "album")]),
            in: alice, by: "_alice")
        let saved = try #require(result.saves[1].value)
        let token = try #require(ShareURL.token(in: "https://h" + (saved.shareFields?.url ?? "")))
        for user in ["_bob", "_dave"] {
            #expect(try await storage.acceptShare(withToken: token, in: container, by: user) != nil)
        }
    }

    /// Alice saves share `s1` again without `user`.
    static func remove(_ user: String, _ storage: SQLiteStorage) async throws {
        let fetched = try await storage.fetchRecords([Wire.RecordID(recordName: "s1", zoneID: albums)], desiredKeys: nil, in: alice)
        guard case .success(var share)? = fetched.first?.result else {
            Issue.record("no share s1")
            return
        }
        share.shareFields?.participants.removeAll { $0.userIdentity?.userRecordID?.recordName == user }
        let result = try await storage.modifyRecords(RecordModification(saving: [share]), in: alice, by: "_alice")
        #expect(!result.hasFailures, "\(result)")
    }

    /// Runs `request` as a long-lived operation of `client` to its end (unacknowledged, so it
    /// stays resumable); what it delivered.
    static func run(
        _ request: Wire.Open.Request, _ operationID: String, scope: Wire.DatabaseScope = .shared, on client: TestClient,
        streamID: UInt64
    ) async throws -> Followed {
        try await client.openLongLived(request, operationID: operationID, streamID: streamID, scope: scope)
        let followed = try await follow(streamID, on: client)
        #expect(followed.persisted && followed.complete != nil)
        return followed
    }

    static func resume(_ operationID: String, on client: TestClient, streamID: UInt64) async throws -> Followed {
        try await client.resume(operationID, after: 0, streamID: streamID)
        return try await follow(streamID, on: client)
    }

    /// The next frame that is not a keepalive `Ping` (answered): three clients take turns, and
    /// on a loaded machine one waits long enough to be pinged.
    static func nextFrame(on client: TestClient) async throws -> Wire.Frame {
        while true {
            let frame = try await client.nextFrame()
            if frame.streamID == 0, case .ping(let ping) = frame.kind {
                try await client.send(Wire.Frame(streamID: 0, kind: .pong(Wire.Pong(nonce: ping.nonce))))
                continue
            }
            return frame
        }
    }

    /// What `streamID` delivers up to its `Complete` (the window is larger than any of these).
    static func follow(_ streamID: UInt64, on client: TestClient) async throws -> Followed {
        var followed = Followed()
        while true {
            let frame = try await nextFrame(on: client)
            #expect(frame.streamID == streamID, "\(frame)")
            switch frame.kind {
            case .persisted: followed.persisted = true
            case .event(let event): followed.events.append(event)
            case .complete(let complete):
                followed.complete = complete
                return followed
            default: Issue.record("unexpected \(frame)")
            }
        }
    }

    /// Runs a container method on `client` and returns its `Complete`.
    static func containerMethod(_ request: Wire.Open.Request, on client: TestClient, streamID: UInt64) async throws -> Wire.Complete? {
        let open = Wire.Open(operationID: UUID().uuidString, containerIdentifier: container, request: request)
        try await client.send(Wire.Frame(streamID: streamID, kind: .open(open)))
        guard case .complete(let complete) = try await nextFrame(on: client).kind else { return nil }
        return complete
    }

    /// A refusal as for an unknown operation: no `Persisted`, no event, `unknownOperation` with
    /// the message an operation that never existed gets.
    static func expectUnknown(
        _ followed: Followed, _ operationID: String, sourceLocation: SourceLocation = #_sourceLocation
    ) {
        #expect(!followed.persisted && followed.events.isEmpty, sourceLocation: sourceLocation)
        #expect(followed.complete?.error?.code == .unknownOperation, sourceLocation: sourceLocation)
        #expect(
            followed.complete?.error?.message == "no long-lived operation \(operationID)", sourceLocation: sourceLocation)
    }

    @Test func aRemovedParticipantCannotResumeReplayOrFetchTheirOperations() async throws {
        try await withLongLivedServer { harness in
            try await Self.shareAlbum(harness.storage)
            let alice = try await TestClient.connect(port: harness.port, user: "alice")
            let bob = try await TestClient.connect(port: harness.port, user: "bob")
            let dave = try await TestClient.connect(port: harness.port, user: "dave")
            for client in [alice, bob, dave] { _ = try await client.handshake() }
            let photo = Wire.RecordID(recordName: "photo", zoneID: Self.albums)

            // Each runs long-lived operations: bob a fetch and his database changes, dave a
            // fetch in the shared database, alice a fetch in her own.
            let fetch = Wire.Open.Request.fetchRecords(Wire.FetchRecordsRequest(recordIDs: [photo]))
            let bobsFetch = try await Self.run(fetch, "bob-fetch", on: bob, streamID: 1)
            #expect(bobsFetch.events.count == 1 && bobsFetch.complete?.error == nil, "\(bobsFetch)")
            let zonesChanged = try await Self.run(
                .fetchDatabaseChanges(Wire.FetchDatabaseChangesRequest()), "bob-zones", on: bob, streamID: 3)
            #expect(zonesChanged.events.count == 1, "\(zonesChanged)")
            _ = try await Self.run(fetch, "dave-fetch", on: dave, streamID: 1)
            let own = Wire.Open.Request.fetchRecords(
                Wire.FetchRecordsRequest(recordIDs: [Wire.RecordID(recordName: "photo", zoneID: Self.albums)]))
            _ = try await Self.run(own, "alice-fetch", scope: .private, on: alice, streamID: 1)

            // While he takes part, bob resumes and reads the journal again.
            let replayed = try await Self.resume("bob-fetch", on: bob, streamID: 5)
            #expect(replayed.persisted && replayed.events == bobsFetch.events)

            // Removed, he gets what an operation ID nobody used gets, for both operations and
            // for the container method that looks one up.
            try await Self.remove("_bob", harness.storage)
            Self.expectUnknown(try await Self.resume("bob-fetch", on: bob, streamID: 7), "bob-fetch")
            Self.expectUnknown(try await Self.resume("bob-zones", on: bob, streamID: 9), "bob-zones")
            Self.expectUnknown(try await Self.resume("never-started", on: bob, streamID: 11), "never-started")
            let lookup = try await Self.containerMethod(
                .fetchLongLivedOperation(Wire.FetchLongLivedOperationRequest(operationID: "bob-fetch")), on: bob, streamID: 13)
            let lookupOfNothing = try await Self.containerMethod(
                .fetchLongLivedOperation(Wire.FetchLongLivedOperationRequest(operationID: "never-started")), on: bob,
                streamID: 15)
            #expect(lookup?.error?.code == .unknownOperation && lookupOfNothing?.error?.code == .unknownOperation)

            // Dave, still a participant, and alice, the owner, resume theirs.
            #expect(try await Self.resume("dave-fetch", on: dave, streamID: 3).events.count == 1)
            #expect(try await Self.resume("alice-fetch", on: alice, streamID: 3).events.count == 1)

            // Once alice deletes the share, dave's is gone too; hers is not.
            let deletion = try await harness.storage.modifyRecords(
                RecordModification(deleting: [Wire.RecordID(recordName: "s1", zoneID: Self.albums)]), in: Self.alice,
                by: "_alice")
            #expect(!deletion.hasFailures)
            Self.expectUnknown(try await Self.resume("dave-fetch", on: dave, streamID: 5), "dave-fetch")
            #expect(try await Self.resume("alice-fetch", on: alice, streamID: 5).events.count == 1)
            for client in [alice, bob, dave] { await client.close() }
        }
    }
}
