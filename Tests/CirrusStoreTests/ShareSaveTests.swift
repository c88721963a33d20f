import CirrusWire
import Testing

@testable import CirrusStore

/// Saving, changing and deleting shares (`cloudkit.share` records) through `modifyRecords`:
/// where CloudKit allows them, the root in the same operation, participants kept by the server.
@Suite("Shares: saving through modifyRecords")
struct ShareSaveTests {
    private func share(_ name: String, zone: String = "Albums", participants: [Wire.ShareParticipant] = [],
                       publicPermission: Wire.ShareParticipantPermission = .none, in key: DatabaseKey = alice) -> Wire.Record {
        Wire.Record(
            recordID: recordID(name, zone: zone, in: key), recordType: "cloudkit.share",
            fields: [field("cloudkit.title", .stringValue("Summer"))],
            shareFields: Wire.ShareFields(participants: participants, publicPermission: publicPermission))
    }

    private func root(_ name: String, zone: String = "Albums", sharedBy shareName: String?) -> Wire.Record {
        var record = note(name, zone: zone)
        record.share = shareName.map { Wire.Reference(recordID: recordID($0, zone: zone), action: .none) }
        return record
    }

    private func invite(_ user: String, _ permission: Wire.ShareParticipantPermission = .readWrite) -> Wire.ShareParticipant {
        Wire.ShareParticipant(
            userIdentity: Wire.UserIdentity(userRecordID: Wire.RecordID(recordName: user)), role: .privateUser,
            permission: permission)
    }

    private func withUsers(_ body: @escaping @Sendable (any ShareStorageUnderTest) async throws -> Void) async throws {
        try await withShareStore { storage, _ in
            for user in ["_alice", "_bob", "_carol"] {
                _ = try await storage.createUser(user, at: Wire.Timestamp(seconds: 1))
            }
            _ = try await storage.registerUser("_dave", verifiedEmails: ["dave@example.com"], at: Wire.Timestamp(seconds: 1))
            try await storage.createZone("Albums")
            try await body(storage)
        }
    }

    @Test func aShareSavedWithItsRootGetsParticipantsAndAURL() async throws {
        try await withUsers { storage in
            let byEmail = Wire.ShareParticipant(
                userIdentity: Wire.UserIdentity(lookupInfo: Wire.UserIdentityLookupInfo(emailAddress: "Dave@Example.com")),
                permission: .readOnly)
            let result = try await storage.modifyRecords(
                RecordModification(saving: [root("album", sharedBy: "s1"), share("s1", participants: [invite("_bob"), byEmail])]),
                in: alice, by: "_alice")
            #expect(!result.hasFailures, "\(result)")
            let savedRoot = try #require(result.saved(0))
            #expect(savedRoot.share?.recordID?.recordName == "s1")
            let saved = try #require(result.saved(1))
            let fields = try #require(saved.shareFields)
            #expect(fields.owner?.userIdentity?.userRecordID?.recordName == "_alice")
            #expect(fields.owner?.role == .owner)
            #expect(fields.owner?.acceptanceStatus == .accepted)
            #expect(fields.participants.map { $0.userIdentity?.userRecordID?.recordName } == ["_alice", "_bob", "_dave"])
            #expect(fields.participants.dropFirst().allSatisfy { $0.acceptanceStatus == .pending && $0.role == .privateUser })
            #expect(fields.participants.map(\.permission) == [.readWrite, .readWrite, .readOnly])
            #expect(Set(fields.participants.map(\.participantID)).count == 3)
            #expect(ShareRules.token(inURL: "https://h" + fields.url) != nil, "\(fields.url)")
            #expect(saved.value("cloudkit.title") == .stringValue("Summer"))

            // The share and its root read back as saved.
            let fetched = try await storage.fetch(recordID("s1", zone: "Albums")).record
            #expect(fetched?.shareFields == fields)
            #expect(try await storage.fetch(recordID("album", zone: "Albums")).record?.share?.recordID?.recordName == "s1")
        }
    }

