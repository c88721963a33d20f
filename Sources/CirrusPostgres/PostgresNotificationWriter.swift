import CirrusStore
import CirrusWire
import Foundation
import Logging
import NIOCore
import PostgresNIO

/// The compiled subscriptions of each database on this node, reused by every write while the
/// database's `subscriptions_generation` stays the same (schema v6). A write reads the
/// generation in its own transaction, so a subscription another node saved or deleted is
/// seen by the next write here, as one of this node.
final class PostgresSubscriptionCache: Sendable {
    private let sets = SubscriptionSetCache<DatabaseKey>()

    /// The subscriptions of `key`'s database for `generation`, read in the transaction of
    /// `connection` unless compiled already. Generation 0 (the subscriptions were never
    /// changed) has none.
    ///
    /// - throws: ``StoreError`` `.corruptData` when a stored subscription does not decode.
    func subscriptions(
        _ connection: PostgresConnection, _ key: DatabaseKey, generation: Int64, _ logger: Logger
    ) async throws -> SubscriptionSet {
        if generation == 0 { return SubscriptionSet() }
        if let subscriptions = sets.subscriptions(of: key, generation: generation) { return subscriptions }
        let rows = try await connection.query(
            PostgresQuery(
                unsafeSQL: """
                    SELECT subscriber, body FROM subscriptions WHERE container = $1 AND owner = $2 AND scope = $3
                    ORDER BY position
                    """,
                binds: PostgresRows.binds(key)), logger: logger)
        var stored: [(owner: String, body: [UInt8])] = []
        for try await (subscriber, body) in rows.decode((String, ByteBuffer).self) {
            stored.append((subscriber, Array(buffer: body)))
        }
        let subscriptions = try SubscriptionSet.compile(stored)
        sets.keep(subscriptions, of: key, generation: generation)
        return subscriptions
    }

    /// The subscriptions of `key`'s database as the transaction of `connection` sees them.
    func subscriptions(
        _ connection: PostgresConnection, _ key: DatabaseKey, _ logger: Logger
    ) async throws -> SubscriptionSet {
        let rows = try await connection.query(
            PostgresQuery(
                unsafeSQL: """
                    SELECT subscriptions_generation FROM databases WHERE container = $1 AND owner = $2 AND scope = $3
                    """,
                binds: PostgresRows.binds(key)), logger: logger)
        var generation: Int64 = 0
        for try await value in rows.decode(Int64.self) { generation = value }
        return try await subscriptions(connection, key, generation: generation, logger)
    }
}

/// Stores what a write's changes fire (``SubscriptionMatcher``) inside the write's
/// transaction: each notification in its subscriber's feed, the `firesOnce` subscriptions
/// that fired deleted, and a `NOTIFY` per feed that every node's listener hears once the
/// transaction commits (``PostgresNotificationListener``) — nothing of it when the
/// transaction rolls back.
///
/// A feed's row is locked from the moment its head moves until the commit, so the sequences
/// of one feed are gap-free and follow commit order, across nodes; the feeds of one write are
/// locked in subscriber order.
enum PostgresNotificationWriter {
    /// The channel of the notifications: its payload is a JSON array `[container, user,
    /// first seq, head seq]` of the notifications one transaction added to a feed.
    static let channel = "cirrus_notifications"

    /// Matches `records` and `zones` changed in `key`'s database against `subscriptions` and
    /// stores what fires; the notifications stored, per subscriber in feed order.
    static func fire(
        _ subscriptions: SubscriptionSet, in key: DatabaseKey, now: Wire.Timestamp, records: [RecordChange],
        zones: [ZoneChange], _ connection: PostgresConnection, _ logger: Logger
    ) async throws -> [String: [StoredNotification]] {
        let firings = try SubscriptionMatcher(key: key, now: now).fire(subscriptions, records: records, zones: zones)
        guard !firings.isEmpty else { return [:] }
        if !firings.firedOnce.isEmpty { try await deleteFiredOnce(firings.firedOnce, in: key, connection, logger) }
        let positions = try await grow(firings.growth, in: key.container, connection, logger)
        let placed = try firings.placed(after: positions)
        try await insert(placed, in: key, now: now, connection, logger)
        return placed
    }

