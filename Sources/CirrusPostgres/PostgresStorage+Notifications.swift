public import CirrusStore
public import CirrusWire
import Logging
import NIOCore
import PostgresNIO

extension PostgresStorage {
    /// The notifications of `feed` after sequence `after` (nil = from the oldest kept), oldest
    /// first, at most `limit`, read in one snapshot, as ``SubscriptionStorage`` describes.
    ///
    /// - throws: ``StoreError`` `.invalidArguments` for a limit below 1; `.changeTokenExpired`
    ///   when notifications after `after` were pruned, or `after` is past the feed's head.
    public func notificationChanges(for feed: NotificationFeedKey, after: Int64?, limit: Int) async throws -> NotificationBatch {
        try NotificationFeedRules.checkLimit(limit)
        let logger = self.logger
        let batch = try await snapshot { connection in
            let (head, pruned) = try await Self.feedPosition(feed, connection, logger)
            let start = try NotificationFeedRules.start(after: after, head: head, pruned: pruned)
            let notifications = try await Self.notifications(of: feed, after: start, limit: limit, connection, logger)
            return NotificationFeedRules.batch(notifications, head: head, limit: limit)
        }
        notifications.register(feed, at: batch.lastSeq)
        return batch
    }

    /// The sequence of the newest notification of `feed` (0 when it has none).
    ///
    /// - throws: ``StoreError``.
    public func notificationFeedHead(_ feed: NotificationFeedKey) async throws -> Int64 {
        let logger = self.logger
        let head = try await connection { connection in try await Self.feedPosition(feed, connection, logger).head }
        notifications.register(feed, at: head)
        return head
    }

    /// Deletes notifications created before `cutoff`, feed by feed (each in a statement of its
    /// own, so pruning never holds two feeds' locks); returns how many.
    ///
    /// - throws: ``StoreError``.
    @discardableResult
    public func pruneNotifications(createdBefore cutoff: Wire.Timestamp) async throws -> Int {
        let cutoff = RecordCodec.nanoseconds(cutoff)
        let logger = self.logger
        return try await connection { connection in
            let rows = try await connection.query(
                "SELECT DISTINCT container, owner FROM notifications WHERE created_ns < \(cutoff)", logger: logger)
            var feeds: [(String, String)] = []
            for try await feed in rows.decode((String, String).self) { feeds.append(feed) }
            var pruned = 0
            for (container, user) in feeds {
                let counts = try await connection.query(
                    """
                    WITH gone AS (
                        DELETE FROM notifications
                        WHERE container = \(container) AND owner = \(user) AND created_ns < \(cutoff)
                        RETURNING seq
                    ),
                    moved AS (
                        UPDATE notification_feeds SET pruned_seq = greatest(pruned_seq, (SELECT max(seq) FROM gone))
                        WHERE container = \(container) AND owner = \(user) AND EXISTS (SELECT 1 FROM gone)
                    )
                    SELECT count(*) FROM gone
                    """, logger: logger)
                for try await count in counts.decode(Int64.self) { pruned += Int(count) }
            }
            return pruned
        }
    }

    /// Marks notifications of `feed` read, by ID, in one statement: true per ID the feed holds.
    ///
    /// - throws: ``StoreError`` `.limitExceeded` (too many IDs).
    public func markNotificationsRead(_ notificationIDs: [String], in feed: NotificationFeedKey) async throws -> [Bool] {
        try checkItemCount(notificationIDs.count)
        guard !notificationIDs.isEmpty else { return [] }
        let logger = self.logger
        let marked = try await connection { connection in
            let rows = try await connection.query(
                """
                UPDATE notifications SET is_read = true
                WHERE container = \(feed.container) AND owner = \(feed.user) AND notification_id = ANY(\(notificationIDs))
                RETURNING notification_id
                """, logger: logger)
            var marked = Set<String>()
            for try await id in rows.decode(String.self) { marked.insert(id) }
            return marked
        }
        return notificationIDs.map(marked.contains)
    }

    /// Sets the badge count of `feed`.
    ///
    /// - throws: ``StoreError``.
    public func setBadge(_ value: UInt32, for feed: NotificationFeedKey) async throws {
        let logger = self.logger
        _ = try await connection { connection in
            try await connection.query(
                """
                INSERT INTO notification_feeds (container, owner, head_seq, badge)
                VALUES (\(feed.container), \(feed.user), 0, \(Int64(value)))
                ON CONFLICT (container, owner) DO UPDATE SET badge = excluded.badge
                """, logger: logger)
        }
    }

    /// Calls `observer` after every commit, on any node sharing the database, that added
    /// notifications to a feed, with the notifications it added: those of this node right
    /// after the commit, those of other nodes once this node's listener heard their `NOTIFY`
    /// and read the feed (``PostgresNotificationListener``). A node follows a feed from the
    /// first time it reads it (a watch does first), hears of it or commits to it, and announces
    /// each notification of it once; announcements of concurrent commits may come out of order.
    /// A `NOTIFY` lost while the listener reconnects only delays what it announces.
    public func observeNotifications(_ observer: @escaping @Sendable (NotificationFeedKey, [StoredNotification]) -> Void) {
        notifications.observe(observer)
    }

    // MARK: - Reading feeds

    /// The head and pruned sequences of `feed` (0 and 0 when it has none).
    static func feedPosition(
        _ feed: NotificationFeedKey, _ connection: PostgresConnection, _ logger: Logger
    ) async throws -> (head: Int64, pruned: Int64) {
        let rows = try await connection.query(
            """
            SELECT head_seq, pruned_seq FROM notification_feeds WHERE container = \(feed.container) AND owner = \(feed.user)
            """, logger: logger)
        for try await position in rows.decode((Int64, Int64).self) { return position }
        return (0, 0)
    }

    /// The notifications of `feed` after `start`, oldest first, at most `limit`.
    static func notifications(
        of feed: NotificationFeedKey, after start: Int64, limit: Int, _ connection: PostgresConnection, _ logger: Logger
    ) async throws -> [StoredNotification] {
        let rows = try await connection.query(
            """
            SELECT seq, scope, body, is_read FROM notifications
            WHERE container = \(feed.container) AND owner = \(feed.user) AND seq > \(start)
            ORDER BY seq LIMIT \(limit)
            """, logger: logger)
        var notifications: [StoredNotification] = []
        for try await (seq, scope, body, isRead) in rows.decode((Int64, Int32, ByteBuffer, Bool).self) {
            notifications.append(
                try NotificationFeedRules.notification(seq: seq, scope: scope, body: Array(buffer: body), isRead: isRead))
        }
        return notifications
    }
}