    @Test func savingAgainKeepsIDsStatusesAndTheURL() async throws {
        try await withUsers { storage in
            let first = try await storage.modifyRecords(
                RecordModification(saving: [root("album", sharedBy: "s1"), share("s1", participants: [invite("_bob")])]),
                in: alice, by: "_alice")
            let saved = try #require(first.saved(1))
            var again = saved
            again.shareFields?.participants.append(invite("_carol", .readOnly))
            again.shareFields?.publicPermission = .readOnly
            let second = try await storage.modifyRecords(RecordModification(saving: [again]), in: alice, by: "_alice")
            let fields = try #require(second.saved(0)?.shareFields)
            #expect(fields.url == saved.shareFields?.url)
            #expect(fields.publicPermission == .readOnly)
            #expect(Array(fields.participants.prefix(2).map(\.participantID)) == saved.shareFields?.participants.map(\.participantID))
            #expect(fields.participants.map { $0.userIdentity?.userRecordID?.recordName } == ["_alice", "_bob", "_carol"])

            // Removing bob: he is no longer listed.
            var removing = try #require(second.saved(0))
            removing.shareFields?.participants.removeAll { $0.userIdentity?.userRecordID?.recordName == "_bob" }
            let third = try await storage.modifyRecords(RecordModification(saving: [removing]), in: alice, by: "_alice")
            #expect(third.saved(0)?.shareFields?.participants.map { $0.userIdentity?.userRecordID?.recordName } == ["_alice", "_carol"])
        }
    }

    @Test func aNewHierarchyShareWithoutItsRootIsRefused() async throws {
        try await withUsers { storage in
            _ = try await storage.saveAll([note("album", zone: "Albums")])
            let result = try await storage.modifyRecords(RecordModification(saving: [share("s1")]), in: alice, by: "_alice")
            #expect(result.saveError(0)?.code == .invalidArguments)
            #expect(try await storage.fetch(recordID("s1", zone: "Albums")).failure?.code == .unknownItem)
        }
    }

    @Test func sharesAreRefusedInTheDefaultZoneAndThePublicDatabase() async throws {
        try await withUsers { storage in
            let inDefault = try await storage.modifyRecords(
                RecordModification(saving: [root("album", zone: "_defaultZone", sharedBy: "s1"), share("s1", zone: "_defaultZone")]),
                in: alice, by: "_alice")
            #expect(inDefault.saveError(1)?.code == .serverRejectedRequest)
            #expect(inDefault.saveError(0)?.code == .batchRequestFailed, "atomic: the root is not saved either")

            let inPublic = try await storage.modifyRecords(
                RecordModification(saving: [share("s1", zone: "_defaultZone", in: publicDB)]), in: publicDB, by: "_alice")
            #expect(inPublic.saveError(0)?.code == .serverRejectedRequest)
        }
    }

    @Test func aRootAlreadySharedCannotGetASecondShare() async throws {
        try await withUsers { storage in
            _ = try await storage.modifyRecords(
                RecordModification(saving: [root("album", sharedBy: "s1"), share("s1")]), in: alice, by: "_alice")
            var album = try #require(try await storage.fetch(recordID("album", zone: "Albums")).record)
            album.share = Wire.Reference(recordID: recordID("s2", zone: "Albums"), action: .none)
            let result = try await storage.modifyRecords(
                RecordModification(saving: [album, share("s2")], isAtomic: false), in: alice, by: "_alice")
            #expect(result.saveError(0)?.code == .alreadyShared)
            #expect(try await storage.fetch(recordID("album", zone: "Albums")).record?.share?.recordID?.recordName == "s1")
        }
    }

    @Test func zoneWideAndHierarchySharesDoNotMix() async throws {
        try await withUsers { storage in
            let zoneWide = try await storage.modifyRecords(
                RecordModification(saving: [share("cloudkit.zoneshare", participants: [invite("_bob")])]), in: alice, by: "_alice")
            #expect(!zoneWide.hasFailures)
            let hierarchy = try await storage.modifyRecords(
                RecordModification(saving: [root("album", sharedBy: "s1"), share("s1")], isAtomic: false),
                in: alice, by: "_alice")
            #expect(hierarchy.saveError(1)?.code == .alreadyShared)
        }
    }