    /// What the changes of one database fire (``fire(_:in:now:_:_:)``).
    struct Batch {
        var subscriptions: SubscriptionSet
        var key: DatabaseKey
        var records: [RecordChange]
    }

    /// Matches each batch's record changes against its subscriptions, as
    /// ``fire(_:in:now:records:zones:_:_:)`` does, for several databases of `container` at
    /// once (a write's own database and its participants' shared databases): every feed they
    /// grow is moved in one statement, locked in subscriber order, so a write never locks feeds
    /// in two runs and two writes never lock feeds in opposite orders. The notifications
    /// stored, per subscriber in feed order.
    static func fire(
        _ batches: [Batch], in container: String, now: Wire.Timestamp, _ connection: PostgresConnection,
        _ logger: Logger
    ) async throws -> [String: [StoredNotification]] {
        var matched: [(key: DatabaseKey, firings: SubscriptionFirings)] = []
        for batch in batches {
            let firings = try SubscriptionMatcher(key: batch.key, now: now).fire(
                batch.subscriptions, records: batch.records, zones: [])
            guard !firings.isEmpty else { continue }
            if !firings.firedOnce.isEmpty { try await deleteFiredOnce(firings.firedOnce, in: batch.key, connection, logger) }
            matched.append((batch.key, firings))
        }
        let growth = matched.flatMap(\.firings.growth)
        var notified: [String: [StoredNotification]] = [:]
        guard Set(growth.map(\.owner)).count == growth.count else {
            // A feed grown by two of the databases (not a write's own and its participants'
            // shared ones, whose subscribers differ): one database at a time.
            for (key, firings) in matched {
                let placed = try firings.placed(after: try await grow(firings.growth, in: container, connection, logger))
                try await insert(placed, in: key, now: now, connection, logger)
                notified.merge(placed) { ($0 + $1).sorted { $0.seq < $1.seq } }
            }
            return notified
        }
        guard !growth.isEmpty else { return [:] }
        let positions = try await grow(growth, in: container, connection, logger)
        for (key, firings) in matched {
            let placed = try firings.placed(after: positions)
            try await insert(placed, in: key, now: now, connection, logger)
            notified.merge(placed) { ($0 + $1).sorted { $0.seq < $1.seq } }
        }
        return notified
    }

    /// Deletes the `firesOnce` subscriptions that fired, and gives the database's
    /// subscriptions a new generation.
    private static func deleteFiredOnce(
        _ fired: [SubscriptionFirings.FiredOnce], in key: DatabaseKey, _ connection: PostgresConnection,
        _ logger: Logger
    ) async throws {
        var bindings = PostgresRows.binds(key)
        bindings.append(fired.map(\.owner))
        bindings.append(fired.map(\.subscriptionID))
        try await connection.query(
            PostgresQuery(
                unsafeSQL: """
                    WITH gone AS (
                        DELETE FROM subscriptions
                        WHERE container = $1 AND owner = $2 AND scope = $3
                            AND (subscriber, subscription_id) IN (SELECT * FROM unnest($4::text[], $5::text[]))
                        RETURNING 1
                    )
                    UPDATE databases SET subscriptions_generation = nextval('subscription_generations')
                    WHERE container = $1 AND owner = $2 AND scope = $3 AND EXISTS (SELECT 1 FROM gone)
                    """,
                binds: bindings), logger: logger)
    }

