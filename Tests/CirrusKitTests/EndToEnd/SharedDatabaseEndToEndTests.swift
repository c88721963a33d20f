import CirrusKit
import Foundation
import Testing

/// The shared database after accepting, against the whole stack: alice owns; bob is a
/// read-write participant, dave a read-only one, carol a stranger (until a share is public).
/// Every container keeps its connection open for the whole test, so a removal takes effect on
/// connections that stay open.
@Suite("Shared database end to end", .timeLimit(.minutes(5)))
struct SharedDatabaseEndToEndTests {
    private func code(_ body: () async throws -> Void) async -> CKError.Code? {
        do {
            try await body()
            return nil
        } catch let error as CKError {
            return error.code
        } catch {
            return .internalError
        }
    }

    private func failure<T>(_ result: Result<T, any Error>?) -> CKError.Code? {
        if case .failure(let error)? = result { return (error as? CKError)?.code ?? .internalError }
        return nil
    }

    /// Alice's zone `name` shared with `participants` (each with a permission), accepted by them.
    private func share(
        zone zoneID: CKRecordZone.ID, root: CKRecord?, by alice: CKContainer,
        with participants: [(CKContainer, String, CKShare.ParticipantPermission)]
    ) async throws -> CKShare {
        let share = root.map { CKShare(rootRecord: $0) } ?? CKShare(recordZoneID: zoneID)
        for (_, name, permission) in participants {
            let participant = try await alice.shareParticipant(
                for: CKUserIdentity.LookupInfo(userRecordID: CKRecord.ID(recordName: name)))
            participant.permission = permission
            share.addParticipant(participant)
        }
        let (saved, _) = try await alice.privateCloudDatabase.modifyRecords(saving: [root, share].compactMap { $0 }, deleting: [])
        let savedShare = try #require(try saved[share.recordID]?.get() as? CKShare)
        let url = try #require(savedShare.url)
        for (container, _, _) in participants {
            _ = try await container.accept(try await container.shareMetadata(for: url))
        }
        return savedShare
    }

    @Test func aZoneSharedWholeIsReadByAllAndWrittenOnlyWithReadWrite() async throws {
        try await withStack { container in
            let alice = container("alice")
            let bob = container("bob")
            let dave = container("dave")
            let carol = container("carol")
            for user in [alice, bob, dave, carol] { _ = try await user.userRecordID() }
            let ownZone = CKRecordZone.ID(zoneName: "Trip")
            _ = try await alice.privateCloudDatabase.save(CKRecordZone(zoneID: ownZone))
            let plan = CKRecord(recordType: "Plan", recordID: CKRecord.ID(recordName: "plan", zoneID: ownZone))
            plan["title"] = "Lisbon"
            _ = try await alice.privateCloudDatabase.save(plan)
            _ = try await share(zone: ownZone, root: nil, by: alice, with: [(bob, "_bob", .readWrite), (dave, "_dave", .readOnly)])

            // In the participants' shared databases the zone is alice's.
            let zoneID = CKRecordZone.ID(zoneName: "Trip", ownerName: "_alice")
            #expect(try await bob.sharedCloudDatabase.allRecordZones().map(\.zoneID) == [zoneID])
            #expect(try await dave.sharedCloudDatabase.allRecordZones().map(\.zoneID) == [zoneID])
            #expect(try await carol.sharedCloudDatabase.allRecordZones().isEmpty)
            let planID = CKRecord.ID(recordName: "plan", zoneID: zoneID)
            #expect(try await dave.sharedCloudDatabase.record(for: planID)["title"] as? String == "Lisbon")

            // Bob writes; dave may not; carol's answers are those of a zone of nobody.
            let day = CKRecord(recordType: "Day", recordID: CKRecord.ID(recordName: "day1", zoneID: zoneID))
            day["city"] = "Porto"
            _ = try await bob.sharedCloudDatabase.save(day)
            #expect(try await alice.privateCloudDatabase.record(for: CKRecord.ID(recordName: "day1", zoneID: ownZone))["city"] as? String == "Porto")
            let daves = CKRecord(recordType: "Day", recordID: CKRecord.ID(recordName: "day2", zoneID: zoneID))
            #expect(await code { _ = try await dave.sharedCloudDatabase.save(daves) } == .permissionFailure)
            #expect(await code { _ = try await dave.sharedCloudDatabase.deleteRecord(withID: planID) } == .permissionFailure)
            let nobodysZone = CKRecordZone.ID(zoneName: "Nope", ownerName: "_alice")
            #expect(await code { _ = try await carol.sharedCloudDatabase.record(for: planID) } == .zoneNotFound)
            #expect(await code {
                _ = try await carol.sharedCloudDatabase.record(for: CKRecord.ID(recordName: "plan", zoneID: nobodysZone))
            } == .zoneNotFound)
            #expect(await code { _ = try await carol.sharedCloudDatabase.save(daves) } == .zoneNotFound)

