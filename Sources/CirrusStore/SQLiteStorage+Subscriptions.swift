public import CirrusWire
import Foundation
import GRDB

extension SQLiteStorage {
    /// Subscriptions one user may keep in one database.
    public static let maximumSubscriptionsPerDatabase = SubscriptionRules.maximumPerDatabase

    public func modifySubscriptions(
        saving subscriptions: [Wire.Subscription], deleting subscriptionIDs: [String], in database: DatabaseKey,
        by user: String
    ) async throws -> SubscriptionModificationResult {
        let key = try database.validated()
        try checkItemCount(subscriptions.count + subscriptionIDs.count)
        try SubscriptionRules.checkSubscriber(user)
        if subscriptions.isEmpty && subscriptionIDs.isEmpty { return SubscriptionModificationResult() }
        let now = RecordCodec.nanoseconds(clock())
        return try await write(weight: subscriptions.count + subscriptionIDs.count) { db in
            let databaseID = try StoreRows.ensureDatabase(db, key)
            var result = SubscriptionModificationResult()
            var seen = Set<String>()
            for subscription in subscriptions {
                var checked = try SubscriptionRules.check(subscription, in: key, seen: &seen) { name in
                    try StoreRows.liveZone(db, databaseID, name) != nil
                }
                if case .success(let stored) = checked,
                    let failure = try Self.store(stored, databaseID: databaseID, owner: user, now: now, db)
                {
                    checked = .failure(failure)
                }
                result.saves.append(SubscriptionSaveOutcome(id: subscription.subscriptionID, result: checked))
            }
            for subscriptionID in subscriptionIDs {
                try db.run(
                    sql: "DELETE FROM subscriptions WHERE database_id = ? AND owner = ? AND subscription_id = ?",
                    arguments: [databaseID, user, subscriptionID])
                let failure = db.changesCount == 0 ? SubscriptionRules.missing(subscriptionID) : nil
                result.deletes.append(SubscriptionDeletion(id: subscriptionID, failure: failure))
            }
            return result
        }
    }

    /// Inserts or replaces one checked subscription; the error when the user has too many.
    private static func store(
        _ subscription: Wire.Subscription, databaseID: Int64, owner: String, now: Int64, _ db: Database
    ) throws -> ItemFailure? {
        let exists =
            try db.int64(
                sql: "SELECT 1 FROM subscriptions WHERE database_id = ? AND owner = ? AND subscription_id = ?",
                arguments: [databaseID, owner, subscription.subscriptionID]) != nil
        let count =
            exists
            ? 0
            : try db.int64(
                sql: "SELECT count(*) FROM subscriptions WHERE database_id = ? AND owner = ?",
                arguments: [databaseID, owner]) ?? 0
        if let refusal = SubscriptionRules.limitRefusal(exists: exists, count: Int(count)) { return refusal }
        let (kind, recordType, zoneName) = SubscriptionRules.columns(of: subscription)
        // A subscription saved again keeps its place (its creation time) among the others.
        try db.run(
            sql: """
                INSERT INTO subscriptions
                    (database_id, owner, subscription_id, kind, record_type, zone_name, body, created_ns, position)
                VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8,
                    (SELECT coalesce(max(position), 0) + 1 FROM subscriptions WHERE database_id = ?1))
                ON CONFLICT (database_id, owner, subscription_id) DO UPDATE SET
                    kind = excluded.kind, record_type = excluded.record_type, zone_name = excluded.zone_name,
                    body = excluded.body
                """,
            arguments: [databaseID, owner, subscription.subscriptionID, kind, recordType, zoneName,
                        Data(subscription.serializedBytes()), now])
        return nil
    }

