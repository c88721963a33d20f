import CirrusKit
import Foundation
import NIOConcurrencyHelpers
import Testing

/// Shares as CloudKit code makes and opens them, against the whole stack: alice owns, bob and
/// dave are invited (bob by user record ID, dave by email), carol is a stranger.
@Suite("Sharing end to end", .timeLimit(.minutes(5)))
struct SharingEndToEndTests {
    private let zone = CKRecordZone.ID(zoneName: "Albums")

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

    /// Alice's album shared with the given participants; the saved share.
    private func shareAlbum(
        _ alice: CKContainer, with participants: [CKShare.Participant], publicPermission: CKShare.ParticipantPermission = .none
    ) async throws -> CKShare {
        _ = try await alice.privateCloudDatabase.save(CKRecordZone(zoneID: zone))
        let album = CKRecord(recordType: "Album", recordID: CKRecord.ID(recordName: "album", zoneID: zone))
        album["title"] = "Summer"
        let share = CKShare(rootRecord: album)
        share[CKShare.SystemFieldKey.title] = "Summer photos"
        share.publicPermission = publicPermission
        for participant in participants { share.addParticipant(participant) }
        let (saved, _) = try await alice.privateCloudDatabase.modifyRecords(saving: [album, share], deleting: [])
        let savedShare = try #require(try saved[share.recordID]?.get() as? CKShare)
        let savedAlbum = try #require(try saved[album.recordID]?.get())
        #expect(savedAlbum.share?.recordID == share.recordID)
        return savedShare
    }

