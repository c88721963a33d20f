import Foundation

/// A notification a subscription produced (CloudKit's `CKNotification`). The server creates
/// one when a change matches a subscription, keeps it, and pushes it to the user's connected
/// clients; the subclass says what fired: `CKQueryNotification`, `CKRecordZoneNotification`,
/// `CKDatabaseNotification`.
///
/// For example:
/// ```swift
/// for try await notification in container.notifications() {
///     if let change = notification as? CKDatabaseNotification {
///         print("changes in the \(change.databaseScope) database")
///     }
///     savedToken = notification.changeToken
/// }
/// ```
open class CKNotification: @unchecked Sendable, CustomStringConvertible {
    // @unchecked Sendable: a non-final class cannot be checked; every stored property is a `let`
    // of a Sendable type.

    /// A notification's ID: the server's opaque string (CloudKit's `CKNotification.ID`).
    public struct ID: Hashable, Sendable, Codable, CustomStringConvertible {
        /// The server's string.
        public let rawValue: String

        public init(rawValue: String) {
            self.rawValue = rawValue
        }

        public var description: String { "<CKNotification.ID \(self.rawValue)>" }
    }

    /// The kinds of notification, with Apple's raw values.
    public enum NotificationType: Int, Hashable, Sendable {
        case query = 1
        case recordZone = 2
        /// A notification already marked read (only in `CKFetchNotificationChangesOperation`).
        case readNotification = 3
        case database = 4
    }

    /// What a notification carries besides its kind; one value so subclasses take it whole.
    struct Content: Sendable {
        var notificationID: ID?
        var notificationType: NotificationType
        var containerIdentifier: String?
        var subscriptionID: CKSubscription.ID?
        var subscriptionOwnerUserRecordID: CKRecord.ID?
        var isPruned = false
        var alertBody: String?
        var alertLocalizationKey: String?
        var alertLocalizationArgs: [String]?
        var title: String?
        var titleLocalizationKey: String?
        var titleLocalizationArgs: [String]?
        var subtitle: String?
        var subtitleLocalizationKey: String?
        var subtitleLocalizationArgs: [String]?
        var alertActionLocalizationKey: String?
        var alertLaunchImage: String?
        var badge: UInt32?
        var soundName: String?
        var category: String?
        var creationDate: Date?
        var changeToken: CKServerChangeToken?
        var isRead = false
    }

    let content: Content

    init(content: Content) {
        self.content = content
    }

    /// The server's ID of the notification.
    public var notificationID: ID? { self.content.notificationID }
    /// What kind of notification this is.
    public var notificationType: NotificationType { self.content.notificationType }
    /// The container whose data changed.
    public var containerIdentifier: String? { self.content.containerIdentifier }
    /// The subscription that fired.
    public var subscriptionID: CKSubscription.ID? { self.content.subscriptionID }
    /// The user who owns the subscription.
    public var subscriptionOwnerUserRecordID: CKRecord.ID? { self.content.subscriptionOwnerUserRecordID }
    /// Some content was left out to fit the server's limits: fetch what you need.
    public var isPruned: Bool { self.content.isPruned }
    /// Its user marked it read (`CKMarkNotificationsReadOperation`); set on notifications
    /// fetched with `CKFetchNotificationChangesOperation`, never on pushed ones.
    public var isRead: Bool { self.content.isRead }
    /// The alert's text.
    public var alertBody: String? { self.content.alertBody }
    /// The localized-strings key of the alert's format.
    public var alertLocalizationKey: String? { self.content.alertLocalizationKey }
    /// The values that fill `alertLocalizationKey`'s format.
    public var alertLocalizationArgs: [String]? { self.content.alertLocalizationArgs }
    /// The alert's title.
    public var title: String? { self.content.title }
    /// The localized-strings key of the title.
    public var titleLocalizationKey: String? { self.content.titleLocalizationKey }
    /// The values that fill `titleLocalizationKey`'s format.
    public var titleLocalizationArgs: [String]? { self.content.titleLocalizationArgs }
    /// The alert's subtitle.
    public var subtitle: String? { self.content.subtitle }
    /// The localized-strings key of the subtitle.
    public var subtitleLocalizationKey: String? { self.content.subtitleLocalizationKey }
    /// The values that fill `subtitleLocalizationKey`'s format.
    public var subtitleLocalizationArgs: [String]? { self.content.subtitleLocalizationArgs }
    /// The localized-strings key of the alert's action button.
    public var alertActionLocalizationKey: String? { self.content.alertActionLocalizationKey }
    /// The image to show while the app launches from the alert.
    public var alertLaunchImage: String? { self.content.alertLaunchImage }
    /// The badge number to show; nil = leave the badge.
    public var badge: NSNumber? { self.content.badge.map { NSNumber(value: $0) } }
    /// The sound to play.
    public var soundName: String? { self.content.soundName }
    /// The notification's category.
    public var category: String? { self.content.category }
    /// When the server created the notification (a Cirrus addition).
    public var creationDate: Date? { self.content.creationDate }
    /// The position in the user's notification feed just after this notification, for pushed
    /// notifications (a Cirrus addition): pass it to `container.notifications(since:)` or
    /// `CKFetchNotificationChangesOperation` to continue after it.
    public var changeToken: CKServerChangeToken? { self.content.changeToken }

