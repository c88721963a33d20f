public import CirrusWire

/// Subscriptions (CKSubscription) and the feed of notifications they produce.
///
/// A subscription lives in one database and belongs to the user who saved it: in a private
/// database that is its owner, in the public database any user. It only ever sees the changes
/// of that database. Notifications are created inside the transaction of the write that fired
/// them and kept per (container, user) in one feed of increasing sequence numbers; only their
/// user ever reads them.
///
/// For example:
/// ```swift
/// let subscription = Wire.Subscription(subscriptionID: "notes", kind: .database(Wire.DatabaseSubscription()))
/// _ = try await storage.modifySubscriptions(saving: [subscription], deleting: [], in: alice, by: "_alice")
/// let batch = try await storage.notificationChanges(for: NotificationFeedKey(container: "c", user: "_alice"), after: nil, limit: 100)
/// ```
public protocol SubscriptionStorage: Sendable {
    /// Saves (creating or replacing by ID) and deletes `user`'s subscriptions in `database`
    /// (CKModifySubscriptionsOperation). One outcome per item in request order.
    ///
    /// - throws: ``StoreError`` `.limitExceeded` (too many items), `.badDatabase`.
    func modifySubscriptions(
        saving subscriptions: [Wire.Subscription], deleting subscriptionIDs: [String], in database: DatabaseKey,
        by user: String
    ) async throws -> SubscriptionModificationResult

    /// `user`'s subscriptions in `database` by ID (`unknownItem` for a missing one), or all of
    /// them, oldest first, when `subscriptionIDs` is nil (CKFetchSubscriptionsOperation).
    ///
    /// - throws: ``StoreError``.
    func fetchSubscriptions(
        _ subscriptionIDs: [String]?, in database: DatabaseKey, of user: String
    ) async throws -> [SubscriptionFetchOutcome]

    /// The notifications of `feed` after sequence `after` (nil = from the oldest kept), oldest
    /// first, at most `limit`.
    ///
    /// - throws: ``StoreError`` `.changeTokenExpired` when notifications after `after` were
    ///   pruned, or `after` is past the feed's last notification.
    func notificationChanges(for feed: NotificationFeedKey, after: Int64?, limit: Int) async throws -> NotificationBatch

    /// The sequence of the newest notification of `feed` (0 when it has none): where a watch
    /// that wants only new notifications starts.
    ///
    /// - throws: ``StoreError``.
    func notificationFeedHead(_ feed: NotificationFeedKey) async throws -> Int64

    /// Deletes notifications created before `cutoff`; returns how many. Positions before the
    /// newest deleted one then expire.
    ///
    /// - throws: ``StoreError``.
    @discardableResult
    func pruneNotifications(createdBefore cutoff: Wire.Timestamp) async throws -> Int

    /// Marks notifications of `feed` read, by ID (CKMarkNotificationsReadOperation). One answer
    /// per ID, in order: true when the feed holds it (marked now or before), false when it does
    /// not (another user's notification ID reads as one that never existed).
    ///
    /// - throws: ``StoreError`` `.limitExceeded` (too many IDs).
    func markNotificationsRead(_ notificationIDs: [String], in feed: NotificationFeedKey) async throws -> [Bool]

    /// Sets the badge count of `feed` (CKModifyBadgeOperation): the next notification of a
    /// subscription that badges shows `value + 1`.
    ///
    /// - throws: ``StoreError``.
    func setBadge(_ value: UInt32, for feed: NotificationFeedKey) async throws

    /// Calls `observer` after every commit that added notifications to a feed, once per feed,
    /// with the notifications the commit added to it in feed order (for pushing them without
    /// reading them back). Commits of concurrent writes may be announced out of order: an
    /// observer that needs every notification checks the seqs and reads the feed over a gap.
    /// Observers run on the storage's queues: keep them short.
    func observeNotifications(_ observer: @escaping @Sendable (NotificationFeedKey, [StoredNotification]) -> Void)
}

/// One user's notification feed in one container.
public struct NotificationFeedKey: Hashable, Sendable, CustomStringConvertible {
    public var container: String
    /// A user record name.
    public var user: String

    public init(container: String, user: String) {
        self.container = container
        self.user = user
    }

    public var description: String { "\(container)/\(user)" }
}

/// What a ``SubscriptionStorage/modifySubscriptions(saving:deleting:in:by:)`` call did, in
/// request order.
public struct SubscriptionModificationResult: Sendable, Hashable {
    /// One per subscription to save: as stored, or its failure.
    public var saves: [SubscriptionSaveOutcome]
    /// One per ID to delete: `failure` nil = deleted (`unknownItem` when there was none).
    public var deletes: [SubscriptionDeletion]

    public init(saves: [SubscriptionSaveOutcome] = [], deletes: [SubscriptionDeletion] = []) {
        self.saves = saves
        self.deletes = deletes
    }
}

/// A notification in its feed.
public struct StoredNotification: Sendable, Hashable {
    /// Its position in the feed (1, 2, 3 …).
    public var seq: Int64
    /// The scope of the database whose change produced it.
    public var scope: Wire.DatabaseScope
    /// Record and zone IDs in it name owners as the store does (the database owner; "" in the
    /// public database). The payload is content, like a record: the store keeps it as the
    /// push notification it becomes, and the server only maps the owners in it.
    public var notification: Wire.PushNotification

    public init(seq: Int64, scope: Wire.DatabaseScope, notification: Wire.PushNotification) {
        self.seq = seq
        self.scope = scope
        self.notification = notification
    }
}

/// One batch of a notification feed.
public struct NotificationBatch: Sendable, Hashable {
    public var notifications: [StoredNotification]
    /// Everything up to here is in this batch or an earlier one.
    public var lastSeq: Int64
    public var moreComing: Bool

    public init(notifications: [StoredNotification], lastSeq: Int64, moreComing: Bool) {
        self.notifications = notifications
        self.lastSeq = lastSeq
        self.moreComing = moreComing
    }
}
