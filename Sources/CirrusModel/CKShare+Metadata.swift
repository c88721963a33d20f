import CirrusWire
import Foundation

extension CKShare {
    /// What a share URL resolves to for the caller (`CKShare.Metadata`): the share, its root,
    /// the caller's role, permission and status, and the owner. Fetch it with
    /// `CKContainer.fetchShareMetadata(with:)` and pass it to `CKContainer.accept(_:)`.
    ///
    /// For example:
    /// ```swift
    /// let metadata = try await container.shareMetadata(for: url)
    /// if metadata.participantStatus == .pending {
    ///     _ = try await container.accept(metadata)
    /// }
    /// ```
    public final class Metadata: NSObject, Sendable {
        /// The container the share lives in.
        public let containerIdentifier: String
        /// The share itself.
        public let share: CKShare
        /// The root of the shared hierarchy; nil for a zone-wide share.
        public let hierarchicalRootRecordID: CKRecord.ID?
        /// The root record, when the fetch asked for it (`shouldFetchRootRecord`).
        public let rootRecord: CKRecord?
        /// The caller's role in the share.
        public let participantRole: ParticipantRole
        /// Whether the caller accepted the share.
        public let participantStatus: ParticipantAcceptanceStatus
        /// What the caller may do with the shared records.
        public let participantPermission: ParticipantPermission
        /// The user who owns the share.
        public let ownerIdentity: CKUserIdentity
        /// The URL this metadata was fetched for.
        package let shareURL: String

        package init(
            containerIdentifier: String, share: CKShare, hierarchicalRootRecordID: CKRecord.ID?, rootRecord: CKRecord?,
            participantRole: ParticipantRole, participantStatus: ParticipantAcceptanceStatus,
            participantPermission: ParticipantPermission, ownerIdentity: CKUserIdentity, shareURL: String
        ) {
            self.containerIdentifier = containerIdentifier
            self.share = share
            self.hierarchicalRootRecordID = hierarchicalRootRecordID
            self.rootRecord = rootRecord
            self.participantRole = participantRole
            self.participantStatus = participantStatus
            self.participantPermission = participantPermission
            self.ownerIdentity = ownerIdentity
            self.shareURL = shareURL
            super.init()
        }

        public override var description: String {
            "<CKShare.Metadata: share=\(share.recordID), role=\(participantRole), status=\(participantStatus), permission=\(participantPermission)>"
        }
    }
}

// MARK: - Wire

extension CKShare.Metadata {
    /// The metadata a server sent.
    ///
    /// - throws: `CKError` `.invalidArguments` when it carries no share, a record that is not a
    ///   share, or IDs that do not decode.
    package convenience init(wire: Wire.ShareMetadata) throws(CKError) {
        guard let wireShare = wire.share else {
            throw CKError(.invalidArguments, message: "share metadata without a share")
        }
        let share = try CKShare(shareRecord: wireShare)
        let rootID = try wire.hierarchicalRootRecordID.map { (id) throws(CKError) in try CKRecord.ID(wire: id) }
        let root = try wire.rootRecord.map { (record) throws(CKError) in try CKRecord.decoded(wire: record) }
        self.init(
            containerIdentifier: wire.containerIdentifier, share: share, hierarchicalRootRecordID: rootID, rootRecord: root,
            participantRole: CKShare.ParticipantRole(wire: wire.participantRole),
            participantStatus: CKShare.ParticipantAcceptanceStatus(wire: wire.participantStatus),
            participantPermission: CKShare.ParticipantPermission(wire: wire.participantPermission),
            ownerIdentity: wire.ownerIdentity.map(CKUserIdentity.init(wire:)) ?? share.owner.userIdentity,
            shareURL: wire.shareURL)
    }

    /// The metadata as the accept request carries it back: its URL and the share's ID.
    package var wireMetadata: Wire.ShareMetadata {
        var share = Wire.Record()
        share.recordID = self.share.recordID.wireRecordID
        share.recordType = self.share.recordType
        return Wire.ShareMetadata(containerIdentifier: containerIdentifier, share: share, shareURL: shareURL)
    }
}
