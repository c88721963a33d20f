import CirrusKit
import Foundation
import Testing

/// `CKRecordZone.share`, as CloudKit keeps it: the server sets it when a zone-wide share is
/// saved and clears it when the share is deleted; the owner sees it in their private database,
/// participants in their shared database.
@Suite("Zones name their zone-wide share", .timeLimit(.minutes(5)))
struct ZoneShareReferenceEndToEndTests {
    @Test func theZoneWideShareIsSetOnTheZoneAndClearedWithTheShare() async throws {
        try await withStack { container in
            let alice = container("alice")
            let bob = container("bob")
            for user in [alice, bob] { _ = try await user.userRecordID() }
            let trip = CKRecordZone.ID(zoneName: "Trip")
            let albums = CKRecordZone.ID(zoneName: "Albums")
            _ = try await alice.privateCloudDatabase.modifyRecordZones(
                saving: [CKRecordZone(zoneID: trip), CKRecordZone(zoneID: albums)], deleting: [])
            #expect(try await alice.privateCloudDatabase.recordZone(for: trip).share == nil)
            let token = try await alice.privateCloudDatabase.databaseChanges(since: nil).changeToken

            // Alice shares Trip whole and one record of Albums; bob accepts the first.
            let share = CKShare(recordZoneID: trip)
            let participant = try await alice.shareParticipant(for: CKUserIdentity.LookupInfo(userRecordID: CKRecord.ID(recordName: "_bob")))
            share.addParticipant(participant)
            let saved = try #require(try await alice.privateCloudDatabase.save(share) as? CKShare)
            let album = CKRecord(recordType: "Album", recordID: CKRecord.ID(recordName: "album", zoneID: albums))
            _ = try await alice.privateCloudDatabase.modifyRecords(saving: [album, CKShare(rootRecord: album)], deleting: [])
            _ = try await bob.accept(try await bob.shareMetadata(for: try #require(saved.url)))

            let shareID = CKRecord.ID(recordName: CKRecordNameZoneWideShare, zoneID: trip)
            #expect(try await alice.privateCloudDatabase.recordZone(for: trip).share?.recordID == shareID)
            #expect(try await alice.privateCloudDatabase.recordZone(for: albums).share == nil, "a hierarchy share is not the zone's")
            let all = try await alice.privateCloudDatabase.allRecordZones()
            #expect(all.first { $0.zoneID == trip }?.share?.recordID == shareID)
            // The zone changed in the owner's database changes.
            let changed = try await alice.privateCloudDatabase.databaseChanges(since: token)
            #expect(changed.modifications.map(\.zoneID).contains(trip))

            // Bob sees alice's zone with its share, both owned by alice.
            let sharedZone = CKRecordZone.ID(zoneName: "Trip", ownerName: "_alice")
            let sharedShareID = CKRecord.ID(recordName: CKRecordNameZoneWideShare, zoneID: sharedZone)
            #expect(try await bob.sharedCloudDatabase.recordZone(for: sharedZone).share?.recordID == sharedShareID)
            #expect(try await bob.sharedCloudDatabase.allRecordZones().map(\.share?.recordID) == [sharedShareID])
            #expect(try await bob.sharedCloudDatabase.record(for: sharedShareID) is CKShare)

            // Deleting the share clears it.
            _ = try await alice.privateCloudDatabase.deleteRecord(withID: shareID)
            #expect(try await alice.privateCloudDatabase.recordZone(for: trip).share == nil)
            #expect(try await alice.privateCloudDatabase.allRecordZones().allSatisfy { $0.share == nil })
        }
    }
}
