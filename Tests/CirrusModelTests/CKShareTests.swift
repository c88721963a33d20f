import CirrusWire
import Foundation
import Testing

@testable import CirrusModel

/// `CKShare`, its participants and metadata: construction, the wire and archiving.
@Suite("CKShare")
struct CKShareTests {
    private let zone = CKRecordZone.ID(zoneName: "Albums", ownerName: "__defaultOwner__")

    private func participant(_ name: String, permission: CKShare.ParticipantPermission = .readOnly) -> CKShare.Participant {
        CKShare.Participant(
            userIdentity: CKUserIdentity(
                userRecordID: CKRecord.ID(recordName: name), lookupInfo: nil, nameComponents: nil, hasiCloudAccount: true),
            role: .privateUser, permission: permission, acceptanceStatus: .pending, participantID: "")
    }

    /// A share as the server sends it back after saving: owner, one participant, URL.
    private func savedShareWire() -> Wire.Record {
        let owner = Wire.ShareParticipant(
            participantID: "p-owner", userIdentity: Wire.UserIdentity(userRecordID: Wire.RecordID(recordName: "_alice")),
            role: .owner, acceptanceStatus: .accepted, permission: .readWrite)
        let bob = Wire.ShareParticipant(
            participantID: "p-bob", userIdentity: Wire.UserIdentity(userRecordID: Wire.RecordID(recordName: "_bob")),
            role: .privateUser, acceptanceStatus: .pending, permission: .readWrite)
        return Wire.Record(
            recordID: Wire.RecordID(recordName: "s1", zoneID: Wire.RecordZoneID(zoneName: "Albums", ownerName: "_alice")),
            recordType: "cloudkit.share",
            recordChangeTag: "t1",
            fields: [Wire.RecordField(key: "cloudkit.title", value: Wire.FieldValue(kind: .stringValue("Summer")))],
            shareFields: Wire.ShareFields(
                participants: [owner, bob], publicPermission: .readOnly, owner: owner, currentUserParticipant: bob,
                url: "https://cirrus.example:8443/share/iCloud.test/abc"))
    }

    @Test func aHierarchyShareLivesInTheRootsZoneAndMarksTheRoot() {
        let album = CKRecord(recordType: "Album", recordID: CKRecord.ID(recordName: "a1", zoneID: zone))
        let share = CKShare(rootRecord: album)
        #expect(share.recordType == "cloudkit.share")
        #expect(share.recordID.zoneID == zone)
        #expect(share.recordID.recordName != CKRecordNameZoneWideShare)
        #expect(!share.isZoneWide)
        #expect(album.share?.recordID == share.recordID)
        #expect(share.publicPermission == .none)
        #expect(share.url == nil)
        #expect(share.owner.role == .owner)
        #expect(share.participants.count == 1, "only the owner")

        let named = CKShare(rootRecord: album, shareID: CKRecord.ID(recordName: "s-named", zoneID: zone))
        #expect(named.recordID.recordName == "s-named")
        #expect(album.share?.recordID.recordName == "s-named")
    }

    @Test func aZoneWideShareIsNamedCloudkitZoneshare() {
        let share = CKShare(recordZoneID: zone)
        #expect(share.recordID == CKRecord.ID(recordName: "cloudkit.zoneshare", zoneID: zone))
        #expect(share.isZoneWide)
        #expect(share.recordType == CKRecord.SystemType.share)
    }

    @Test func participantsAreAddedOnceAndRemovedByPerson() {
        let share = CKShare(recordZoneID: zone)
        let bob = participant("_bob", permission: .readWrite)
        share.addParticipant(bob)
        share.addParticipant(participant("_bob"))
        share.addParticipant(participant("_carol"))
        #expect(share.participants.map { $0.userIdentity.userRecordID?.recordName } == ["__defaultOwner__", "_bob", "_carol"])
        #expect(share.participants[1].permission == .readWrite, "the second add of bob changed nothing")

        share.removeParticipant(participant("_bob"))
        #expect(share.participants.map { $0.userIdentity.userRecordID?.recordName } == ["__defaultOwner__", "_carol"])
        share.removeParticipant(share.owner)
        #expect(share.participants.count == 2, "the owner cannot be removed")
    }

