import CirrusKit
import CirrusTestSupport
import Foundation
import Testing

/// Subscriptions of the shared database and the notification watches that deliver them,
/// against the whole stack: alice owns, bob takes part. Every container keeps its connection
/// (and its watch) open for the whole test.
@Suite("Shared database subscriptions end to end", .timeLimit(.minutes(5)))
struct SharedSubscriptionsEndToEndTests {
    /// Alice's share (of `root`'s hierarchy, or of the zone when nil) with `participants`
    /// (read-write), accepted by each.
    static func share(
        zone zoneID: CKRecordZone.ID, root: CKRecord?, by alice: CKContainer, with participants: [(CKContainer, String)]
    ) async throws -> CKShare {
        let share = root.map { CKShare(rootRecord: $0) } ?? CKShare(recordZoneID: zoneID)
        for (_, name) in participants {
            let participant = try await alice.shareParticipant(
                for: CKUserIdentity.LookupInfo(userRecordID: CKRecord.ID(recordName: name)))
            participant.permission = .readWrite
            share.addParticipant(participant)
        }
        let (saved, _) = try await alice.privateCloudDatabase.modifyRecords(
            saving: [root, share].compactMap { $0 }, deleting: [])
        let savedShare = try #require(try saved[share.recordID]?.get() as? CKShare)
        let url = try #require(savedShare.url)
        for (container, _) in participants {
            _ = try await container.accept(try await container.shareMetadata(for: url))
        }
        return savedShare
    }

    /// Alice saves `share` again without the participant `name`.
    static func remove(_ name: String, from share: CKShare, by alice: CKContainer) async throws {
        let current = try #require(try await alice.privateCloudDatabase.record(for: share.recordID) as? CKShare)
        for participant in current.participants where participant.userIdentity.userRecordID?.recordName == name {
            current.removeParticipant(participant)
        }
        _ = try await alice.privateCloudDatabase.save(current)
    }

    /// The subscription IDs of what `log` delivered from `start` on.
    static func subscriptions(_ log: PushLog, from start: Int) -> [String] {
        log.all.dropFirst(start).map { $0.subscriptionID ?? "" }
    }

    @Test func aRemovedParticipantsOpenWatchStopsDeliveringTheShareAtOnce() async throws {
        try await withStack { container in
            let alice = container("alice")
            let bob = container("bob")
            for user in [alice, bob] { _ = try await user.userRecordID() }
            let ownZone = CKRecordZone.ID(zoneName: "Trip")
            _ = try await alice.privateCloudDatabase.save(CKRecordZone(zoneID: ownZone))
            let share = try await Self.share(zone: ownZone, root: nil, by: alice, with: [(bob, "_bob")])
            // Bob subscribes to his shared database and to his own private one, and watches.
            _ = try await bob.sharedCloudDatabase.save(CKDatabaseSubscription(subscriptionID: "shared"))
            _ = try await bob.privateCloudDatabase.save(CKDatabaseSubscription(subscriptionID: "mine"))
            let bobsZone = CKRecordZone.ID(zoneName: "Mine")
            _ = try await bob.privateCloudDatabase.save(CKRecordZone(zoneID: bobsZone))
            let log = PushLog()
            let watch = collectNotifications(of: bob, since: try await currentNotificationToken(bob), into: log)

            // Alice's change reaches bob's watch through his shared database's subscription.
            _ = try await alice.privateCloudDatabase.save(CKRecord(recordType: "Day", recordID: CKRecord.ID(recordName: "d1", zoneID: ownZone)))
            try await eventually("the shared notification") { log.count >= 1 }
            #expect(Self.subscriptions(log, from: 0) == ["shared"])

            // Removed, he hears nothing more of the zone: a later change of alice's comes
            // before his own change in his feed, and only his own is delivered.
            try await Self.remove("_bob", from: share, by: alice)
            let start = log.count
            _ = try await alice.privateCloudDatabase.save(CKRecord(recordType: "Day", recordID: CKRecord.ID(recordName: "d2", zoneID: ownZone)))
            _ = try await bob.privateCloudDatabase.save(CKRecord(recordType: "Note", recordID: CKRecord.ID(recordName: "n", zoneID: bobsZone)))
            try await eventually("bob's own notification") { Self.subscriptions(log, from: start).contains("mine") }
            #expect(Self.subscriptions(log, from: start) == ["mine"])
            watch.cancel()
            _ = await watch.value
        }
    }

    /// The subscription IDs of `container`'s notifications after `token`.
    static func notified(_ container: CKContainer, since token: CKServerChangeToken) async throws -> [String] {
        try await fetchNotifications(container, since: token).map { $0.subscriptionID ?? "" }
    }