    open var description: String {
        "<\(type(of: self)): notificationID=\(self.notificationID?.rawValue ?? "nil"), "
            + "type=\(self.notificationType), subscriptionID=\(self.subscriptionID ?? "nil")>"
    }
}

/// A notification of a `CKQuerySubscription`: a record started matching, changed, or stopped
/// matching (CloudKit's `CKQueryNotification`).
///
/// For example:
/// ```swift
/// if let change = notification as? CKQueryNotification, change.queryNotificationReason == .recordCreated {
///     print(change.recordID, change.recordFields?["title"] ?? "")
/// }
/// ```
open class CKQueryNotification: CKNotification, @unchecked Sendable {
    // @unchecked Sendable: as CKNotification — every stored property is a `let` of a Sendable type.

    /// Why the subscription fired (Apple's raw values).
    public enum Reason: Int, Hashable, Sendable {
        case recordCreated = 1
        case recordUpdated = 2
        case recordDeleted = 3
    }

    /// Why the subscription fired.
    public let queryNotificationReason: Reason
    /// The record that changed.
    public let recordID: CKRecord.ID?
    /// The database the record is in.
    public let databaseScope: CKDatabaseScope
    let storedFields: [CKRecord.FieldKey: FieldValue]?

    init(content: Content, reason: Reason, recordID: CKRecord.ID?, fields: [CKRecord.FieldKey: FieldValue]?, databaseScope: CKDatabaseScope) {
        self.queryNotificationReason = reason
        self.recordID = recordID
        self.storedFields = fields
        self.databaseScope = databaseScope
        super.init(content: content)
    }

    /// The values of the subscription's `NotificationInfo.desiredKeys`, read as record fields
    /// read (numbers as `NSNumber`); nil when the notification carries none.
    public var recordFields: [CKRecord.FieldKey: Any]? {
        self.storedFields?.mapValues { $0.recordValue }
    }

    open override var description: String {
        "<CKQueryNotification: notificationID=\(self.notificationID?.rawValue ?? "nil"), "
            + "reason=\(self.queryNotificationReason), recordID=\(self.recordID.map { "\($0)" } ?? "nil")>"
    }
}

/// A notification of a `CKRecordZoneSubscription`: something changed in a zone (CloudKit's
/// `CKRecordZoneNotification`). Fetch the zone's changes next.
///
/// For example:
/// ```swift
/// if let change = notification as? CKRecordZoneNotification, let zoneID = change.recordZoneID {
///     let changes = try await database.recordZoneChanges(inZoneWith: zoneID, since: zoneToken)
/// }
/// ```
open class CKRecordZoneNotification: CKNotification, @unchecked Sendable {
    // @unchecked Sendable: as CKNotification — every stored property is a `let` of a Sendable type.

    /// The zone that changed.
    public let recordZoneID: CKRecordZone.ID?
    /// The database the zone is in.
    public let databaseScope: CKDatabaseScope

    init(content: Content, recordZoneID: CKRecordZone.ID?, databaseScope: CKDatabaseScope) {
        self.recordZoneID = recordZoneID
        self.databaseScope = databaseScope
        super.init(content: content)
    }
}

/// A notification of a `CKDatabaseSubscription`: something changed in a database (CloudKit's
/// `CKDatabaseNotification`). Fetch the database's changes next.
///
/// For example:
/// ```swift
/// if let change = notification as? CKDatabaseNotification {
///     let changes = try await container.database(with: change.databaseScope).databaseChanges(since: databaseToken)
/// }
/// ```
open class CKDatabaseNotification: CKNotification, @unchecked Sendable {
    // @unchecked Sendable: as CKNotification — every stored property is a `let` of a Sendable type.

    /// The database that changed.
    public let databaseScope: CKDatabaseScope

    init(content: Content, databaseScope: CKDatabaseScope) {
        self.databaseScope = databaseScope
        super.init(content: content)
    }
}
