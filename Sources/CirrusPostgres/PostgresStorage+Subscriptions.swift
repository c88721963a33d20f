public import CirrusStore
public import CirrusWire
import Foundation
import Logging
import NIOCore
import PostgresNIO

extension PostgresStorage: SubscriptionStorage {
    /// Saves (creating or replacing by ID) and deletes `user`'s subscriptions in `database`,
    /// with the SQLite engine's checks, limit and errors (``SubscriptionRules``), in the
    /// database's next write transaction: every write after it, on any node, fires the
    /// subscriptions as they are now.
    ///
    /// - throws: ``StoreError`` `.limitExceeded` (too many items), `.invalidArguments` without
    ///   a user, `.badDatabase`.
    public func modifySubscriptions(
        saving subscriptions: [Wire.Subscription], deleting subscriptionIDs: [String], in database: DatabaseKey,
        by user: String
    ) async throws -> SubscriptionModificationResult {
        let key = try database.validated()
        try checkItemCount(subscriptions.count + subscriptionIDs.count)
        try SubscriptionRules.checkSubscriber(user)
        if subscriptions.isEmpty && subscriptionIDs.isEmpty { return SubscriptionModificationResult() }
        let now = RecordCodec.nanoseconds(clock())
        let logger = self.logger
        return try await write(in: key, weight: subscriptions.count + subscriptionIDs.count) { connection in
            var result = SubscriptionModificationResult()
            var accepted: [Wire.Subscription] = []
            if !subscriptions.isEmpty {
                let zones = Set(try await PostgresRows.liveZones(connection, key, logger).map(\.name))
                var stored = try await Self.subscriptionIDs(of: user, in: key, connection, logger)
                var seen = Set<String>()
                for subscription in subscriptions {
                    var checked = SubscriptionRules.check(subscription, in: key, seen: &seen) { zones.contains($0) }
                    if case .success(let subscription) = checked {
                        let exists = stored.contains(subscription.subscriptionID)
                        if let refusal = SubscriptionRules.limitRefusal(exists: exists, count: stored.count) {
                            checked = .failure(refusal)
                        } else {
                            stored.insert(subscription.subscriptionID)
                            accepted.append(subscription)
                        }
                    }
                    result.saves.append(SubscriptionSaveOutcome(id: subscription.subscriptionID, result: checked))
                }
                if !accepted.isEmpty { try await Self.store(accepted, of: user, in: key, now: now, connection, logger) }
            }
            var deleted = Set<String>()
            if !subscriptionIDs.isEmpty {
                deleted = try await Self.delete(subscriptionIDs, of: user, in: key, connection, logger)
                var reported = Set<String>()
                for subscriptionID in subscriptionIDs {
                    // One deletion per stored subscription: the same ID again finds none.
                    let found = deleted.contains(subscriptionID) && reported.insert(subscriptionID).inserted
                    result.deletes.append(
                        SubscriptionDeletion(id: subscriptionID, failure: found ? nil : SubscriptionRules.missing(subscriptionID)))
                }
            }
            if !accepted.isEmpty || !deleted.isEmpty {
                try await connection.query(
                    """
                    UPDATE databases SET subscriptions_generation = nextval('subscription_generations')
                    WHERE container = \(key.container) AND owner = \(key.owner) AND scope = \(key.scope.rawValue)
                    """, logger: logger)
            }
            return result
        }
    }

    /// `user`'s subscriptions in `database` by ID (`unknownItem` for a missing one), or all of
    /// them in the order they were first saved, read in one statement.
    ///
    /// - throws: ``StoreError``.
    public func fetchSubscriptions(
        _ subscriptionIDs: [String]?, in database: DatabaseKey, of user: String
    ) async throws -> [SubscriptionFetchOutcome] {
        let key = try database.validated()
        if let subscriptionIDs { try checkItemCount(subscriptionIDs.count) }
        let logger = self.logger
        var bindings = PostgresRows.binds(key, user)
        bindings.append(subscriptionIDs ?? [])
        let all = subscriptionIDs == nil
        let bodies = try await connection { [bindings] connection in
            let rows = try await connection.query(
                PostgresQuery(
                    unsafeSQL: """
                        SELECT subscription_id, body FROM subscriptions
                        WHERE container = $1 AND owner = $2 AND scope = $3 AND subscriber = $4
                            AND (\(all) OR subscription_id = ANY($5))
                        ORDER BY position
                        """,
                    binds: bindings), logger: logger)
            var bodies: [(String, [UInt8])] = []
            for try await (id, body) in rows.decode((String, ByteBuffer).self) { bodies.append((id, Array(buffer: body))) }
            return bodies
        }
        guard let subscriptionIDs else {
            return try bodies.map { _, body in
                let subscription = try SubscriptionRules.decode(body)
                return SubscriptionFetchOutcome(id: subscription.subscriptionID, result: .success(subscription))
            }
        }
        let byID = Dictionary(bodies, uniquingKeysWith: { first, _ in first })
        return try subscriptionIDs.map { subscriptionID in
            guard let body = byID[subscriptionID] else {
                return SubscriptionFetchOutcome(id: subscriptionID, result: .failure(SubscriptionRules.missing(subscriptionID)))
            }
            return SubscriptionFetchOutcome(id: subscriptionID, result: .success(try SubscriptionRules.decode(body)))
        }
    }

