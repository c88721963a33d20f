import Foundation

/// The record name of the current user, resolved by the server: use it as `ownerName`
/// of zones you own.
///
/// For example:
/// ```swift
/// let zoneID = CKRecordZone.ID(zoneName: "Notes", ownerName: CKCurrentUserDefaultName)
/// ```
public let CKCurrentUserDefaultName = "__defaultOwner__"

/// A database partition that holds records (CloudKit's `CKRecordZone`).
///
/// Custom zones support change fetching and atomic saves; the default zone does not.
/// A zone value is immutable apart from `encryptionScope`, which you set before the
/// zone is first saved.
///
/// For example:
/// ```swift
/// let zone = CKRecordZone(zoneName: "Notes")
/// ```
public final class CKRecordZone: Sendable, Hashable, CustomStringConvertible {
    /// The zone's identity: its name and owner (``CKRecordZoneID``).
    public typealias ID = CKRecordZoneID

    /// What a zone supports (`CKRecordZone.Capabilities`).
    public struct Capabilities: OptionSet, Hashable, Sendable {
        public let rawValue: UInt
        public init(rawValue: UInt) { self.rawValue = rawValue }

        /// The zone supports `CKFetchRecordZoneChangesOperation`.
        public static let fetchChanges = Capabilities(rawValue: 1 << 0)
        /// The zone supports atomic (all-or-nothing) modify operations.
        public static let atomic = Capabilities(rawValue: 1 << 1)
        /// Records in the zone can be shared.
        public static let sharing = Capabilities(rawValue: 1 << 2)
        /// The whole zone can be shared with one share.
        public static let zoneWideSharing = Capabilities(rawValue: 1 << 3)
    }

    /// How the zone's encrypted fields are keyed (`CKRecordZone.EncryptionScope`).
    public enum EncryptionScope: Int, Hashable, Sendable {
        case perRecord = 0
        case perZone = 1
    }

    /// The zone's ID.
    public let zoneID: ID
    /// What the zone supports; filled by the server (custom zones: fetchChanges and atomic).
    public let capabilities: Capabilities
    /// The zone-wide share, if the zone is shared; filled by the server.
    public let share: CKRecord.Reference?
    private let scope: Locked<EncryptionScope>

    /// How encrypted fields in the zone are keyed; set it before the zone is first saved.
    public var encryptionScope: EncryptionScope {
        get { scope.withLock { $0 } }
        set { scope.withLock { $0 = newValue } }
    }

    /// A custom zone of the current user.
    public convenience init(zoneName: String) {
        self.init(zoneID: ID(zoneName: zoneName))
    }

    /// A zone with the given ID.
    public convenience init(zoneID: ID) {
        let capabilities: Capabilities = zoneID.zoneName == ID.defaultZoneName ? [] : [.fetchChanges, .atomic]
        self.init(zoneID: zoneID, capabilities: capabilities, share: nil, encryptionScope: .perRecord)
    }

    /// A zone with every property given; used when reading zones from the server.
    public init(zoneID: ID, capabilities: Capabilities, share: CKRecord.Reference?, encryptionScope: EncryptionScope) {
        self.zoneID = zoneID
        self.capabilities = capabilities
        self.share = share
        self.scope = Locked(encryptionScope)
    }

    /// The current user's default zone.
    public static func `default`() -> CKRecordZone {
        CKRecordZone(zoneID: .default)
    }

    /// Zones are equal only to themselves (identity), as `NSObject`s are; compare
    /// `zoneID`s to compare zones by name.
    public static func == (lhs: CKRecordZone, rhs: CKRecordZone) -> Bool { lhs === rhs }

    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }

    public var description: String {
        "<CKRecordZone: zoneID=\(zoneID), capabilities=\(capabilities.rawValue)>"
    }
}
