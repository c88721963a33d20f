import CirrusWire
import Foundation
import GRDB

extension SubscriptionSet {
    /// The subscriptions of a SQLite database, in the order they were first saved.
    static func load(_ db: Database, databaseID: Int64) throws -> SubscriptionSet {
        let rows = try db.rows(
            sql: """
                SELECT owner, body FROM subscriptions WHERE database_id = ? ORDER BY position
                """,
            arguments: [databaseID])
        return try compile(rows.map { row in (owner: row["owner"], body: [UInt8](row["body"] as Data)) })
    }
}

/// Stores what a SQLite write's changes fire (``SubscriptionMatcher``) inside the write's
/// transaction: each notification in its subscriber's feed, and deletes the `firesOnce`
/// subscriptions that fired.
struct NotificationWriter {
    let db: Database
    let key: DatabaseKey
    let now: Wire.Timestamp
    /// The notifications written, per subscriber, in feed order: handed to the observers once
    /// the transaction commits, so a watch need not read back what was just written.
    private(set) var notified: [String: [StoredNotification]] = [:]
    /// Whether a `firesOnce` subscription fired and was deleted (the database's subscriptions
    /// changed: see ``WriteTransactionCache/subscriptionsChanged(in:)``).
    private(set) var deletedSubscriptions = false

    init(db: Database, key: DatabaseKey, now: Wire.Timestamp) {
        self.db = db
        self.key = key
        self.now = now
    }

    mutating func fire(
        _ subscriptions: SubscriptionSet, databaseID: Int64, records: [RecordChange], zones: [ZoneChange]
    ) throws {
        let firings = try SubscriptionMatcher(key: key, now: now).fire(subscriptions, records: records, zones: zones)
        guard !firings.isEmpty else { return }
        for fired in firings.firedOnce {
            deletedSubscriptions = true
            try db.run(
                sql: "DELETE FROM subscriptions WHERE database_id = ? AND owner = ? AND subscription_id = ?",
                arguments: [databaseID, fired.owner, fired.subscriptionID])
        }
        var positions: [String: SubscriptionFirings.FeedPosition] = [:]
        for growth in firings.growth {
            guard
                let feed = try db.row(
                    sql: """
                        INSERT INTO notification_feeds (container, owner, head_seq, badge) VALUES (?, ?, ?, ?)
                        ON CONFLICT (container, owner) DO UPDATE SET
                            head_seq = head_seq + excluded.head_seq, badge = badge + excluded.badge
                        RETURNING head_seq, badge
                        """,
                    arguments: [key.container, growth.owner, growth.count, growth.badges])
            else {
                throw StoreError(.storageFailure, "notification feed vanished after insert")
            }
            positions[growth.owner] = SubscriptionFirings.FeedPosition(head: feed["head_seq"], badge: feed["badge"])
        }
        let created = RecordCodec.nanoseconds(now)
        for (owner, notifications) in try firings.placed(after: positions) {
            for stored in notifications {
                try db.run(
                    sql: """
                        INSERT INTO notifications (container, owner, seq, scope, created_ns, body, notification_id)
                        VALUES (?, ?, ?, ?, ?, ?, ?)
                        """,
                    arguments: [
                        key.container, owner, stored.seq, key.scope.rawValue, created,
                        Data(stored.notification.serializedBytes()), stored.notification.notificationID,
                    ])
            }
            notified[owner, default: []].append(contentsOf: notifications)
        }
    }
}
