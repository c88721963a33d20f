import CirrusWire
import Foundation

extension CKShare {
    /// A share from a wire message, as the server sent it: the record part as
    /// `CKRecord(wire:)` decodes it, then the participants, owner, public permission and URL of
    /// its `share_fields` (absent = a share nobody but its owner is in yet).
    ///
    /// `fields`, when given, stand in for `wire.fields`, `sentValues` for their decoding, and
    /// `knownID` for a new ID object (see `CKRecord.decoded(wire:fields:…)`).
    ///
    /// - throws: `CKError` `.invalidArguments` for a record that is not of type
    ///   `cloudkit.share`, and whatever `CKRecord(wire:)` throws.
    package convenience init(
        shareRecord wire: Wire.Record, fields: [Wire.RecordField]? = nil, sentValues: SentFieldValues? = nil,
        knownID: CKRecord.ID? = nil, knownUserID: CKRecord.ID? = nil, assetDirectory: URL? = nil, localAssetFiles: [[UInt8]: URL] = [:]
    ) throws(CKError) {
        let (recordType, recordID, state) = try CKRecord.decodedParts(
            of: wire, fields: fields, sentValues: sentValues, knownID: knownID, knownUserID: knownUserID,
            assetDirectory: assetDirectory, localAssetFiles: localAssetFiles)
        guard recordType == SystemType.share else {
            throw CKError(
                .invalidArguments,
                message: "record \(recordID.recordName) of type \(recordType) is not a share")
        }
        var shareState = ShareState()
        if let fields = wire.shareFields {
            let all = fields.participants.map(Participant.init(wire:))
            let owner = fields.owner.map(Participant.init(wire:)) ?? all.first { $0.role == .owner }
            if let owner { shareState.owner = owner }
            shareState.participants = all.filter { $0.role != .owner && !$0.isSamePerson(as: shareState.owner) }
            shareState.currentUserParticipant = fields.currentUserParticipant.map(Participant.init(wire:))
            let permission = ParticipantPermission(wire: fields.publicPermission)
            shareState.publicPermission = permission == .unknown ? .none : permission
            shareState.url = fields.url.isEmpty ? nil : URL(string: fields.url)
        }
        self.init(recordID: recordID, state: state, shareState: shareState)
    }
}

extension CKShare.ShareState {
    /// The share fields a save sends: every participant, the owner first, and the public
    /// permission (the server fills the rest).
    var wire: Wire.ShareFields {
        Wire.ShareFields(
            participants: ([owner] + participants).map(\.wireParticipant),
            publicPermission: publicPermission.wire,
            owner: owner.wireParticipant,
            currentUserParticipant: currentUserParticipant?.wireParticipant,
            url: url?.absoluteString ?? "")
    }
}

extension CKShare.Participant {
    /// The participant a server sent.
    package convenience init(wire: Wire.ShareParticipant) {
        self.init(
            userIdentity: wire.userIdentity.map(CKUserIdentity.init(wire:))
                ?? CKUserIdentity(userRecordID: nil, lookupInfo: nil, nameComponents: nil, hasiCloudAccount: false),
            role: CKShare.ParticipantRole(wire: wire.role),
            permission: CKShare.ParticipantPermission(wire: wire.permission),
            acceptanceStatus: CKShare.ParticipantAcceptanceStatus(wire: wire.acceptanceStatus),
            participantID: wire.participantID)
    }

    /// The participant as a wire message.
    package var wireParticipant: Wire.ShareParticipant {
        Wire.ShareParticipant(
            participantID: participantID, userIdentity: userIdentity.wireIdentity, role: role.wire,
            acceptanceStatus: acceptanceStatus.wire, permission: permission.wire)
    }
}

extension CKShare.ParticipantRole {
    /// The role a wire value names; `.unknown` for one this version does not know.
    package init(wire: Wire.ShareParticipantRole) {
        self = Self(rawValue: Int(wire.rawValue)) ?? .unknown
    }

    package var wire: Wire.ShareParticipantRole { Wire.ShareParticipantRole(rawValue: Int32(rawValue)) }
}

extension CKShare.ParticipantPermission {
    /// The permission a wire value names; `.unknown` for one this version does not know.
    package init(wire: Wire.ShareParticipantPermission) {
        self = Self(rawValue: Int(wire.rawValue)) ?? .unknown
    }

    package var wire: Wire.ShareParticipantPermission { Wire.ShareParticipantPermission(rawValue: Int32(rawValue)) }
}

extension CKShare.ParticipantAcceptanceStatus {
    /// The status a wire value names; `.unknown` for one this version does not know.
    package init(wire: Wire.ShareParticipantAcceptanceStatus) {
        self = Self(rawValue: Int(wire.rawValue)) ?? .unknown
    }

    package var wire: Wire.ShareParticipantAcceptanceStatus {
        Wire.ShareParticipantAcceptanceStatus(rawValue: Int32(rawValue))
    }
}
