import CirrusWire
import Foundation

/// The record name of a zone-wide share (CloudKit's `CKRecordNameZoneWideShare`).
public let CKRecordNameZoneWideShare = "cloudkit.zoneshare"

/// A record that shares records with other users (`CKShare`): the records whose `parent` chain
/// reaches its root record (a hierarchy share, ``init(rootRecord:)``), or every record of a
/// zone (a zone-wide share, ``init(recordZoneID:)``).
///
/// Save a new hierarchy share in the same `CKModifyRecordsOperation` as its root record, in a
/// custom zone of the owner's private database. Its ``url`` is filled by the server; a person
/// who opens it fetches the share's ``Metadata`` and accepts it, and the shared records then
/// appear in their shared database.
///
/// For example:
/// ```swift
/// let share = CKShare(rootRecord: album)
/// share[CKShare.SystemFieldKey.title] = "Summer photos"
/// share.publicPermission = .none
/// share.addParticipant(bob)   // from CKFetchShareParticipantsOperation
/// _ = try await database.modifyRecords(saving: [album, share], deleting: [])
/// ```
///
/// `@unchecked Sendable` is safe for the same reason as ``CKRecord``'s: the share's own mutable
/// state lives in `shareState`, a `Locked` box only touched under its lock.
open class CKShare: CKRecord, @unchecked Sendable {
    /// The share-specific state, guarded by one lock.
    struct ShareState {
        /// Every participant but the owner, in the order they were added.
        var participants: [Participant] = []
        var owner: Participant = .placeholderOwner()
        var currentUserParticipant: Participant?
        var publicPermission: ParticipantPermission = .none
        var url: URL?
    }

    let shareState: Locked<ShareState>

    /// Keys of the fields CloudKit defines for shares (`CKShare.SystemFieldKey`).
    public enum SystemFieldKey {
        /// The share's title, shown to people it is shared with (a `String`).
        public static let title: CKRecord.FieldKey = "cloudkit.title"
        /// A thumbnail of what is shared (`Data` of an image).
        public static let thumbnailImageData: CKRecord.FieldKey = "cloudkit.thumbnailImageData"
        /// The kind of thing shared, as a uniform type identifier (a `String`).
        public static let shareType: CKRecord.FieldKey = "cloudkit.type"
    }

    /// A new share of the hierarchy whose root is `rootRecord`, with a unique name in the
    /// root's zone. Sets the root's ``CKRecord/share``; save both in one operation.
    public convenience init(rootRecord: CKRecord) {
        self.init(rootRecord: rootRecord, shareID: CKRecord.ID(zoneID: rootRecord.recordID.zoneID))
    }

    /// A new share of the hierarchy whose root is `rootRecord`, with the ID `shareID` (in the
    /// root's zone). Sets the root's ``CKRecord/share``; save both in one operation.
    public init(rootRecord: CKRecord, shareID: CKRecord.ID) {
        self.shareState = Locked(ShareState())
        super.init(recordType: SystemType.share, recordID: shareID, state: State())
        rootRecord.withState { $0.share = Reference(recordID: shareID, action: .none) }
    }

    /// A new share of every record in the zone `recordZoneID` (record name
    /// ``CKRecordNameZoneWideShare``). The zone must be a custom zone of the owner's private
    /// database.
    public init(recordZoneID: CKRecordZone.ID) {
        self.shareState = Locked(ShareState())
        super.init(
            recordType: SystemType.share,
            recordID: CKRecord.ID(recordName: CKRecordNameZoneWideShare, zoneID: recordZoneID),
            state: State())
    }

    init(recordID: ID, state: State, shareState: ShareState) {
        self.shareState = Locked(shareState)
        super.init(recordType: SystemType.share, recordID: recordID, state: state)
    }

    /// A share rebuilt from what `encodeSystemFields(with:)` or `encode(with:)` wrote; nil when
    /// `coder` holds no share.
    public required convenience init?(coder: NSCoder) {
        guard let decoded = CKRecord.decodedWire(from: coder),
            let share = try? CKShare(shareRecord: decoded.record, localAssetFiles: decoded.assetFiles)
        else {
            return nil
        }
        self.init(recordID: share.recordID, state: share.withState { $0 }, shareState: share.shareState.withLock { $0 })
    }

    /// Whether the share covers a whole zone (``init(recordZoneID:)``) rather than a hierarchy.
    public var isZoneWide: Bool { recordID.recordName == CKRecordNameZoneWideShare }

    // MARK: Participants

    /// Who may open the share without being invited: `.none` (only participants), `.readOnly`
    /// or `.readWrite` (anyone with the ``url``).
    public var publicPermission: ParticipantPermission {
        get { shareState.withLock { $0.publicPermission } }
        set { shareState.withLock { $0.publicPermission = newValue == .unknown ? .none : newValue } }
    }

    /// Every participant, the owner first.
    public var participants: [Participant] {
        shareState.withLock { [$0.owner] + $0.participants }
    }

    /// The user who created the share.
    public var owner: Participant { shareState.withLock { $0.owner } }

    /// The caller's own participant, when the server knows the caller is one.
    public var currentUserParticipant: Participant? { shareState.withLock { $0.currentUserParticipant } }

    /// The share's URL, filled by the server when the share is saved; nil before.
    public var url: URL? { shareState.withLock { $0.url } }

    /// Adds `participant` (typically from `CKFetchShareParticipantsOperation`) as a private
    /// user; one already in the share (the same participant ID or user) is left as it is.
    /// The owner is never added twice.
    public func addParticipant(_ participant: Participant) {
        shareState.withLock { state in
            guard !state.owner.isSamePerson(as: participant),
                !state.participants.contains(where: { $0.isSamePerson(as: participant) })
            else { return }
            if participant.role == .owner || participant.role == .unknown { participant.role = .privateUser }
            if participant.permission == .unknown || participant.permission == .none {
                participant.permission = .readOnly
            }
            state.participants.append(participant)
        }
    }

    /// Removes `participant` (the same participant ID or user); once saved, they lose access.
    /// The owner cannot be removed.
    public func removeParticipant(_ participant: Participant) {
        shareState.withLock { state in
            state.participants.removeAll { $0.isSamePerson(as: participant) }
        }
    }

    // MARK: Copying

    open override func copy(with zone: NSZone? = nil) -> Any {
        let shareState = self.shareState.withLock { state in
            var copied = state
            copied.participants = state.participants.map { $0.copied() }
            return copied
        }
        return CKShare(recordID: recordID, state: withState { $0 }, shareState: shareState)
    }

    override func wireShareFields() -> Wire.ShareFields? {
        self.shareState.withLock { $0.wire }
    }
}
