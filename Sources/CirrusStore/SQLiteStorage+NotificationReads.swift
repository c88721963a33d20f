import CirrusWire
import GRDB

extension SQLiteStorage {
    public func markNotificationsRead(_ notificationIDs: [String], in feed: NotificationFeedKey) async throws -> [Bool] {
        try checkItemCount(notificationIDs.count)
        return try await write(weight: notificationIDs.count) { db in
            try notificationIDs.map { id in
                try db.run(
                    sql: """
                        UPDATE notifications SET is_read = 1
                        WHERE container = ? AND owner = ? AND notification_id = ?
                        """,
                    arguments: [feed.container, feed.user, id])
                return db.changesCount > 0
            }
        }
    }

    public func setBadge(_ value: UInt32, for feed: NotificationFeedKey) async throws {
        try await write(weight: 1) { db in
            try db.run(
                sql: """
                    INSERT INTO notification_feeds (container, owner, head_seq, badge) VALUES (?, ?, 0, ?)
                    ON CONFLICT (container, owner) DO UPDATE SET badge = excluded.badge
                    """,
                arguments: [feed.container, feed.user, Int64(value)])
        }
    }
}
