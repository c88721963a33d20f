import Foundation

/// A standing request to the server: tell the user's devices when records change (CloudKit's
/// `CKSubscription`). Use one of its subclasses — `CKQuerySubscription`,
/// `CKRecordZoneSubscription`, `CKDatabaseSubscription` — and save it with
/// `CKModifySubscriptionsOperation` or `database.save(_:)`.
///
/// Cirrus pushes the notifications a subscription produces over the client's own connection
/// (`container.notifications()`) instead of APNs.
///
/// For example:
/// ```swift
/// let subscription = CKDatabaseSubscription(subscriptionID: "private-changes")
/// let info = CKSubscription.NotificationInfo()
/// info.shouldSendContentAvailable = true
/// subscription.notificationInfo = info
/// try await container.privateCloudDatabase.save(subscription)
/// ```
open class CKSubscription: @unchecked Sendable, Hashable, CustomStringConvertible {
    // @unchecked Sendable: a non-final class cannot be checked; every mutable property lives in
    // a `Locked`, the rest are `let`s of Sendable types.

    /// The type of `subscriptionID`: chosen by the app, unique per user and database.
    public typealias ID = String

    /// The kinds of subscription, with Apple's raw values.
    public enum SubscriptionType: Int, Hashable, Sendable {
        case query = 1
        case recordZone = 2
        case database = 3
    }

    /// The subscription's ID.
    public let subscriptionID: ID
    /// Which kind of subscription this is.
    public let subscriptionType: SubscriptionType
    private let info: Locked<NotificationInfo?>

    init(subscriptionID: ID, subscriptionType: SubscriptionType) {
        self.subscriptionID = subscriptionID
        self.subscriptionType = subscriptionType
        self.info = Locked(nil)
    }

    /// What the notifications of this subscription carry (alert, badge, sound, record fields);
    /// nil = a silent notification with no alert.
    open var notificationInfo: NotificationInfo? {
        get { self.info.withLock { $0 } }
        set { self.info.withLock { $0 = newValue } }
    }

    /// Subscriptions are equal only to themselves (identity), as `NSObject`s are; compare
    /// `subscriptionID`s to compare them by ID.
    public static func == (lhs: CKSubscription, rhs: CKSubscription) -> Bool { lhs === rhs }

    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }

    open var description: String {
        "<\(type(of: self)): subscriptionID=\(self.subscriptionID)>"
    }
}

extension CKSubscription {
    /// What a notification shows and carries when the subscription fires
    /// (`CKSubscription.NotificationInfo`). Unset strings and lists are nil.
    ///
    /// For example:
    /// ```swift
    /// let info = CKSubscription.NotificationInfo()
    /// info.alertBody = "A note changed"
    /// info.desiredKeys = ["title"]
    /// info.shouldBadge = true
    /// ```
    public final class NotificationInfo: @unchecked Sendable, Hashable, CustomStringConvertible {
        // @unchecked Sendable: every property is stored in `values`, a `Locked`.

        struct Values: Hashable, Sendable {
            var alertBody: String?
            var alertLocalizationKey: String?
            var alertLocalizationArgs: [CKRecord.FieldKey]?
            var alertActionLocalizationKey: String?
            var alertLaunchImage: String?
            var title: String?
            var titleLocalizationKey: String?
            var titleLocalizationArgs: [CKRecord.FieldKey]?
            var subtitle: String?
            var subtitleLocalizationKey: String?
            var subtitleLocalizationArgs: [CKRecord.FieldKey]?
            var soundName: String?
            var shouldBadge = false
            var shouldSendContentAvailable = false
            var shouldSendMutableContent = false
            var desiredKeys: [CKRecord.FieldKey]?
            var category: String?
            var collapseIDKey: String?
        }

        private let values: Locked<Values>

        /// Notification info with nothing set (a silent notification).
        public init() {
            self.values = Locked(Values())
        }

        init(values: Values) {
            self.values = Locked(values)
        }

        var snapshot: Values { self.values.withLock { $0 } }

        private func get<T>(_ key: KeyPath<Values, T>) -> T { self.values.withLock { $0[keyPath: key] } }
        private func set<T>(_ key: WritableKeyPath<Values, T>, _ value: T) { self.values.withLock { $0[keyPath: key] = value } }

