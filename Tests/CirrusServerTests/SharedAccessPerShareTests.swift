@testable import CirrusServer
import CirrusStore
import CirrusWire
import Foundation
import Testing

/// Access is decided per share, not per zone, and from shares as the database has them, not
/// as one process last saw them. Alice's zone Albums holds two hierarchy shares: `s1` rooted
/// at `album` (with `photo` and `old` under it) and `s2` rooted at `trip` (with `pic`). Bob is
/// a read-write participant of both; dave of `s2` only.
@Suite("Shared database: access per share, across openers of one data directory")
struct SharedAccessPerShareTests {
    typealias Helpers = SharedLongLivedAccessTests
    static let albums = Helpers.albums
    static let alice = Helpers.alice

    static func id(_ name: String) -> Wire.RecordID {
        Wire.RecordID(recordName: name, zoneID: albums)
    }

    /// Alice's two shares, accepted by bob (both) and dave (`s2`).
    static func shareTwoAlbums(_ storage: SQLiteStorage) async throws {
        for user in ["_alice", "_bob", "_dave"] { _ = try await storage.createUser(user, at: Wire.Timestamp(seconds: 1)) }
        _ = try await storage.modifyZones(saving: [Wire.RecordZone(zoneID: albums)], deleting: [], in: alice)
        func share(_ name: String, _ users: [String]) -> Wire.Record {
            Wire.Record(
                recordID: id(name), recordType: "cloudkit.share",
                shareFields: Wire.ShareFields(participants: users.map(Helpers.invite)))
        }
        let result = try await storage.modifyRecords(
            RecordModification(saving: [
                Helpers.record("album", share: "s1"), share("s1", ["_bob"]), Helpers.record("photo", parent: "album"),
                Helpers.record("old", parent: "album"),
                Helpers.record("trip", share: "s2"), share("s2", ["_bob", "_dave"]), Helpers.record("pic", parent: "trip"),
            ]),
            in: alice, by: "_alice")
        #expect(!result.hasFailures, "\(result)")
        for (index, users) in [(1, ["_bob"]), (5, ["_bob", "_dave"])] {
            let saved = try #require(result.saves[index].value)
            let token = try #require(ShareURL.token(in: "https://h" + (saved.shareFields?.url ?? "")))
            for user in users { #expect(try await storage.acceptShare(withToken: token, in: container, by: user) != nil) }
        }
    }

    /// Alice saves share `shareName` again without `user`.
    static func remove(_ user: String, from shareName: String, _ storage: SQLiteStorage) async throws {
        let fetched = try await storage.fetchRecords([id(shareName)], desiredKeys: nil, in: alice)
        guard case .success(var share)? = fetched.first?.result else {
            Issue.record("no share \(shareName)")
            return
        }
        share.shareFields?.participants.removeAll { $0.userIdentity?.userRecordID?.recordName == user }
        let result = try await storage.modifyRecords(RecordModification(saving: [share]), in: alice, by: "_alice")
        #expect(!result.hasFailures, "\(result)")
    }

    static func fetch(_ names: String...) -> Wire.Open.Request {
        .fetchRecords(Wire.FetchRecordsRequest(recordIDs: names.map(id)))
    }

    /// The names of the records `followed` delivered (fetched, matched or saved).
    static func names(_ followed: Followed) -> [String] {
        followed.events.compactMap { event -> String? in
            switch event.payload {
            case .fetchRecords(let event):
                if case .perRecordResult(let outcome)? = event.callback, case .record(let record)? = outcome.outcome {
                    return record.recordID?.recordName
                }
            case .query(let event):
                if case .recordMatched(let outcome)? = event.callback, case .record(let record)? = outcome.outcome {
                    return record.recordID?.recordName
                }
            case .modifyRecords(let event):
                if case .perRecordSave(let save)? = event.callback, case .record(let record)? = save.outcome {
                    return record.recordID?.recordName
                }
            default:
                break
            }
            return nil
        }
    }

    @Test func removedFromOneShareOfAZoneTheOperationsAboutItAreUnknownAndTheOthersResume() async throws {
        try await withLongLivedServer { harness in
            try await Self.shareTwoAlbums(harness.storage)
            let bob = try await TestClient.connect(port: harness.port, user: "bob")
            _ = try await bob.handshake()

            // About s1: a fetch of its photo, the deletion of one of its records; about s2: a
            // fetch of its pic, a new record saved under its root; about both: a query.
            let fetchA = try await Helpers.run(Self.fetch("photo"), "fetch-a", on: bob, streamID: 1)
            #expect(Self.names(fetchA) == ["photo"])
            let deleteA = try await Helpers.run(
                .modifyRecords(Wire.ModifyRecordsRequest(recordIDsToDelete: [Self.id("old")])), "delete-a", on: bob,
                streamID: 3)
            #expect(deleteA.complete?.error == nil, "\(deleteA)")
            let fetchB = try await Helpers.run(Self.fetch("pic"), "fetch-b", on: bob, streamID: 5)
            #expect(Self.names(fetchB) == ["pic"])
            let saveB = try await Helpers.run(
                .modifyRecords(Wire.ModifyRecordsRequest(recordsToSave: [Helpers.record("new", parent: "trip")])), "save-b",
                on: bob, streamID: 7)
            #expect(Self.names(saveB) == ["new"], "\(saveB)")
            let query = Wire.QueryRequest(start: .query(Wire.Query(recordType: "Photo")), zoneID: Self.albums)
            let queryBoth = try await Helpers.run(.query(query), "query-both", on: bob, streamID: 9)
            #expect(Set(Self.names(queryBoth)) == ["album", "photo", "trip", "pic", "new"], "\(queryBoth)")

            try await Self.remove("_bob", from: "s1", harness.storage)

            // Bob still reaches the zone through s2, but what the operations about s1 revealed
            // is answered as an operation ID nobody used is.
            Helpers.expectUnknown(try await Helpers.resume("fetch-a", on: bob, streamID: 11), "fetch-a")
            Helpers.expectUnknown(try await Helpers.resume("delete-a", on: bob, streamID: 13), "delete-a")
            Helpers.expectUnknown(try await Helpers.resume("query-both", on: bob, streamID: 15), "query-both")
            Helpers.expectUnknown(try await Helpers.resume("never-started", on: bob, streamID: 17), "never-started")
            let lookup = try await Helpers.containerMethod(
                .fetchLongLivedOperation(Wire.FetchLongLivedOperationRequest(operationID: "fetch-a")), on: bob, streamID: 19)
            #expect(lookup?.error?.code == .unknownOperation)
            #expect(lookup?.error?.message == "no long-lived operation fetch-a")

            // Those about s2 resume with what they journaled.
            let resumedB = try await Helpers.resume("fetch-b", on: bob, streamID: 21)
            #expect(resumedB.persisted && resumedB.events == fetchB.events)
            #expect(try await Helpers.resume("save-b", on: bob, streamID: 23).events == saveB.events)
            let lookupB = try await Helpers.containerMethod(
                .fetchLongLivedOperation(Wire.FetchLongLivedOperationRequest(operationID: "fetch-b")), on: bob, streamID: 25)
            #expect(lookupB?.error == nil)
            await bob.close()
        }
    }

    @Test func aParticipantRemovedByAnotherOpenerOfTheDataDirectoryLosesAccessAtOnce() async throws {
        try await withLongLivedServer { harness in
            try await Self.shareTwoAlbums(harness.storage)
            let dave = try await TestClient.connect(port: harness.port, user: "dave")
            _ = try await dave.handshake()
            // Dave's access is compiled and kept by the server's executor...
            let before = try await Helpers.run(Self.fetch("pic"), "dave-1", on: dave, streamID: 1)
            #expect(Self.names(before) == ["pic"])
            #expect(Self.names(try await Helpers.run(Self.fetch("pic"), "dave-2", on: dave, streamID: 3)) == ["pic"])

            // ...then a second store on the same file (another process, `cirrusd` maintenance)
            // takes him out of s2, his only share.
            let second = try SQLiteStorage(directory: harness.storage.directory)
            try await Self.remove("_dave", from: "s2", second)
            try second.close()

            let after = try await Helpers.run(Self.fetch("pic"), "dave-3", on: dave, streamID: 5)
            #expect(Self.names(after).isEmpty)
            guard case .fetchRecords(let event)? = after.events.first?.payload,
                case .perRecordResult(let outcome)? = event.callback, case .error(let error)? = outcome.outcome
            else {
                Issue.record("no per-record error: \(after)")
                return
            }
            #expect(error.code == .zoneNotFound)
            Helpers.expectUnknown(try await Helpers.resume("dave-1", on: dave, streamID: 7), "dave-1")
            await dave.close()
        }
    }
}
