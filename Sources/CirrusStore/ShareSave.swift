import CirrusWire
import Foundation

/// One participant of a share as every engine keeps it (a `share_participants` row, and the
/// share record's entry for it).
package struct ShareParticipantRow: Sendable, Hashable {
    package var id: String
    /// The user record name; nil while an invitation names someone the directory does not know.
    package var user: String?
    package var role: Wire.ShareParticipantRole
    package var permission: Wire.ShareParticipantPermission
    package var status: Wire.ShareParticipantAcceptanceStatus
    package var identity: Wire.UserIdentity

    package init(
        id: String, user: String?, role: Wire.ShareParticipantRole, permission: Wire.ShareParticipantPermission,
        status: Wire.ShareParticipantAcceptanceStatus, identity: Wire.UserIdentity = Wire.UserIdentity()
    ) {
        self.id = id
        self.user = user
        self.role = role
        self.permission = permission
        self.status = status
        self.identity = identity
    }

    var wire: Wire.ShareParticipant {
        Wire.ShareParticipant(participantID: id, userIdentity: identity, role: role, acceptanceStatus: status, permission: permission)
    }

    /// The participant as ``ShareEntry`` lists it.
    package var entry: ShareParticipantEntry {
        ShareParticipantEntry(
            participantID: id, user: user, role: ShareRole(rawValue: role.rawValue) ?? .privateUser,
            permission: SharePermission(rawValue: permission.rawValue) ?? .readOnly,
            status: ShareAcceptanceStatus(rawValue: status.rawValue) ?? .pending)
    }
}

/// A share as a write finds it stored: what saving its record again keeps.
package struct StoredShare: Sendable {
    /// The root of a hierarchy share; nil for a zone-wide share.
    package var rootName: String?
    package var token: String
    package var participants: [ShareParticipantRow]

    package init(rootName: String?, token: String, participants: [ShareParticipantRow]) {
        self.rootName = rootName
        self.token = token
        self.participants = participants
    }
}

/// A share save whose checks passed: the share's row and participants an engine writes.
package struct PreparedShare: Sendable {
    /// The root record of a hierarchy share; nil for a zone-wide share.
    package var rootName: String?
    package var token: String
    package var publicPermission: Wire.ShareParticipantPermission
    package var participants: [ShareParticipantRow]
}

/// The users a share's participants name, as the user directory answers: the user record
/// names it knows and the owners of lookup values. An engine reads them however suits it
/// (SQLite one at a time, PostgreSQL all at once, ``questions(in:)``).
package struct ShareDirectoryAnswers {
    /// Whether the directory has the user `name`.
    package var userExists: (String) throws -> Bool
    /// The user holding a lookup value, or nil.
    package var owner: (DirectoryRules.StoredLookup) throws -> String?

    package init(
        userExists: @escaping (String) throws -> Bool, owner: @escaping (DirectoryRules.StoredLookup) throws -> String?
    ) {
        self.userExists = userExists
        self.owner = owner
    }

    /// What resolving `participants` asks the directory: user record names and lookup values.
    package static func questions(in participants: [Wire.ShareParticipant]) -> (names: [String], lookups: [DirectoryRules.StoredLookup]) {
        var names: [String] = []
        var lookups: [DirectoryRules.StoredLookup] = []
        for participant in participants {
            switch question(of: participant) {
            case .name(let name): names.append(name)
            case .lookup(let lookup): lookups.append(lookup)
            case nil: continue
            }
        }
        return (names, lookups)
    }

    private enum Question {
        case name(String)
        case lookup(DirectoryRules.StoredLookup)
    }

    /// What names the participant's user: its user record ID, else the user record ID, email
    /// address or phone number of its lookup info.
    private static func question(of participant: Wire.ShareParticipant) -> Question? {
        if let name = participant.userIdentity?.userRecordID?.recordName, UserLookup.isValidUserRecordName(name) {
            return .name(name)
        }
        guard let info = participant.userIdentity?.lookupInfo else { return nil }
        if let name = info.userRecordID?.recordName, UserLookup.isValidUserRecordName(name) { return .name(name) }
        if let email = UserLookup.normalizedEmail(info.emailAddress) { return .lookup((.email, email)) }
        if let phone = UserLookup.normalizedPhone(info.phoneNumber) { return .lookup((.phone, phone)) }
        return nil
    }

    /// The user a participant names; nil when the directory knows no such user.
    func user(of participant: Wire.ShareParticipant) throws -> String? {
        switch Self.question(of: participant) {
        case .name(let name): try userExists(name) ? name : nil
        case .lookup(let lookup): try owner(lookup)
        case nil: nil
        }
    }
}