        /// The alert's text.
        public var alertBody: String? { get { get(\.alertBody) } set { set(\.alertBody, newValue) } }
        /// A key of the app's localized strings to use as the alert's format.
        public var alertLocalizationKey: String? {
            get { get(\.alertLocalizationKey) }
            set { set(\.alertLocalizationKey, newValue) }
        }
        /// Field keys whose values fill `alertLocalizationKey`'s format.
        public var alertLocalizationArgs: [CKRecord.FieldKey]? {
            get { get(\.alertLocalizationArgs) }
            set { set(\.alertLocalizationArgs, newValue) }
        }
        /// A localized-strings key for the alert's action button.
        public var alertActionLocalizationKey: String? {
            get { get(\.alertActionLocalizationKey) }
            set { set(\.alertActionLocalizationKey, newValue) }
        }
        /// An image to show while the app launches from the alert.
        public var alertLaunchImage: String? { get { get(\.alertLaunchImage) } set { set(\.alertLaunchImage, newValue) } }
        /// The alert's title.
        public var title: String? { get { get(\.title) } set { set(\.title, newValue) } }
        /// A localized-strings key for the title.
        public var titleLocalizationKey: String? {
            get { get(\.titleLocalizationKey) }
            set { set(\.titleLocalizationKey, newValue) }
        }
        /// Field keys whose values fill `titleLocalizationKey`'s format.
        public var titleLocalizationArgs: [CKRecord.FieldKey]? {
            get { get(\.titleLocalizationArgs) }
            set { set(\.titleLocalizationArgs, newValue) }
        }
        /// The alert's subtitle.
        public var subtitle: String? { get { get(\.subtitle) } set { set(\.subtitle, newValue) } }
        /// A localized-strings key for the subtitle.
        public var subtitleLocalizationKey: String? {
            get { get(\.subtitleLocalizationKey) }
            set { set(\.subtitleLocalizationKey, newValue) }
        }
        /// Field keys whose values fill `subtitleLocalizationKey`'s format.
        public var subtitleLocalizationArgs: [CKRecord.FieldKey]? {
            get { get(\.subtitleLocalizationArgs) }
            set { set(\.subtitleLocalizationArgs, newValue) }
        }
        /// The sound to play.
        public var soundName: String? { get { get(\.soundName) } set { set(\.soundName, newValue) } }
        /// Increment the app's badge.
        public var shouldBadge: Bool { get { get(\.shouldBadge) } set { set(\.shouldBadge, newValue) } }
        /// A silent (background) notification.
        public var shouldSendContentAvailable: Bool {
            get { get(\.shouldSendContentAvailable) }
            set { set(\.shouldSendContentAvailable, newValue) }
        }
        /// Let a notification service extension change the content.
        public var shouldSendMutableContent: Bool {
            get { get(\.shouldSendMutableContent) }
            set { set(\.shouldSendMutableContent, newValue) }
        }
        /// Record fields a query notification carries (`CKQueryNotification.recordFields`).
        public var desiredKeys: [CKRecord.FieldKey]? { get { get(\.desiredKeys) } set { set(\.desiredKeys, newValue) } }
        /// The notification's category (actions the app registered).
        public var category: String? { get { get(\.category) } set { set(\.category, newValue) } }
        /// A field key whose value becomes the notification's collapse ID.
        public var collapseIDKey: String? { get { get(\.collapseIDKey) } set { set(\.collapseIDKey, newValue) } }

        /// Equal when every property is equal.
        public static func == (lhs: NotificationInfo, rhs: NotificationInfo) -> Bool { lhs.snapshot == rhs.snapshot }

        public func hash(into hasher: inout Hasher) { hasher.combine(self.snapshot) }

        public var description: String {
            let values = self.snapshot
            var parts: [String] = []
            if let body = values.alertBody { parts.append("alertBody=\(body)") }
            if let title = values.title { parts.append("title=\(title)") }
            if let keys = values.desiredKeys { parts.append("desiredKeys=\(keys)") }
            if values.shouldSendContentAvailable { parts.append("shouldSendContentAvailable") }
            if values.shouldBadge { parts.append("shouldBadge") }
            return "<CKSubscription.NotificationInfo \(parts.joined(separator: " "))>"
        }
    }
}
