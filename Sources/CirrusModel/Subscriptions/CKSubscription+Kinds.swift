import Foundation

/// Fires when a record of a type starts matching a predicate, changes while matching, or
/// stops matching (CloudKit's `CKQuerySubscription`). Not available in the shared database.
///
/// For example:
/// ```swift
/// let subscription = CKQuerySubscription(
///     recordType: "Note",
///     predicate: CKPredicate(format: "priority > %d", 5),
///     subscriptionID: "urgent-notes",
///     options: [.firesOnRecordCreation, .firesOnRecordUpdate]
/// )
/// ```
open class CKQuerySubscription: CKSubscription, @unchecked Sendable {
    // @unchecked Sendable: as CKSubscription — `zone` is `Locked`, the rest are `let`s.

    /// When the subscription fires (Apple's raw values).
    public struct Options: OptionSet, Hashable, Sendable {
        public let rawValue: UInt
        public init(rawValue: UInt) { self.rawValue = rawValue }

        /// A matching record was created.
        public static let firesOnRecordCreation = Options(rawValue: 1 << 0)
        /// A matching record changed.
        public static let firesOnRecordUpdate = Options(rawValue: 1 << 1)
        /// A matching record was deleted.
        public static let firesOnRecordDeletion = Options(rawValue: 1 << 2)
        /// The server deletes the subscription after it first fires.
        public static let firesOnce = Options(rawValue: 1 << 3)
    }

    /// The type of the records the subscription watches.
    public let recordType: CKRecord.RecordType
    /// The condition the records must meet (`NSPredicate` in CloudKit).
    public let predicate: CKPredicate
    /// When the subscription fires.
    public let querySubscriptionOptions: Options
    private let zone: Locked<CKRecordZone.ID?>

    /// A query subscription with an ID of your choice.
    public init(recordType: CKRecord.RecordType, predicate: CKPredicate, subscriptionID: CKSubscription.ID, options: Options = []) {
        self.recordType = recordType
        self.predicate = predicate
        self.querySubscriptionOptions = options
        self.zone = Locked(nil)
        super.init(subscriptionID: subscriptionID, subscriptionType: .query)
    }

    /// A query subscription with a new unique ID.
    public convenience init(recordType: CKRecord.RecordType, predicate: CKPredicate, options: Options = []) {
        self.init(recordType: recordType, predicate: predicate, subscriptionID: UUID().uuidString, options: options)
    }

    /// Only records in this zone; nil = every zone of the database.
    open var zoneID: CKRecordZone.ID? {
        get { self.zone.withLock { $0 } }
        set { self.zone.withLock { $0 = newValue } }
    }

    open override var description: String {
        "<CKQuerySubscription: subscriptionID=\(self.subscriptionID), recordType=\(self.recordType), "
            + "predicate=\(self.predicate.predicateFormat), options=\(self.querySubscriptionOptions.rawValue)>"
    }
}

/// Fires on any change in one custom zone (CloudKit's `CKRecordZoneSubscription`). Not
/// available in the public database or the default zone.
///
/// For example:
/// ```swift
/// let subscription = CKRecordZoneSubscription(zoneID: CKRecordZone.ID(zoneName: "Notes"), subscriptionID: "notes-zone")
/// subscription.recordType = "Note"
/// ```
open class CKRecordZoneSubscription: CKSubscription, @unchecked Sendable {
    // @unchecked Sendable: as CKSubscription — `type` is `Locked`, the rest are `let`s.

    /// The zone the subscription watches.
    public let zoneID: CKRecordZone.ID
    private let type: Locked<CKRecord.RecordType?>

    /// A zone subscription with an ID of your choice.
    public init(zoneID: CKRecordZone.ID, subscriptionID: CKSubscription.ID) {
        self.zoneID = zoneID
        self.type = Locked(nil)
        super.init(subscriptionID: subscriptionID, subscriptionType: .recordZone)
    }

    /// A zone subscription with a new unique ID.
    public convenience init(zoneID: CKRecordZone.ID) {
        self.init(zoneID: zoneID, subscriptionID: UUID().uuidString)
    }

    /// Only changes of records of this type; nil = any type.
    open var recordType: CKRecord.RecordType? {
        get { self.type.withLock { $0 } }
        set { self.type.withLock { $0 = newValue } }
    }

    open override var description: String {
        "<CKRecordZoneSubscription: subscriptionID=\(self.subscriptionID), zoneID=\(self.zoneID)>"
    }
}

/// Fires on any change in the database (CloudKit's `CKDatabaseSubscription`): the usual
/// trigger for `CKFetchDatabaseChangesOperation`. Not available in the public database.
///
/// For example:
/// ```swift
/// let subscription = CKDatabaseSubscription(subscriptionID: "shared-changes")
/// try await container.sharedCloudDatabase.save(subscription)
/// ```
open class CKDatabaseSubscription: CKSubscription, @unchecked Sendable {
    // @unchecked Sendable: as CKSubscription — `type` is `Locked`.

    private let type: Locked<CKRecord.RecordType?>

    /// A database subscription with an ID of your choice.
    public init(subscriptionID: CKSubscription.ID) {
        self.type = Locked(nil)
        super.init(subscriptionID: subscriptionID, subscriptionType: .database)
    }

    /// A database subscription with a new unique ID.
    public convenience init() {
        self.init(subscriptionID: UUID().uuidString)
    }

    /// Only changes of records of this type; nil = any type.
    open var recordType: CKRecord.RecordType? {
        get { self.type.withLock { $0 } }
        set { self.type.withLock { $0 = newValue } }
    }
}