    @Test func aParticipantFetchesTheMetadataAndAcceptsTheShare() async throws {
        try await withStack { container in
            let alice = container("alice")
            let bob = container("bob")
            let dave = container("dave")
            for user in [alice, bob, dave] { _ = try await user.userRecordID() }

            let bobParticipant = try await alice.shareParticipant(
                for: CKUserIdentity.LookupInfo(userRecordID: CKRecord.ID(recordName: "_bob")))
            #expect(bobParticipant.userIdentity.hasiCloudAccount)
            bobParticipant.permission = .readWrite
            let daveParticipant = try await alice.shareParticipant(for: CKUserIdentity.LookupInfo(emailAddress: "dave@example.com"))
            #expect(daveParticipant.userIdentity.userRecordID?.recordName == "_dave")
            let share = try await shareAlbum(alice, with: [bobParticipant, daveParticipant])

            let url = try #require(share.url)
            #expect(url.scheme == "https")
            #expect(url.path.hasPrefix("/share/iCloud.com.example.notes/"))
            #expect(share.owner.userIdentity.userRecordID?.recordName == "_alice")
            #expect(share.currentUserParticipant?.role == .owner)
            #expect(share.participants.count == 3)
            #expect(share[CKShare.SystemFieldKey.title] as? String == "Summer photos")

            // Bob opens the URL: he is a pending read-write private user.
            let metadata = try await bob.shareMetadata(for: url)
            #expect(metadata.participantRole == .privateUser)
            #expect(metadata.participantStatus == .pending)
            #expect(metadata.participantPermission == .readWrite)
            #expect(metadata.ownerIdentity.userRecordID?.recordName == "_alice")
            #expect(metadata.hierarchicalRootRecordID?.recordName == "album")
            #expect(metadata.hierarchicalRootRecordID?.zoneID.ownerName == "_alice")
            #expect(metadata.share.currentUserParticipant?.userIdentity.userRecordID?.recordName == "_bob")
            #expect(metadata.rootRecord == nil)

            let accepted = try await bob.accept(metadata)
            #expect(accepted.currentUserParticipant?.acceptanceStatus == .accepted)
            #expect(try await bob.shareMetadata(for: url).participantStatus == .accepted)

            // The owner sees bob accepted; dave still pending.
            let ownersView = try #require(
                try await alice.privateCloudDatabase.record(for: share.recordID) as? CKShare)
            let statuses = Dictionary(
                ownersView.participants.map { ($0.userIdentity.userRecordID?.recordName ?? "", $0.acceptanceStatus) },
                uniquingKeysWith: { first, _ in first })
            #expect(statuses == ["_alice": .accepted, "_bob": .accepted, "_dave": .pending])

            // With the root record, only the keys asked for.
            let operation = CKFetchShareMetadataOperation(shareURLs: [url])
            operation.shouldFetchRootRecord = true
            operation.rootRecordDesiredKeys = []
            let root = NIOLockedValueBox<CKRecord?>(nil)
            operation.perShareMetadataResultBlock = { _, result in
                root.withLockedValue { $0 = try? result.get().rootRecord }
            }
            dave.add(operation)
            await finished(operation)
            let fetchedRoot = try #require(root.withLockedValue { $0 })
            #expect(fetchedRoot.recordID.recordName == "album")
            #expect(fetchedRoot.allKeys().isEmpty)
        }
    }

    @Test func aStrangerLearnsNothingFromAURLAndCannotAccept() async throws {
        try await withStack { container in
            let alice = container("alice")
            let bob = container("bob")
            let carol = container("carol")
            for user in [alice, bob, carol] { _ = try await user.userRecordID() }
            let bobParticipant = try await alice.shareParticipant(
                for: CKUserIdentity.LookupInfo(userRecordID: CKRecord.ID(recordName: "_bob")))
            let share = try await shareAlbum(alice, with: [bobParticipant])
            let url = try #require(share.url)
            let bobsMetadata = try await bob.shareMetadata(for: url)

            // A real share's URL and a made-up one get the same answer.
            var components = try #require(URLComponents(url: url, resolvingAgainstBaseURL: false))
            components.path = components.path.replacingOccurrences(
                of: url.lastPathComponent, with: String(repeating: "0", count: 64))
            let madeUp = try #require(components.url)
            #expect(await code { _ = try await carol.shareMetadata(for: url) } == .unknownItem)
            #expect(await code { _ = try await carol.shareMetadata(for: madeUp) } == .unknownItem)
            #expect(await code { _ = try await carol.accept(bobsMetadata) } == .unknownItem)

            // Removing bob: he can no longer open or accept it.
            let ownersView = try #require(try await alice.privateCloudDatabase.record(for: share.recordID) as? CKShare)
            for participant in ownersView.participants where participant.role != .owner {
                ownersView.removeParticipant(participant)
            }
            _ = try await alice.privateCloudDatabase.save(ownersView)
            #expect(await code { _ = try await bob.shareMetadata(for: url) } == .unknownItem)
            #expect(await code { _ = try await bob.accept(bobsMetadata) } == .unknownItem)
        }
    }

    @Test func aPublicShareIsOpenToAnyoneWithItsURL() async throws {
        try await withStack { container in
            let alice = container("alice")
            let carol = container("carol")
            for user in [alice, carol] { _ = try await user.userRecordID() }
            let share = try await shareAlbum(alice, with: [], publicPermission: .readOnly)
            let url = try #require(share.url)
            let metadata = try await carol.shareMetadata(for: url)
            #expect(metadata.participantRole == .publicUser)
            #expect(metadata.participantPermission == .readOnly)
            #expect(metadata.participantStatus == .pending)
            let accepted = try await carol.accept(metadata)
            #expect(accepted.currentUserParticipant?.role == .publicUser)
            #expect(accepted.currentUserParticipant?.acceptanceStatus == .accepted)
            #expect(accepted.participants.count == 2)
        }
    }

    @Test func cloudKitsRefusalsOfMisplacedShares() async throws {
        try await withStack { container in
            let alice = container("alice")
            func failure(_ result: Result<CKRecord, any Error>?) -> CKError.Code? {
                if case .failure(let error)? = result { return (error as? CKError)?.code } else { return nil }
            }
            // In the default zone: the share is refused, and with it the atomic zone's root.
            let note = CKRecord(recordType: "Note")
            let share = CKShare(rootRecord: note)
            let (saved, _) = try await alice.privateCloudDatabase.modifyRecords(saving: [note, share], deleting: [])
            #expect(failure(saved[share.recordID]) == .serverRejectedRequest)
            #expect(failure(saved[note.recordID]) == .batchRequestFailed)
            // In the public database.
            let zoneShare = CKShare(recordZoneID: .default)
            let (publicSaved, _) = try await alice.publicCloudDatabase.modifyRecords(saving: [zoneShare], deleting: [])
            #expect(failure(publicSaved[zoneShare.recordID]) == .serverRejectedRequest)
            // A zone-wide share of a custom zone is fine.
            _ = try await alice.privateCloudDatabase.save(CKRecordZone(zoneID: zone))
            let wide = try #require(try await alice.privateCloudDatabase.save(CKShare(recordZoneID: zone)) as? CKShare)
            #expect(wide.recordID.recordName == CKRecordNameZoneWideShare)
            #expect(wide.url != nil)
        }
    }
}