    @Test func aParticipantNamingNobodyIsRefusedAndTooManyAreRefused() async throws {
        try await withUsers { storage in
            let nobody = Wire.ShareParticipant(userIdentity: Wire.UserIdentity(), permission: .readOnly)
            let result = try await storage.modifyRecords(
                RecordModification(saving: [share("cloudkit.zoneshare", participants: [nobody])]), in: alice, by: "_alice")
            #expect(result.saveError(0)?.code == .invalidArguments)

            let many = (0..<100).map { index in
                Wire.ShareParticipant(
                    userIdentity: Wire.UserIdentity(lookupInfo: Wire.UserIdentityLookupInfo(emailAddress: "u\(index)@example.com")),
                    permission: .readOnly)
            }
            let crowded = try await storage.modifyRecords(
                RecordModification(saving: [share("cloudkit.zoneshare", participants: many)]), in: alice, by: "_alice")
            #expect(crowded.saveError(0)?.code == .tooManyParticipants)
        }
    }

    @Test func deletingTheShareUnsharesTheRootAndDeletingTheRootDeletesTheShare() async throws {
        try await withUsers { storage in
            _ = try await storage.modifyRecords(
                RecordModification(saving: [root("album", sharedBy: "s1"), share("s1")]), in: alice, by: "_alice")
            let before = try #require(try await storage.fetch(recordID("album", zone: "Albums")).record)
            _ = try await storage.modifyRecords(RecordModification(deleting: [recordID("s1", zone: "Albums")]), in: alice, by: "_alice")
            let after = try #require(try await storage.fetch(recordID("album", zone: "Albums")).record)
            #expect(after.share == nil)
            #expect(after.recordChangeTag != before.recordChangeTag, "taking the share off is a change of the root")
            #expect(try await storage.count("shares") == 0)

            var again = after
            again.share = Wire.Reference(recordID: recordID("s2", zone: "Albums"), action: .none)
            _ = try await storage.modifyRecords(RecordModification(saving: [again, share("s2")]), in: alice, by: "_alice")
            #expect(try await storage.count("shares") == 1)
            _ = try await storage.modifyRecords(
                RecordModification(deleting: [recordID("album", zone: "Albums")]), in: alice, by: "_alice")
            #expect(try await storage.fetch(recordID("s2", zone: "Albums")).failure?.code == .unknownItem)
            #expect(try await storage.count("shares") == 0)
            #expect(try await storage.count("share_participants") == 0)
        }
    }

    @Test func deletingTheZoneDropsItsShares() async throws {
        try await withUsers { storage in
            _ = try await storage.modifyRecords(
                RecordModification(saving: [share("cloudkit.zoneshare", participants: [invite("_bob")])]), in: alice, by: "_alice")
            _ = try await storage.modifyZones(saving: [], deleting: [zoneID("Albums")], in: alice)
            #expect(try await storage.count("shares") == 0)
            #expect(try await storage.count("share_participants") == 0)
        }
    }

    @Test func aDatabaseSubscriptionInAParticipantsSharedDatabaseFiresForTheOwnersChanges() async throws {
        try await withUsers { storage in
            // Alice's own subscription too: her changes are collected for it either way.
            _ = try await storage.modifySubscriptions(
                saving: [Wire.Subscription(subscriptionID: "mine", kind: .database(Wire.DatabaseSubscription()))],
                deleting: [], in: alice, by: "_alice")
            let bobsShared = DatabaseKey.shared(container: container, user: "_bob")
            let carolsShared = DatabaseKey.shared(container: container, user: "_carol")
            for (key, user) in [(bobsShared, "_bob"), (carolsShared, "_carol")] {
                _ = try await storage.modifySubscriptions(
                    saving: [Wire.Subscription(subscriptionID: "db", kind: .database(Wire.DatabaseSubscription()))],
                    deleting: [], in: key, by: user)
            }
            let saved = try await storage.modifyRecords(
                RecordModification(saving: [share("cloudkit.zoneshare", participants: [invite("_bob"), invite("_carol")])]),
                in: alice, by: "_alice")
            let token = try #require(ShareURL.token(in: "https://h" + (saved.saved(0)?.shareFields?.url ?? "")))
            #expect(try await storage.acceptShare(withToken: token, in: container, by: "_bob") != nil)
            let bobsFeed = NotificationFeedKey(container: container, user: "_bob")
            let carolsFeed = NotificationFeedKey(container: container, user: "_carol")
            let bobBefore = try await storage.notificationFeedHead(bobsFeed)
            _ = try await storage.saveAll([note("n1", zone: "Albums")])
            #expect(try await storage.notificationFeedHead(bobsFeed) == bobBefore + 1, "bob accepted: notified")
            #expect(try await storage.notificationFeedHead(carolsFeed) == 0, "carol never accepted: not notified")
        }
    }
}