extension ShareRules {
    /// Runs the checks of saving the share `record` in the zone `zoneName` of `key`'s database
    /// (``checkPlacement(of:zoneName:in:)`` ran before) and fills its server-kept share fields:
    /// the participants with their IDs and statuses, the owner, the public permission and the
    /// URL.
    ///
    /// - parameter stored: the share as stored, nil for a new one.
    /// - parameter zoneHasOtherKind: whether the zone has another share of the other kind
    ///   (hierarchy shares for a zone-wide share, a zone-wide share for a hierarchy share).
    /// - parameter newRoot: the record the request saves as this share's root, if any.
    ///
    /// A new hierarchy share needs its root in the same request; a zone that mixes zone-wide
    /// and hierarchy sharing is `alreadyShared`.
    package static func prepareShare(
        _ record: inout Wire.Record, zoneName: String, in key: DatabaseKey, stored: StoredShare?, zoneHasOtherKind: Bool,
        newRoot: String?, directory: ShareDirectoryAnswers
    ) throws -> ItemResult<PreparedShare> {
        let name = record.recordID?.recordName ?? ""
        let isZoneWide = name == zoneShareName
        if zoneHasOtherKind {
            return .failure(
                ItemFailure(
                    .alreadyShared,
                    isZoneWide
                        ? "zone \(zoneName) already has hierarchy shares; a zone is shared either whole or by hierarchy"
                        : "zone \(zoneName) is shared as a whole; a record in it cannot have a share of its own"))
        }
        var rootName: String?
        if !isZoneWide {
            if let stored {
                rootName = stored.rootName
            } else if let newRoot {
                rootName = newRoot
            } else {
                return .failure(
                    ItemFailure(
                        .invalidArguments,
                        "share \(name): a new share is saved with its root record in the same operation (the root's share names it)"))
            }
        }
        let fields = record.shareFields ?? Wire.ShareFields()
        let participants: [ShareParticipantRow]
        switch try self.participants(
            fields.participants, previous: stored?.participants ?? [], owner: key.owner, share: name, directory: directory)
        {
        case .failure(let failure): return .failure(failure)
        case .success(let list): participants = list
        }
        let token = stored?.token ?? newToken()
        let publicPermission: Wire.ShareParticipantPermission =
            switch fields.publicPermission {
            case .readOnly, .readWrite: fields.publicPermission
            default: .none
            }
        record.shareFields = Wire.ShareFields(
            participants: participants.map(\.wire), publicPermission: publicPermission,
            owner: participants.first?.wire, currentUserParticipant: nil,
            url: urlPath(container: key.container, token: token))
        return .success(
            PreparedShare(
                rootName: rootName, token: token, publicPermission: publicPermission,
                participants: participants))
    }

    /// The participants to keep: the owner (the database's owner) first, then everyone the
    /// client listed, each resolved to a user where the directory knows them, keeping the ID
    /// and acceptance of a participant already in the share; newcomers are pending.
    private static func participants(
        _ requested: [Wire.ShareParticipant], previous: [ShareParticipantRow], owner: String, share name: String,
        directory: ShareDirectoryAnswers
    ) throws -> ItemResult<[ShareParticipantRow]> {
        let previousOwner = previous.first { $0.role == .owner }
        var result = [
            ShareParticipantRow(
                id: previousOwner?.id ?? UUID().uuidString, user: owner, role: .owner, permission: .readWrite,
                status: .accepted,
                identity: Wire.UserIdentity(userRecordID: ZoneResolution.userRecordID(owner), hasIcloudAccount: true))
        ]
        for participant in requested {
            let recordName = participant.userIdentity?.userRecordID?.recordName
            if participant.role == .owner || recordName == owner || recordName == ZoneOwnerNames.currentUser {
                continue
            }
            let user = try directory.user(of: participant)
            let match = previous.first { old in
                (!participant.participantID.isEmpty && old.id == participant.participantID)
                    || (user != nil && old.user == user)
            }
            if user == nil && match == nil && participant.userIdentity?.lookupInfo == nil {
                return .failure(
                    ItemFailure(
                        .invalidArguments, "share \(name): a participant names no user record ID, email address or phone number"))
            }
            if result.contains(where: { ($0.user != nil && $0.user == user) || (match != nil && $0.id == match?.id) }) {
                continue
            }
            var identity = participant.userIdentity ?? Wire.UserIdentity()
            identity.userRecordID = (user ?? match?.user).map(ZoneResolution.userRecordID)
            identity.hasIcloudAccount = (user ?? match?.user) != nil
            identity.contactIdentifiers = []
            let permission: Wire.ShareParticipantPermission =
                participant.permission == .readWrite ? .readWrite : .readOnly
            // One who left stays removed (the owner removes them from the list and adds them
            // again to invite them again).
            let status: Wire.ShareParticipantAcceptanceStatus = match?.status ?? .pending
            result.append(
                ShareParticipantRow(
                    id: match?.id ?? UUID().uuidString, user: user ?? match?.user,
                    role: match?.role == .publicUser ? .publicUser : .privateUser, permission: permission, status: status,
                    identity: identity))
        }
        guard result.count <= maximumParticipants else {
            return .failure(
                ItemFailure(
                    .tooManyParticipants,
                    "share \(name) has \(result.count) participants; a share has at most \(maximumParticipants)"))
        }
        return .success(result)
    }