    /// Moves each subscriber's feed head (and badge count) on by what it gets, creating the
    /// feed on its first notification, in subscriber order; where each feed stands after.
    private static func grow(
        _ growth: [SubscriptionFirings.FeedGrowth], in container: String, _ connection: PostgresConnection,
        _ logger: Logger
    ) async throws -> [String: SubscriptionFirings.FeedPosition] {
        var bindings = PostgresBindings(capacity: 4)
        bindings.append(container)
        bindings.append(growth.map(\.owner))
        bindings.append(growth.map(\.count))
        bindings.append(growth.map(\.badges))
        let rows = try await connection.query(
            PostgresQuery(
                unsafeSQL: """
                    INSERT INTO notification_feeds (container, owner, head_seq, badge)
                    SELECT $1, owner, count, badges FROM unnest($2::text[], $3::bigint[], $4::bigint[])
                        AS growth (owner, count, badges)
                    ORDER BY owner
                    ON CONFLICT (container, owner) DO UPDATE SET
                        head_seq = notification_feeds.head_seq + excluded.head_seq,
                        badge = notification_feeds.badge + excluded.badge
                    RETURNING owner, head_seq, badge
                    """,
                binds: bindings), logger: logger)
        var positions: [String: SubscriptionFirings.FeedPosition] = [:]
        for try await (owner, head, badge) in rows.decode((String, Int64, Int64).self) {
            positions[owner] = SubscriptionFirings.FeedPosition(head: head, badge: badge)
        }
        return positions
    }

    /// Inserts the placed notifications and queues one `NOTIFY` per feed, in one statement.
    private static func insert(
        _ placed: [String: [StoredNotification]], in key: DatabaseKey, now: Wire.Timestamp,
        _ connection: PostgresConnection, _ logger: Logger
    ) async throws {
        var owners: [String] = []
        var seqs: [Int64] = []
        var ids: [String] = []
        var bodies: [ByteBuffer] = []
        var payloads: [String] = []
        for (owner, notifications) in placed.sorted(by: { $0.key < $1.key }) {
            for stored in notifications {
                owners.append(owner)
                seqs.append(stored.seq)
                ids.append(stored.notification.notificationID)
                bodies.append(ByteBuffer(bytes: stored.notification.serializedBytes()))
            }
            if let first = notifications.first?.seq, let head = notifications.last?.seq {
                let feed = NotificationFeedKey(container: key.container, user: owner)
                payloads.append(NotificationAnnouncement(feed: feed, first: first, head: head).payload)
            }
        }
        var bindings = PostgresBindings(capacity: 9)
        bindings.append(key.container)
        bindings.append(key.scope.rawValue)
        bindings.append(RecordCodec.nanoseconds(now))
        bindings.append(owners)
        bindings.append(seqs)
        bindings.append(ids)
        bindings.append(bodies)
        bindings.append(channel)
        bindings.append(payloads)
        let rows = try await connection.query(
            PostgresQuery(
                unsafeSQL: """
                    WITH stored AS (
                        INSERT INTO notifications (container, owner, seq, scope, created_ns, notification_id, body)
                        SELECT $1, owner, seq, $2, $3, id, body
                        FROM unnest($4::text[], $5::bigint[], $6::text[], $7::bytea[]) AS placed (owner, seq, id, body)
                    )
                    SELECT pg_notify($8, payload)::text FROM unnest($9::text[]) AS announced (payload)
                    """,
                binds: bindings), logger: logger)
        for try await _ in rows {}
    }
}

/// What one `NOTIFY` of ``PostgresNotificationWriter/channel`` says: a transaction added the
/// notifications `first` through `head` to `feed`.
struct NotificationAnnouncement: Sendable, Hashable, Codable {
    var feed: NotificationFeedKey { NotificationFeedKey(container: container, user: user) }
    var container: String
    var user: String
    var first: Int64
    var head: Int64

    private enum CodingKeys: String, CodingKey {
        case container = "c", user = "u", first = "f", head = "h"
    }

    init(feed: NotificationFeedKey, first: Int64, head: Int64) {
        self.container = feed.container
        self.user = feed.user
        self.first = first
        self.head = head
    }

    /// The payload: a JSON object (names may hold any character; JSON quotes them).
    var payload: String {
        guard let data = try? JSONEncoder().encode(self) else { return "" }
        return String(decoding: data, as: UTF8.self)
    }

    /// The announcement a payload carries; nil for one this version does not understand.
    init?(payload: String) {
        guard let decoded = try? JSONDecoder().decode(Self.self, from: Data(payload.utf8)),
            decoded.first >= 1, decoded.head >= decoded.first
        else { return nil }
        self = decoded
    }
}