    @Test func aParticipantWithoutPermissionOrRoleGetsReadOnlyPrivateUser() {
        let share = CKShare(recordZoneID: zone)
        let dave = participant("_dave", permission: .unknown)
        dave.role = .owner
        share.addParticipant(dave)
        #expect(dave.role == .privateUser)
        #expect(dave.permission == .readOnly)
    }

    @Test func theTitleAndThumbnailAreOrdinaryFieldsUnderCloudKitsKeys() throws {
        let share = CKShare(recordZoneID: zone)
        share[CKShare.SystemFieldKey.title] = "Summer"
        share[CKShare.SystemFieldKey.thumbnailImageData] = Data([1, 2, 3])
        share[CKShare.SystemFieldKey.shareType] = "public.image"
        let wire = try share.wireRecord
        #expect(Set(wire.fields.map(\.key)) == ["cloudkit.title", "cloudkit.thumbnailImageData", "cloudkit.type"])
        #expect(CKShare.SystemFieldKey.title == "cloudkit.title")
    }

    @Test func aSavedShareSendsItsParticipantsAndPublicPermission() throws {
        let share = CKShare(recordZoneID: zone)
        share.publicPermission = .readWrite
        share.addParticipant(participant("_bob", permission: .readWrite))
        let fields = try #require(try share.wireRecord.shareFields)
        #expect(fields.publicPermission == .readWrite)
        #expect(fields.participants.map(\.role) == [.owner, .privateUser])
        #expect(fields.participants[1].permission == .readWrite)
        #expect(fields.participants[1].userIdentity?.userRecordID?.recordName == "_bob")
        #expect(try CKRecord(recordType: "Note").wireRecord.shareFields == nil, "a plain record carries none")
    }

    @Test func aShareFromTheServerDecodesAsACKShare() throws {
        let decoded = try CKRecord.decoded(wire: savedShareWire())
        let share = try #require(decoded as? CKShare)
        #expect(share.owner.userIdentity.userRecordID?.recordName == "_alice")
        #expect(share.owner.participantID == "p-owner")
        #expect(share.participants.map(\.participantID) == ["p-owner", "p-bob"])
        #expect(share.participants[1].acceptanceStatus == .pending)
        #expect(share.currentUserParticipant?.participantID == "p-bob")
        #expect(share.publicPermission == .readOnly)
        #expect(share.url?.absoluteString == "https://cirrus.example:8443/share/iCloud.test/abc")
        #expect(share[CKShare.SystemFieldKey.title] as? String == "Summer")
        #expect(share.recordChangeTag == "t1")

        var plain = savedShareWire()
        plain.recordType = "Note"
        plain.shareFields = nil
        #expect(!(try CKRecord.decoded(wire: plain) is CKShare))
    }

    @Test func unknownEnumValuesFromTheWireBecomeUnknown() throws {
        var wire = savedShareWire()
        wire.shareFields?.participants[1].role = .unrecognized(9)
        wire.shareFields?.participants[1].permission = .unrecognized(9)
        wire.shareFields?.participants[1].acceptanceStatus = .unrecognized(9)
        wire.shareFields?.publicPermission = .unrecognized(9)
        let share = try CKShare(shareRecord: wire)
        #expect(share.participants[1].role == .unknown)
        #expect(share.participants[1].permission == .unknown)
        #expect(share.participants[1].acceptanceStatus == .unknown)
        #expect(share.publicPermission == .none)
    }

    @Test func aRecordOfAnotherTypeIsNoShare() {
        var wire = savedShareWire()
        wire.recordType = "Note"
        #expect(throws: CKError.self) { try CKShare(shareRecord: wire) }
    }