    @Test func aHierarchyParticipantIsNotifiedOnlyOfChangesInTheirShare() async throws {
        try await withStack { container in
            let alice = container("alice")
            let bob = container("bob")
            let carol = container("carol")
            for user in [alice, bob, carol] { _ = try await user.userRecordID() }
            // album is shared with bob, other with carol; secret is in no share.
            let ownZone = CKRecordZone.ID(zoneName: "Albums")
            _ = try await alice.privateCloudDatabase.save(CKRecordZone(zoneID: ownZone))
            func own(_ name: String, parent: String? = nil) -> CKRecord {
                let record = CKRecord(recordType: "Photo", recordID: CKRecord.ID(recordName: name, zoneID: ownZone))
                if let parent { record.setParent(CKRecord.ID(recordName: parent, zoneID: ownZone)) }
                return record
            }
            let (stored, _) = try await alice.privateCloudDatabase.modifyRecords(saving: [own("album"), own("other"), own("secret")], deleting: [])
            _ = try await Self.share(zone: ownZone, root: try stored[own("album").recordID]?.get(), by: alice, with: [(bob, "_bob")])
            _ = try await Self.share(zone: ownZone, root: try stored[own("other").recordID]?.get(), by: alice, with: [(carol, "_carol")])
            _ = try await alice.privateCloudDatabase.save(CKDatabaseSubscription(subscriptionID: "mine"))
            for participant in [bob, carol] {
                _ = try await participant.sharedCloudDatabase.save(CKDatabaseSubscription(subscriptionID: "shared"))
            }
            let tokens = [
                try await currentNotificationToken(alice), try await currentNotificationToken(bob),
                try await currentNotificationToken(carol),
            ]

            // Five writes of alice's: outside both shares (a save, a change, a deletion), in
            // carol's, in bob's (a save, then a deletion).
            _ = try await alice.privateCloudDatabase.save(own("loose"))
            _ = try await alice.privateCloudDatabase.modifyRecords(
                saving: [own("secret")], deleting: [], savePolicy: .allKeys)
            _ = try await alice.privateCloudDatabase.deleteRecord(withID: own("loose").recordID)
            _ = try await alice.privateCloudDatabase.save(own("sketch", parent: "other"))
            _ = try await alice.privateCloudDatabase.save(own("photo", parent: "album"))
            _ = try await alice.privateCloudDatabase.deleteRecord(withID: own("photo").recordID)

            #expect(try await Self.notified(bob, since: tokens[1]) == ["shared", "shared"])
            #expect(try await Self.notified(carol, since: tokens[2]) == ["shared"])
            // The owner's private subscription fires for every write of hers.
            #expect(try await Self.notified(alice, since: tokens[0]) == Array(repeating: "mine", count: 6))
        }
    }

    @Test func aZoneWideParticipantIsNotifiedOfTheZoneAndNothingElse() async throws {
        try await withStack { container in
            let alice = container("alice")
            let bob = container("bob")
            for user in [alice, bob] { _ = try await user.userRecordID() }
            let trip = CKRecordZone.ID(zoneName: "Trip")
            let diary = CKRecordZone.ID(zoneName: "Diary")
            _ = try await alice.privateCloudDatabase.modifyRecordZones(saving: [CKRecordZone(zoneID: trip), CKRecordZone(zoneID: diary)], deleting: [])
            _ = try await Self.share(zone: trip, root: nil, by: alice, with: [(bob, "_bob")])
            _ = try await alice.privateCloudDatabase.save(CKDatabaseSubscription(subscriptionID: "mine"))
            _ = try await bob.sharedCloudDatabase.save(CKDatabaseSubscription(subscriptionID: "shared"))
            let aliceToken = try await currentNotificationToken(alice)
            let bobToken = try await currentNotificationToken(bob)

            // Alice writes in her unshared zone, then in the shared one (a save with no parent,
            // then a deletion), then in the unshared one again.
            let page = CKRecord(recordType: "Page", recordID: CKRecord.ID(recordName: "p", zoneID: diary))
            _ = try await alice.privateCloudDatabase.save(page)
            let day = CKRecord(recordType: "Day", recordID: CKRecord.ID(recordName: "d", zoneID: trip))
            _ = try await alice.privateCloudDatabase.save(day)
            _ = try await alice.privateCloudDatabase.deleteRecord(withID: day.recordID)
            _ = try await alice.privateCloudDatabase.deleteRecord(withID: page.recordID)

            #expect(try await Self.notified(bob, since: bobToken) == ["shared", "shared"])
            #expect(try await Self.notified(alice, since: aliceToken) == Array(repeating: "mine", count: 4))
        }
    }
}