    /// The IDs of `user`'s subscriptions in `key`'s database.
    private static func subscriptionIDs(
        of user: String, in key: DatabaseKey, _ connection: PostgresConnection, _ logger: Logger
    ) async throws -> Set<String> {
        let rows = try await connection.query(
            PostgresQuery(
                unsafeSQL: """
                    SELECT subscription_id FROM subscriptions
                    WHERE container = $1 AND owner = $2 AND scope = $3 AND subscriber = $4
                    """,
                binds: PostgresRows.binds(key, user)), logger: logger)
        var ids = Set<String>()
        for try await id in rows.decode(String.self) { ids.insert(id) }
        return ids
    }

    /// Inserts or replaces checked subscriptions in one statement. A new one takes the
    /// database's next position; one saved again keeps its place (and creation time) among
    /// the others.
    private static func store(
        _ subscriptions: [Wire.Subscription], of user: String, in key: DatabaseKey, now: Int64,
        _ connection: PostgresConnection, _ logger: Logger
    ) async throws {
        var ids: [String] = []
        var kinds: [Int32] = []
        var recordTypes: [String] = []
        var zoneNames: [String] = []  // "" for none (a zone has a name)
        var bodies: [ByteBuffer] = []
        for subscription in subscriptions {
            let columns = SubscriptionRules.columns(of: subscription)
            ids.append(subscription.subscriptionID)
            kinds.append(Int32(columns.kind))
            recordTypes.append(columns.recordType)
            zoneNames.append(columns.zoneName ?? "")
            bodies.append(ByteBuffer(bytes: subscription.serializedBytes()))
        }
        var bindings = PostgresRows.binds(key, user)
        bindings.append(ids)
        bindings.append(kinds)
        bindings.append(recordTypes)
        bindings.append(zoneNames)
        bindings.append(bodies)
        bindings.append(now)
        try await connection.query(
            PostgresQuery(
                unsafeSQL: """
                    WITH saved AS (
                        SELECT * FROM unnest($5::text[], $6::integer[], $7::text[], $8::text[], $9::bytea[])
                            WITH ORDINALITY AS saved (subscription_id, kind, record_type, zone_name, body, ordinal)
                    ),
                    fresh AS (
                        SELECT s.subscription_id, row_number() OVER (ORDER BY s.ordinal) AS rank FROM saved s
                        WHERE NOT EXISTS (
                            SELECT 1 FROM subscriptions t
                            WHERE t.container = $1 AND t.owner = $2 AND t.scope = $3 AND t.subscriber = $4
                                AND t.subscription_id = s.subscription_id)
                    ),
                    last AS (
                        SELECT coalesce(max(position), 0) AS position FROM subscriptions
                        WHERE container = $1 AND owner = $2 AND scope = $3
                    )
                    INSERT INTO subscriptions (container, owner, scope, subscriber, subscription_id, kind, record_type,
                        zone_name, body, created_ns, position)
                    SELECT $1, $2, $3, $4, s.subscription_id, s.kind, s.record_type, nullif(s.zone_name, ''), s.body, $10,
                        last.position + coalesce(f.rank, 0)
                    FROM saved s CROSS JOIN last LEFT JOIN fresh f ON f.subscription_id = s.subscription_id
                    ORDER BY s.ordinal
                    ON CONFLICT (container, owner, scope, subscriber, subscription_id) DO UPDATE SET
                        kind = excluded.kind, record_type = excluded.record_type, zone_name = excluded.zone_name,
                        body = excluded.body
                    """,
                binds: bindings), logger: logger)
    }

    /// Deletes `user`'s subscriptions named in `subscriptionIDs`; the IDs of those that were.
    private static func delete(
        _ subscriptionIDs: [String], of user: String, in key: DatabaseKey, _ connection: PostgresConnection,
        _ logger: Logger
    ) async throws -> Set<String> {
        var bindings = PostgresRows.binds(key, user)
        bindings.append(subscriptionIDs)
        let rows = try await connection.query(
            PostgresQuery(
                unsafeSQL: """
                    DELETE FROM subscriptions
                    WHERE container = $1 AND owner = $2 AND scope = $3 AND subscriber = $4 AND subscription_id = ANY($5)
                    RETURNING subscription_id
                    """,
                binds: bindings), logger: logger)
        var deleted = Set<String>()
        for try await id in rows.decode(String.self) { deleted.insert(id) }
        return deleted
    }
}