    public func fetchSubscriptions(
        _ subscriptionIDs: [String]?, in database: DatabaseKey, of user: String
    ) async throws -> [SubscriptionFetchOutcome] {
        let key = try database.validated()
        if let subscriptionIDs { try checkItemCount(subscriptionIDs.count) }
        return try await read { db in
            let databaseID = try StoreRows.databaseID(db, key)
            func decode(_ body: Data) throws -> Wire.Subscription { try SubscriptionRules.decode([UInt8](body)) }
            guard let subscriptionIDs else {
                guard let databaseID else { return [] }
                return try Data.fetchAll(
                    db,
                    sql: """
                        SELECT body FROM subscriptions WHERE database_id = ? AND owner = ? ORDER BY position
                        """,
                    arguments: [databaseID, user]
                ).map { body in
                    let subscription = try decode(body)
                    return SubscriptionFetchOutcome(id: subscription.subscriptionID, result: .success(subscription))
                }
            }
            return try subscriptionIDs.map { subscriptionID in
                let body = try databaseID.flatMap { databaseID in
                    try Data.fetchOne(
                        db,
                        sql: "SELECT body FROM subscriptions WHERE database_id = ? AND owner = ? AND subscription_id = ?",
                        arguments: [databaseID, user, subscriptionID])
                }
                guard let body else {
                    return SubscriptionFetchOutcome(
                        id: subscriptionID,
                        result: .failure(SubscriptionRules.missing(subscriptionID)))
                }
                return SubscriptionFetchOutcome(id: subscriptionID, result: .success(try decode(body)))
            }
        }
    }

    public func notificationChanges(
        for feed: NotificationFeedKey, after: Int64?, limit: Int
    ) async throws -> NotificationBatch {
        try NotificationFeedRules.checkLimit(limit)
        return try await read { db in
            let row = try Row.fetchOne(
                db, sql: "SELECT head_seq, pruned_seq FROM notification_feeds WHERE container = ? AND owner = ?",
                arguments: [feed.container, feed.user])
            let head: Int64 = row?["head_seq"] ?? 0
            let start = try NotificationFeedRules.start(after: after, head: head, pruned: row?["pruned_seq"] ?? 0)
            let rows = try Row.fetchAll(
                db,
                sql: """
                    SELECT seq, scope, body, is_read FROM notifications WHERE container = ? AND owner = ? AND seq > ?
                    ORDER BY seq LIMIT ?
                    """,
                arguments: [feed.container, feed.user, start, limit])
            let notifications = try rows.map { row in
                try NotificationFeedRules.notification(
                    seq: row["seq"], scope: row["scope"], body: [UInt8](row["body"] as Data),
                    isRead: (row["is_read"] as Int64? ?? 0) != 0)
            }
            return NotificationFeedRules.batch(notifications, head: head, limit: limit)
        }
    }

    public func notificationFeedHead(_ feed: NotificationFeedKey) async throws -> Int64 {
        try await read { db in
            try db.int64(
                sql: "SELECT head_seq FROM notification_feeds WHERE container = ? AND owner = ?",
                arguments: [feed.container, feed.user]) ?? 0
        }
    }

    public func pruneNotifications(createdBefore cutoff: Wire.Timestamp) async throws -> Int {
        let cutoff = RecordCodec.nanoseconds(cutoff)
        return try await write(weight: 1) { db in
            try db.run(
                sql: """
                    UPDATE notification_feeds SET pruned_seq = max(pruned_seq,
                        (SELECT max(seq) FROM notifications n
                         WHERE n.container = notification_feeds.container AND n.owner = notification_feeds.owner
                           AND n.created_ns < ?1))
                    WHERE EXISTS (SELECT 1 FROM notifications n
                        WHERE n.container = notification_feeds.container AND n.owner = notification_feeds.owner
                          AND n.created_ns < ?1)
                    """,
                arguments: [cutoff])
            try db.run(sql: "DELETE FROM notifications WHERE created_ns < ?", arguments: [cutoff])
            return db.changesCount
        }
    }

    public func observeNotifications(
        _ observer: @escaping @Sendable (NotificationFeedKey, [StoredNotification]) -> Void
    ) {
        notificationObservers.withLock { $0.append(observer) }
    }

    /// Tells the observers, after a commit, which notifications it added to which feeds.
    func announceNotifications(in container: String, _ notified: [String: [StoredNotification]]) {
        guard !notified.isEmpty else { return }
        let observers = notificationObservers.withLock { $0 }
        for (user, notifications) in notified.sorted(by: { $0.key < $1.key }) {
            let feed = NotificationFeedKey(container: container, user: user)
            for observer in observers { observer(feed, notifications) }
        }
    }
}