            // Queries and both change feeds.
            let (matches, _) = try await dave.sharedCloudDatabase.records(
                matching: CKQuery(recordType: "Day", predicate: CKPredicate(value: true)), inZoneWith: zoneID)
            #expect(matches.map(\.0.recordName) == ["day1"])
            let changes = try await dave.sharedCloudDatabase.recordZoneChanges(inZoneWith: zoneID, since: nil)
            #expect(Set(changes.modificationResultsByID.keys.map(\.recordName)).isSuperset(of: ["plan", "day1"]))
            let databaseChanges = try await bob.sharedCloudDatabase.databaseChanges(since: nil)
            #expect(databaseChanges.modifications.map(\.zoneID) == [zoneID])
            let quiet = try await bob.sharedCloudDatabase.databaseChanges(since: databaseChanges.changeToken)
            #expect(quiet.modifications.isEmpty && quiet.deletions.isEmpty)
            #expect(await code {
                _ = try await carol.sharedCloudDatabase.recordZoneChanges(inZoneWith: zoneID, since: nil)
            } == .zoneNotFound)

            // A query cursor bob holds before his removal.
            let second = CKRecord(recordType: "Day", recordID: CKRecord.ID(recordName: "day3", zoneID: zoneID))
            _ = try await bob.sharedCloudDatabase.save(second)
            let (firstPage, cursor) = try await bob.sharedCloudDatabase.records(
                matching: CKQuery(recordType: "Day", predicate: CKPredicate(value: true)), inZoneWith: zoneID, resultsLimit: 1)
            #expect(firstPage.count == 1)
            let heldCursor = try #require(cursor)

            // Alice removes bob: on the same open connection, his zone is deleted from his
            // database changes and everything else answers as for a zone of nobody, his change
            // token included.
            let ownersShare = try #require(
                try await alice.privateCloudDatabase.record(
                    for: CKRecord.ID(recordName: CKRecordNameZoneWideShare, zoneID: ownZone)) as? CKShare)
            for participant in ownersShare.participants where participant.userIdentity.userRecordID?.recordName == "_bob" {
                ownersShare.removeParticipant(participant)
            }
            _ = try await alice.privateCloudDatabase.save(ownersShare)
            let afterRemoval = try await bob.sharedCloudDatabase.databaseChanges(since: quiet.changeToken)
            #expect(afterRemoval.deletions.map(\.zoneID) == [zoneID])
            #expect(await code { _ = try await bob.sharedCloudDatabase.record(for: planID) } == .zoneNotFound)
            #expect(await code { _ = try await bob.sharedCloudDatabase.save(day) } == .zoneNotFound)
            #expect(await code {
                _ = try await bob.sharedCloudDatabase.recordZoneChanges(inZoneWith: zoneID, since: changes.changeToken)
            } == .zoneNotFound)
            #expect(try await bob.sharedCloudDatabase.allRecordZones().isEmpty)
            #expect(await code { _ = try await bob.sharedCloudDatabase.records(continuingMatchFrom: heldCursor) } == .invalidArguments)
            // Dave keeps his access, until he leaves by deleting the share from his shared
            // database: then it is gone for him, and the owner sees him removed.
            #expect(try await dave.sharedCloudDatabase.record(for: planID).recordID == planID)
            let shareID = CKRecord.ID(recordName: CKRecordNameZoneWideShare, zoneID: zoneID)
            #expect(try await dave.sharedCloudDatabase.deleteRecord(withID: shareID) == shareID)
            #expect(await code { _ = try await dave.sharedCloudDatabase.record(for: planID) } == .zoneNotFound)
            #expect(await code { _ = try await dave.sharedCloudDatabase.deleteRecord(withID: shareID) } == .zoneNotFound)
            let afterLeaving = try #require(
                try await alice.privateCloudDatabase.record(
                    for: CKRecord.ID(recordName: CKRecordNameZoneWideShare, zoneID: ownZone)) as? CKShare)
            #expect(afterLeaving.participants.first { $0.userIdentity.userRecordID?.recordName == "_dave" }?.acceptanceStatus == .removed)
            // The owner saving the share again does not invite him back.
            let resaved = try #require(try await alice.privateCloudDatabase.save(afterLeaving) as? CKShare)
            #expect(resaved.participants.first { $0.userIdentity.userRecordID?.recordName == "_dave" }?.acceptanceStatus == .removed)
            #expect(await code { _ = try await dave.sharedCloudDatabase.record(for: planID) } == .zoneNotFound)
        }
    }

    @Test func aParticipantsAssetsAreStoredForTheOwnerToRead() async throws {
        // One small enough to travel inline with its record, one that is uploaded first.
        let small = try makeAssetFile(bytes: 2 << 10, seed: 21)
        let large = try makeAssetFile(bytes: 5 << 20, seed: 22)
        defer {
            try? FileManager.default.removeItem(at: small)
            try? FileManager.default.removeItem(at: large)
        }
        try await withStack { container in
            let alice = container("alice")
            let bob = container("bob")
            for user in [alice, bob] { _ = try await user.userRecordID() }
            let ownZone = CKRecordZone.ID(zoneName: "Album")
            _ = try await alice.privateCloudDatabase.save(CKRecordZone(zoneID: ownZone))
            _ = try await share(zone: ownZone, root: nil, by: alice, with: [(bob, "_bob", .readWrite)])

            let zoneID = CKRecordZone.ID(zoneName: "Album", ownerName: "_alice")
            let photo = CKRecord(recordType: "Photo", recordID: CKRecord.ID(recordName: "photo", zoneID: zoneID))
            photo["thumbnail"] = CKAsset(fileURL: small)
            photo["original"] = CKAsset(fileURL: large)
            _ = try await bob.sharedCloudDatabase.save(photo)

            let fetched = try await alice.privateCloudDatabase.record(for: CKRecord.ID(recordName: "photo", zoneID: ownZone))
            for (key, source) in [("thumbnail", small), ("original", large)] {
                let url = try #require((fetched[key] as? CKAsset)?.fileURL, "\(key) has no file")
                #expect(try Data(contentsOf: url) == Data(contentsOf: source), "\(key)")
            }
            // And bob reads back what he saved, through his shared database.
            let again = try await bob.sharedCloudDatabase.record(for: photo.recordID)
            let url = try #require((again["original"] as? CKAsset)?.fileURL)
            #expect(try Data(contentsOf: url) == Data(contentsOf: large))
        }
    }

    @Test func aHierarchyShareShowsOnlyTheRecordsUnderItsRoot() async throws {
        try await withStack { container in
            let alice = container("alice")
            let bob = container("bob")
            for user in [alice, bob] { _ = try await user.userRecordID() }
            let ownZone = CKRecordZone.ID(zoneName: "Albums")
            _ = try await alice.privateCloudDatabase.save(CKRecordZone(zoneID: ownZone))
            let album = CKRecord(recordType: "Album", recordID: CKRecord.ID(recordName: "album", zoneID: ownZone))
            let photo = CKRecord(recordType: "Photo", recordID: CKRecord.ID(recordName: "photo", zoneID: ownZone))
            photo.setParent(album)
            let secret = CKRecord(recordType: "Photo", recordID: CKRecord.ID(recordName: "secret", zoneID: ownZone))
            let (stored, _) = try await alice.privateCloudDatabase.modifyRecords(saving: [album, photo, secret], deleting: [])
            let savedAlbum = try #require(try stored[album.recordID]?.get())
            let share = try await share(zone: ownZone, root: savedAlbum, by: alice, with: [(bob, "_bob", .readWrite)])

            let zoneID = CKRecordZone.ID(zoneName: "Albums", ownerName: "_alice")
            func id(_ name: String) -> CKRecord.ID { CKRecord.ID(recordName: name, zoneID: zoneID) }
            let fetched = try await bob.sharedCloudDatabase.records(for: [id("album"), id("photo"), id("secret"), id("nothing")])
            #expect(failure(fetched[id("album")]) == nil)
            #expect(failure(fetched[id("photo")]) == nil)
            #expect(failure(fetched[id("secret")]) == .unknownItem, "not shared: as if it did not exist")
            #expect(failure(fetched[id("nothing")]) == .unknownItem)
            #expect(try await bob.sharedCloudDatabase.record(for: CKRecord.ID(recordName: share.recordID.recordName, zoneID: zoneID)) is CKShare)

            let (matches, _) = try await bob.sharedCloudDatabase.records(
                matching: CKQuery(recordType: "Photo", predicate: CKPredicate(value: true)), inZoneWith: zoneID)
            #expect(matches.map(\.0.recordName) == ["photo"])
            let changes = try await bob.sharedCloudDatabase.recordZoneChanges(inZoneWith: zoneID, since: nil)
            #expect(!changes.modificationResultsByID.keys.contains(id("secret")))
            #expect(changes.modificationResultsByID.keys.contains(id("photo")))

            // A new record under the root is shared; one without a shared parent, or a change
            // of a record outside the share, is refused alike.
            let child = CKRecord(recordType: "Photo", recordID: id("child"))
            child.setParent(CKRecord.ID(recordName: "album", zoneID: zoneID))
            let loose = CKRecord(recordType: "Photo", recordID: id("loose"))
            let overwrite = CKRecord(recordType: "Photo", recordID: id("secret"))
            let (saved, _) = try await bob.sharedCloudDatabase.modifyRecords(
                saving: [child, loose, overwrite], deleting: [], savePolicy: .allKeys, atomically: false)
            #expect(failure(saved[id("child")]) == nil)
            #expect(failure(saved[id("loose")]) == .permissionFailure)
            #expect(failure(saved[id("secret")]) == .permissionFailure)
            #expect(try await alice.privateCloudDatabase.record(for: CKRecord.ID(recordName: "child", zoneID: ownZone)).parent != nil)
            // Deleting a record outside the share, or one that does not exist, is refused alike;
            // one of the share goes.
            let (_, deleted) = try await bob.sharedCloudDatabase.modifyRecords(
                saving: [], deleting: [id("secret"), id("nothing"), id("child")], atomically: false)
            #expect(failure(deleted[id("secret")]) == .permissionFailure)
            #expect(failure(deleted[id("nothing")]) == .permissionFailure)
            #expect(failure(deleted[id("child")]) == nil)
            #expect(try await alice.privateCloudDatabase.record(for: CKRecord.ID(recordName: "secret", zoneID: ownZone)).recordType == "Photo")
            // Participants do not change the share.
            let (shareSave, _) = try await bob.sharedCloudDatabase.modifyRecords(
                saving: [CKShare(recordZoneID: zoneID)], deleting: [])
            #expect(failure(shareSave[CKRecord.ID(recordName: CKRecordNameZoneWideShare, zoneID: zoneID)]) == .permissionFailure)

            // Deleting the share ends bob's access.
            _ = try await alice.privateCloudDatabase.deleteRecord(withID: share.recordID)
            #expect(await code { _ = try await bob.sharedCloudDatabase.record(for: id("photo")) } == .zoneNotFound)
        }
    }

    @Test func aParticipantHearsOnlyOfDeletionsOfRecordsSharedWithThem() async throws {
        try await withStack { container in
            let alice = container("alice")
            let bob = container("bob")
            let carol = container("carol")
            for user in [alice, bob, carol] { _ = try await user.userRecordID() }
            // Alice's zone: album (shared with bob) ← photo; other (shared with carol) ←
            // sketch; secret, in no share.
            let ownZone = CKRecordZone.ID(zoneName: "Albums")
            _ = try await alice.privateCloudDatabase.save(CKRecordZone(zoneID: ownZone))
            func own(_ name: String, parent: CKRecord? = nil) -> CKRecord {
                let record = CKRecord(recordType: "Photo", recordID: CKRecord.ID(recordName: name, zoneID: ownZone))
                if let parent { record.setParent(parent) }
                return record
            }
            let album = own("album")
            let other = own("other")
            let (stored, _) = try await alice.privateCloudDatabase.modifyRecords(
                saving: [album, other, own("photo", parent: album), own("sketch", parent: other), own("secret")], deleting: [])
            _ = try await share(zone: ownZone, root: try #require(try stored[album.recordID]?.get()), by: alice, with: [(bob, "_bob", .readOnly)])
            _ = try await share(zone: ownZone, root: try #require(try stored[other.recordID]?.get()), by: alice, with: [(carol, "_carol", .readOnly)])
            let zoneID = CKRecordZone.ID(zoneName: "Albums", ownerName: "_alice")
            let bobsToken = try await bob.sharedCloudDatabase.recordZoneChanges(inZoneWith: zoneID, since: nil).changeToken

            _ = try await alice.privateCloudDatabase.modifyRecords(
                saving: [], deleting: ["photo", "sketch", "secret"].map { CKRecord.ID(recordName: $0, zoneID: ownZone) })
            // Bob hears of photo alone, from his token and from the start; carol of sketch alone.
            let sinceToken = try await bob.sharedCloudDatabase.recordZoneChanges(inZoneWith: zoneID, since: bobsToken)
            #expect(sinceToken.deletions.map(\.recordID.recordName) == ["photo"])
            #expect(sinceToken.deletions.map(\.recordType) == ["Photo"])
            let fromStart = try await bob.sharedCloudDatabase.recordZoneChanges(inZoneWith: zoneID, since: nil)
            #expect(fromStart.deletions.map(\.recordID.recordName) == ["photo"])
            let carols = try await carol.sharedCloudDatabase.recordZoneChanges(inZoneWith: zoneID, since: nil)
            #expect(carols.deletions.map(\.recordID.recordName) == ["sketch"])
            // The owner hears of all three.
            let owners = try await alice.privateCloudDatabase.recordZoneChanges(inZoneWith: ownZone, since: nil)
            #expect(Set(owners.deletions.map(\.recordID.recordName)) == ["photo", "sketch", "secret"])
        }
    }

    @Test func aPublicShareOpensTheZoneToWhoeverAcceptsIt() async throws {
        try await withStack { container in
            let alice = container("alice")
            let carol = container("carol")
            for user in [alice, carol] { _ = try await user.userRecordID() }
            let ownZone = CKRecordZone.ID(zoneName: "Board")
            _ = try await alice.privateCloudDatabase.save(CKRecordZone(zoneID: ownZone))
            let note = CKRecord(recordType: "Note", recordID: CKRecord.ID(recordName: "n", zoneID: ownZone))
            _ = try await alice.privateCloudDatabase.save(note)
            let share = CKShare(recordZoneID: ownZone)
            share.publicPermission = .readOnly
            let saved = try #require(try await alice.privateCloudDatabase.save(share) as? CKShare)
            let zoneID = CKRecordZone.ID(zoneName: "Board", ownerName: "_alice")
            #expect(await code {
                _ = try await carol.sharedCloudDatabase.record(for: CKRecord.ID(recordName: "n", zoneID: zoneID))
            } == .zoneNotFound, "not before accepting")
            _ = try await carol.accept(try await carol.shareMetadata(for: try #require(saved.url)))
            #expect(try await carol.sharedCloudDatabase.record(for: CKRecord.ID(recordName: "n", zoneID: zoneID)).recordType == "Note")
            let mine = CKRecord(recordType: "Note", recordID: CKRecord.ID(recordName: "c", zoneID: zoneID))
            #expect(await code { _ = try await carol.sharedCloudDatabase.save(mine) } == .permissionFailure)
        }
    }
}
