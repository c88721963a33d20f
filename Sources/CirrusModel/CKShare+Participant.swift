import CirrusWire
import Foundation

extension CKShare {
    /// What a participant is to a share (`CKShare.ParticipantRole`); raw values are Apple's.
    public enum ParticipantRole: Int, Sendable, Hashable, CustomStringConvertible {
        case unknown = 0
        /// The user who created the share.
        case owner = 1
        /// A user the owner invited.
        case privateUser = 3
        /// A user who joined through the share's public URL.
        case publicUser = 4

        public var description: String {
            switch self {
            case .unknown: "unknown"
            case .owner: "owner"
            case .privateUser: "privateUser"
            case .publicUser: "publicUser"
            }
        }
    }

    /// What a participant may do with the shared records (`CKShare.ParticipantPermission`);
    /// also a share's ``CKShare/publicPermission``. Raw values are Apple's.
    public enum ParticipantPermission: Int, Sendable, Hashable, CustomStringConvertible {
        case unknown = 0
        /// No access.
        case none = 1
        /// Fetch and query.
        case readOnly = 2
        /// Fetch, query, save and delete.
        case readWrite = 3

        public var description: String {
            switch self {
            case .unknown: "unknown"
            case .none: "none"
            case .readOnly: "readOnly"
            case .readWrite: "readWrite"
            }
        }
    }

    /// Where a participant stands (`CKShare.ParticipantAcceptanceStatus`); raw values are Apple's.
    public enum ParticipantAcceptanceStatus: Int, Sendable, Hashable, CustomStringConvertible {
        case unknown = 0
        /// Invited, not yet accepted.
        case pending = 1
        /// Accepted: the shared records are in their shared database.
        case accepted = 2
        /// Removed by the owner, or left.
        case removed = 3

        public var description: String {
            switch self {
            case .unknown: "unknown"
            case .pending: "pending"
            case .accepted: "accepted"
            case .removed: "removed"
            }
        }
    }

    /// A person a share is shared with (`CKShare.Participant`): who they are, their role, what
    /// they may do, and whether they accepted. Get one from `CKFetchShareParticipantsOperation`,
    /// set its ``permission``, and add it with ``CKShare/addParticipant(_:)``.
    ///
    /// `@unchecked Sendable` is safe: the settable role and permission live in `mutable`, a
    /// `Locked` box only touched under its lock; everything else is `let`.
    public final class Participant: NSObject, @unchecked Sendable {
        struct Mutable {
            var role: ParticipantRole
            var permission: ParticipantPermission
        }

        /// Who the participant is.
        public let userIdentity: CKUserIdentity
        /// Whether they accepted the share, are still invited, or were removed.
        public let acceptanceStatus: ParticipantAcceptanceStatus
        /// The server's stable ID of this participant in this share; empty until the share
        /// with the participant is saved.
        public let participantID: String
        let mutable: Locked<Mutable>

        package init(
            userIdentity: CKUserIdentity, role: ParticipantRole, permission: ParticipantPermission,
            acceptanceStatus: ParticipantAcceptanceStatus, participantID: String
        ) {
            self.userIdentity = userIdentity
            self.acceptanceStatus = acceptanceStatus
            self.participantID = participantID
            self.mutable = Locked(Mutable(role: role, permission: permission))
            super.init()
        }

        /// The participant's role; set `.privateUser` or `.publicUser` before saving the share.
        public var role: ParticipantRole {
            get { mutable.withLock { $0.role } }
            set { mutable.withLock { $0.role = newValue } }
        }

        /// What the participant may do; the owner changes it and saves the share.
        public var permission: ParticipantPermission {
            get { mutable.withLock { $0.permission } }
            set { mutable.withLock { $0.permission = newValue } }
        }

        /// Whether `other` names the same person in a share: the same participant ID, or the
        /// same user record ID or lookup info when either has no ID yet.
        func isSamePerson(as other: Participant) -> Bool {
            if !participantID.isEmpty && participantID == other.participantID { return true }
            if let mine = userIdentity.userRecordID, let theirs = other.userIdentity.userRecordID {
                return mine.recordName == theirs.recordName
            }
            if let mine = userIdentity.lookupInfo, let theirs = other.userIdentity.lookupInfo {
                return mine == theirs
            }
            return false
        }

        /// An independent copy (so a copied share's participants change apart from the original's).
        func copied() -> Participant {
            Participant(
                userIdentity: userIdentity, role: role, permission: permission, acceptanceStatus: acceptanceStatus,
                participantID: participantID)
        }

        /// The owner of a share not saved yet: the current user (`__defaultOwner__`).
        static func placeholderOwner() -> Participant {
            Participant(
                userIdentity: CKUserIdentity(
                    userRecordID: CKRecord.ID(recordName: "__defaultOwner__"), lookupInfo: nil, nameComponents: nil,
                    hasiCloudAccount: true),
                role: .owner, permission: .readWrite, acceptanceStatus: .accepted, participantID: "")
        }

        public override var description: String {
            let name = userIdentity.userRecordID?.recordName ?? userIdentity.lookupInfo?.description ?? "unknown"
            return "<CKShare.Participant: \(name), role=\(role), permission=\(permission), status=\(acceptanceStatus)>"
        }
    }
}