    @Test func aCopyIsAShareWithItsOwnParticipants() throws {
        let share = try CKShare(shareRecord: savedShareWire())
        let copy = try #require(share.copy() as? CKShare)
        copy.participants[1].permission = .readOnly
        copy.publicPermission = .none
        #expect(share.participants[1].permission == .readWrite)
        #expect(share.publicPermission == .readOnly)
        #expect(copy.url == share.url)
    }

    @Test func aShareRoundTripsThroughItsSystemFields() throws {
        let share = try CKShare(shareRecord: savedShareWire())
        let archiver = NSKeyedArchiver(requiringSecureCoding: true)
        share.encodeSystemFields(with: archiver)
        archiver.finishEncoding()
        let unarchiver = try NSKeyedUnarchiver(forReadingFrom: archiver.encodedData)
        unarchiver.requiresSecureCoding = true
        let restored = try #require(CKShare(coder: unarchiver))
        #expect(restored.recordID == share.recordID)
        #expect(restored.recordChangeTag == "t1")
        #expect(restored.participants.map(\.participantID) == ["p-owner", "p-bob"])
        #expect(restored.publicPermission == .readOnly)
        #expect(restored.url == share.url)
        #expect(restored.allKeys().isEmpty, "system fields only")
    }

    @Test func aShareAndARecordRoundTripWholeThroughNSSecureCoding() throws {
        let share = try CKShare(shareRecord: savedShareWire())
        let data = try NSKeyedArchiver.archivedData(withRootObject: share, requiringSecureCoding: true)
        let restored = try #require(
            try NSKeyedUnarchiver.unarchivedObject(ofClass: CKShare.self, from: data))
        #expect(restored.participants.count == 2)
        #expect(restored[CKShare.SystemFieldKey.title] as? String == "Summer")

        let note = CKRecord(recordType: "Note", recordID: CKRecord.ID(recordName: "n", zoneID: zone))
        note["title"] = "kept"
        let noteData = try NSKeyedArchiver.archivedData(withRootObject: note, requiringSecureCoding: true)
        let restoredNote = try #require(try NSKeyedUnarchiver.unarchivedObject(ofClass: CKRecord.self, from: noteData))
        #expect(restoredNote.recordID == note.recordID)
        #expect(restoredNote["title"] as? String == "kept")
    }

    @Test func metadataFromTheWireCarriesTheCallersStanding() throws {
        let wire = Wire.ShareMetadata(
            containerIdentifier: "iCloud.test", share: savedShareWire(),
            hierarchicalRootRecordID: Wire.RecordID(
                recordName: "a1", zoneID: Wire.RecordZoneID(zoneName: "Albums", ownerName: "_alice")),
            participantRole: .privateUser, participantStatus: .pending, participantPermission: .readWrite,
            ownerIdentity: Wire.UserIdentity(userRecordID: Wire.RecordID(recordName: "_alice")),
            shareURL: "https://cirrus.example:8443/share/iCloud.test/abc")
        let metadata = try CKShare.Metadata(wire: wire)
        #expect(metadata.containerIdentifier == "iCloud.test")
        #expect(metadata.share.recordID.recordName == "s1")
        #expect(metadata.hierarchicalRootRecordID?.recordName == "a1")
        #expect(metadata.rootRecord == nil)
        #expect(metadata.participantRole == .privateUser)
        #expect(metadata.participantStatus == .pending)
        #expect(metadata.participantPermission == .readWrite)
        #expect(metadata.ownerIdentity.userRecordID?.recordName == "_alice")
        #expect(metadata.wireMetadata.shareURL == wire.shareURL)
        #expect(metadata.wireMetadata.share?.recordID?.recordName == "s1")

        #expect(throws: CKError.self) { try CKShare.Metadata(wire: Wire.ShareMetadata(containerIdentifier: "x")) }
    }
}
