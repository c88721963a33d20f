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
}