    /// The `share` a saved record keeps: what the server has (`server`), unless the request
    /// also saves the share the client names and names this record its root (a new share,
    /// `shareRoots` by share name). A record whose stored share still exists
    /// (`storedShareExists`) cannot become the root of another: `alreadyShared`.
    package static func shareReference(
        for client: Wire.Record, server: Wire.Record?, zoneName: String, in key: DatabaseKey,
        shareRoots: [String: String], storedShareExists: (String) throws -> Bool
    ) throws -> ItemResult<Wire.Reference?> {
        let name = client.recordID?.recordName ?? ""
        let current = server?.share?.recordID?.recordName
        guard let requested = client.share?.recordID?.recordName, requested != current, shareRoots[requested] == name
        else {
            return .success(server?.share)
        }
        if let current, try storedShareExists(current) {
            return .failure(ItemFailure(.alreadyShared, "record \(name) is already the root of share \(current)"))
        }
        return .success(
            Wire.Reference(
                recordID: Wire.RecordID(recordName: requested, zoneID: ZoneResolution.zoneID(zoneName, in: key)),
                action: .none))
    }

    /// The refusal of a participant's write of a record that is not in a share they may change
    /// (the same whether it exists or not).
    package static func notInScope(_ name: String) -> ItemFailure {
        ItemFailure(.permissionFailure, "record \(name) is not part of a share you may change")
    }
}

/// Accepting and leaving a share: what changes in its participants, the same in every engine.
package enum ShareMembership {
    /// What `user` accepting `share` changes: nil when they may not accept it or need not
    /// (the owner, or accepted already: `unchanged` true); else the participant to mark
    /// accepted, `isNew` when they join as a public user.
    package struct Acceptance: Sendable {
        package var participant: ShareParticipantRow
        package var isNew: Bool
    }

    /// Nil with `unchanged` false: `user` may not accept `share`.
    package static func acceptance(of share: ShareEntry, by user: String) -> (acceptance: Acceptance?, unchanged: Bool) {
        guard let standing = share.standing(of: user) else { return (nil, false) }
        if standing.role == .owner || standing.status == .accepted { return (nil, true) }
        let isNew = standing.participantID.isEmpty
        let participant = ShareParticipantRow(
            id: isNew ? UUID().uuidString : standing.participantID, user: user,
            role: isNew ? .publicUser : Wire.ShareParticipantRole(rawValue: standing.role.rawValue),
            permission: Wire.ShareParticipantPermission(rawValue: standing.permission.rawValue), status: .accepted,
            identity: Wire.UserIdentity(userRecordID: ZoneResolution.userRecordID(user), hasIcloudAccount: true))
        return (Acceptance(participant: participant, isNew: isNew), false)
    }

    /// The share record's fields after `acceptance`.
    package static func accept(_ acceptance: Acceptance, in fields: inout Wire.ShareFields) {
        let id = acceptance.participant.id
        if let index = fields.participants.firstIndex(where: { $0.participantID == id }) {
            fields.participants[index].acceptanceStatus = .accepted
        } else {
            fields.participants.append(acceptance.participant.wire)
        }
    }

    /// The participant `user` is of `share` when they may leave it (not the owner, not
    /// removed already).
    package static func leaving(_ share: ShareEntry, by user: String) -> ShareParticipantEntry? {
        guard user != share.owner, let participant = share.participant(user), participant.status != .removed else {
            return nil
        }
        return participant
    }

    /// The share record's fields after the participant `participantID` left.
    package static func leave(_ participantID: String, in fields: inout Wire.ShareFields) {
        for index in fields.participants.indices where fields.participants[index].participantID == participantID {
            fields.participants[index].acceptanceStatus = .removed
        }
    }
}
