/// The shares a storage keeps (saved as `cloudkit.share` records through
/// ``RecordStorage/modifyRecords(_:in:by:)``), in domain terms: what a share URL names, who
/// takes part in a share, accepting one, and which zones are shared with a user. The server's
/// access policy decides from these what a caller may see.
///
/// For example:
/// ```swift
/// if let share = try await storage.share(withToken: token, in: "iCloud.com.example"),
///    let standing = share.standing(of: "_bob") {
///     print(standing.permission)
/// }
/// ```
public protocol ShareStorage: Sendable {
    /// The share whose URL carries `token` in `container`; nil when there is none.
    func share(withToken token: String, in container: String) async throws -> ShareEntry?

    /// Makes `user` an accepted participant of the share whose URL carries `token`: a pending
    /// participant accepts; anyone else joins as a public user when the share's public
    /// permission allows it. The share record changes with it (its participant list).
    ///
    /// - returns: the share after acceptance, or nil when there is no such share or `user`
    ///   may not accept it (removed, or not invited to a private share): the caller cannot
    ///   tell the two apart.
    func acceptShare(withToken token: String, in container: String, by user: String) async throws -> ShareEntry?

    /// Takes `user` out of the share `shareRecordName` in `zoneName` of `owner`'s private
    /// database (a participant leaving: CloudKit's deleting the share from their shared
    /// database). Their participant stays listed as removed; the share record changes with it.
    ///
    /// - returns: false when `user` is not a participant of such a share (or already left).
    func leaveShare(
        _ shareRecordName: String, inZone zoneName: String, of owner: String, in container: String, by user: String
    ) async throws -> Bool

    /// Every share of `container` in which `user` is an accepted participant (not the owner).
    func acceptedShares(of user: String, in container: String) async throws -> [ShareEntry]

    /// A number that changes whenever a share changes (saved, deleted, accepted, left, a
    /// participant removed, its zone deleted) — by this storage or anyone else writing the same
    /// data (another process, maintenance commands) — in the transaction that changed it; nil
    /// when the storage keeps none. While it stays the same, ``acceptedShares(of:in:)`` answers
    /// the same, so an access policy compiled from it may be reused — read the number before
    /// the shares it goes with.
    var sharesGeneration: UInt64? { get }

    /// The shares each of the deleted records `names` of the zone `zoneName` in `owner`'s
    /// private database was in when it was deleted (as its tombstone keeps them), for the
    /// names that have a tombstone; a record deleted in no share maps to none.
    func sharesOfDeletedRecords(
        _ names: [String], inZone zoneName: String, of owner: String, in container: String
    ) async throws -> [String: Set<String>]

    /// The share of the zone `zoneName` of `owner`'s private database in which `user` may be,
    /// for the shared database's access checks: the zone-wide share, or every hierarchy
    /// share of the zone. Empty when the zone has none.
    func shares(inZone zoneName: String, of owner: String, in container: String) async throws -> [ShareEntry]

    /// The user each lookup names, for inviting them to a share (`CKFetchShareParticipantsOperation`):
    /// any enabled user of the directory, discoverable or not; nil for a lookup that names nobody.
    func shareableUsers(matching lookups: [UserLookup]) async throws -> [String?]
}

extension ShareStorage {
    /// No generation: every access check reads the shares.
    public var sharesGeneration: UInt64? { nil }

    /// No tombstones kept: a deleted record was in no share as far as anyone can tell.
    public func sharesOfDeletedRecords(
        _ names: [String], inZone zoneName: String, of owner: String, in container: String
    ) async throws -> [String: Set<String>] { [:] }
}

/// Share URLs: `https://<server>/share/<container>/<token>`, where the token is the share's
/// secret (64 hex digits). The store keeps the path; the server puts its address before it.
public enum ShareURL {
    /// The token `url` carries, or nil when it is no share URL.
    public static func token(in url: String) -> String? { ShareRules.token(inURL: url) }
}

/// What a participant may do (`CKShare.ParticipantPermission`, without `unknown`).
public enum SharePermission: Int32, Sendable, Hashable, Comparable {
    case none = 1
    case readOnly = 2
    case readWrite = 3

    public static func < (lhs: SharePermission, rhs: SharePermission) -> Bool { lhs.rawValue < rhs.rawValue }
}

/// A participant's role (`CKShare.ParticipantRole`).
public enum ShareRole: Int32, Sendable, Hashable {
    case owner = 1
    case privateUser = 3
    case publicUser = 4
}

/// A participant's standing (`CKShare.ParticipantAcceptanceStatus`).
public enum ShareAcceptanceStatus: Int32, Sendable, Hashable {
    case pending = 1
    case accepted = 2
    case removed = 3
}

/// One participant of a share.
public struct ShareParticipantEntry: Sendable, Hashable {
    public var participantID: String
    /// The user record name; nil while the invitation names someone the directory does not know.
    public var user: String?
    public var role: ShareRole
    public var permission: SharePermission
    public var status: ShareAcceptanceStatus

    public init(participantID: String, user: String?, role: ShareRole, permission: SharePermission, status: ShareAcceptanceStatus) {
        self.participantID = participantID
        self.user = user
        self.role = role
        self.permission = permission
        self.status = status
    }
}

/// A share as the storage keeps it: where its record is, what it shares, and who is in it.
public struct ShareEntry: Sendable, Hashable {
    public var container: String
    /// The owner's user record name (the share lives in their private database).
    public var owner: String
    public var zoneName: String
    /// The share record's name (`cloudkit.zoneshare` for a zone-wide share).
    public var recordName: String
    /// The root of a hierarchy share; nil for a zone-wide share.
    public var rootRecordName: String?
    public var publicPermission: SharePermission
    /// Every participant, the owner included.
    public var participants: [ShareParticipantEntry]

    public init(
        container: String, owner: String, zoneName: String, recordName: String, rootRecordName: String?,
        publicPermission: SharePermission, participants: [ShareParticipantEntry]
    ) {
        self.container = container
        self.owner = owner
        self.zoneName = zoneName
        self.recordName = recordName
        self.rootRecordName = rootRecordName
        self.publicPermission = publicPermission
        self.participants = participants
    }

    /// Whether the share covers its whole zone.
    public var isZoneWide: Bool { rootRecordName == nil }

    /// `user`'s participant entry, when they are one.
    public func participant(_ user: String) -> ShareParticipantEntry? {
        participants.first { $0.user == user }
    }

    /// What `user` is to this share before and after accepting it: the owner; a listed
    /// participant not removed; or, when the public permission allows, a public user (pending
    /// until they accept). Nil when the share is none of their business.
    public func standing(of user: String) -> ShareParticipantEntry? {
        if user == owner {
            return participant(user)
                ?? ShareParticipantEntry(participantID: "", user: user, role: .owner, permission: .readWrite, status: .accepted)
        }
        if let entry = participant(user) {
            return entry.status == .removed ? nil : entry
        }
        guard publicPermission != .none else { return nil }
        return ShareParticipantEntry(participantID: "", user: user, role: .publicUser, permission: publicPermission, status: .pending)
    }

    /// What an accepted participant `user` may do with the shared records; nil when they
    /// have not accepted (or are the owner, who reaches the zone through their private database).
    public func acceptedPermission(of user: String) -> SharePermission? {
        guard user != owner, let entry = participant(user), entry.status == .accepted else { return nil }
        return entry.permission
    }
}
