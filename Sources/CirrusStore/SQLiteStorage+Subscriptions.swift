public import CirrusWire
import Foundation
import GRDB

extension SQLiteStorage {
    /// Subscriptions one user may keep in one database.
    public static let maximumSubscriptionsPerDatabase = 1_000

    public func modifySubscriptions(
        saving subscriptions: [Wire.Subscription], deleting subscriptionIDs: [String], in database: DatabaseKey,
        by user: String
    ) async throws -> SubscriptionModificationResult {
        let key = try database.validated()
        try checkItemCount(subscriptions.count + subscriptionIDs.count)
        guard !user.isEmpty else { throw StoreError(.invalidArguments, "no user record name") }
        if subscriptions.isEmpty && subscriptionIDs.isEmpty { return SubscriptionModificationResult() }
        let now = RecordCodec.nanoseconds(clock())
        return try await write(weight: subscriptions.count + subscriptionIDs.count) { db in
            let databaseID = try StoreRows.ensureDatabase(db, key)
            var result = SubscriptionModificationResult()
            var seen = Set<String>()
            for subscription in subscriptions {
                var checked = try SubscriptionValidation.check(subscription, in: key) { name in
                    try StoreRows.liveZone(db, databaseID, name) != nil
                }
                if case .success = checked, !seen.insert(subscription.subscriptionID).inserted {
                    checked = .failure(RecordCodec.error(
                        .invalidArguments, "subscription \(subscription.subscriptionID) appears twice in one request"))
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
                let failure =
                    db.changesCount == 0
                    ? RecordCodec.error(.unknownItem, "subscription \(subscriptionID) does not exist") : nil
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
        if !exists {
            let count =
                try db.int64(
                    sql: "SELECT count(*) FROM subscriptions WHERE database_id = ? AND owner = ?",
                    arguments: [databaseID, owner]) ?? 0
            if count >= maximumSubscriptionsPerDatabase {
                return RecordCodec.error(
                    .limitExceeded, "at most \(maximumSubscriptionsPerDatabase) subscriptions per user and database")
            }
        }
        let (kind, recordType, zoneName): (Int, String, String?) =
            switch subscription.kind {
            case .query(let query): (1, query.recordType, query.zoneID?.zoneName)
            case .recordZone(let zone): (2, zone.recordType, zone.zoneID?.zoneName)
            case .database(let database): (3, database.recordType, nil)
            case nil: (0, "", nil)
            }
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
            func decode(_ body: Data) throws -> Wire.Subscription {
                do {
                    return try Wire.Subscription(serializedBytes: [UInt8](body))
                } catch {
                    throw StoreError(.corruptData, "a stored subscription does not decode: \(error)")
                }
            }
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
                        result: .failure(RecordCodec.error(.unknownItem, "subscription \(subscriptionID) does not exist")))
                }
                return SubscriptionFetchOutcome(id: subscriptionID, result: .success(try decode(body)))
            }
        }
    }

    public func notificationChanges(
        for feed: NotificationFeedKey, after: Int64?, limit: Int
    ) async throws -> NotificationBatch {
        guard limit > 0 else { throw StoreError(.invalidArguments, "a notification batch needs a positive limit") }
        return try await read { db in
            let row = try Row.fetchOne(
                db, sql: "SELECT head_seq, pruned_seq FROM notification_feeds WHERE container = ? AND owner = ?",
                arguments: [feed.container, feed.user])
            let head: Int64 = row?["head_seq"] ?? 0
            let pruned: Int64 = row?["pruned_seq"] ?? 0
            let start = after ?? pruned
            guard start >= pruned else {
                throw StoreError(
                    .changeTokenExpired, "notifications after this change token were pruned; fetch without a token")
            }
            guard start <= head else {
                throw StoreError(.changeTokenExpired, "the change token is ahead of the notification feed")
            }
            let rows = try Row.fetchAll(
                db,
                sql: """
                    SELECT seq, scope, body, is_read FROM notifications WHERE container = ? AND owner = ? AND seq > ?
                    ORDER BY seq LIMIT ?
                    """,
                arguments: [feed.container, feed.user, start, limit])
            let notifications = try rows.map { row -> StoredNotification in
                let body: Data = row["body"]
                guard var notification = try? Wire.PushNotification(serializedBytes: [UInt8](body)) else {
                    throw StoreError(.corruptData, "a stored notification does not decode")
                }
                notification.isRead = (row["is_read"] as Int64? ?? 0) != 0
                return StoredNotification(
                    seq: row["seq"], scope: Wire.DatabaseScope(rawValue: row["scope"]), notification: notification)
            }
            let last = notifications.last?.seq ?? head
            let moreComing = notifications.count == limit && last < head
            return NotificationBatch(notifications: notifications, lastSeq: moreComing ? last : head, moreComing: moreComing)
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

/// Checks a subscription to save as CloudKit does, and names its zone as the store does.
enum SubscriptionValidation {
    /// The subscription as it is stored, or why it is refused. `zoneExists` says whether a
    /// custom zone of the database exists.
    static func check(
        _ subscription: Wire.Subscription, in key: DatabaseKey, zoneExists: (String) throws -> Bool
    ) rethrows -> ItemResult<Wire.Subscription> {
        let id = subscription.subscriptionID
        func refuse(_ message: String, _ code: ItemFailure.Code = .invalidArguments) -> ItemResult<Wire.Subscription> {
            .failure(RecordCodec.error(code, "subscription \(id): \(message)"))
        }
        if let failure = RecordCodec.checkName(id, of: "subscription") { return .failure(failure) }
        var stored = subscription
        func zone(_ zoneID: Wire.RecordZoneID) throws -> ItemResult<String> {
            switch ZoneResolution.zoneName(of: zoneID, in: key) {
            case .failure:
                return .failure(RecordCodec.error(.zoneNotFound, "subscription \(id): zone \(zoneID.zoneName) does not exist"))
            case .success(let name):
                let exists = try name == RecordCodec.defaultZoneName || (key.scope == .private && zoneExists(name))
                guard exists else {
                    return .failure(RecordCodec.error(.zoneNotFound, "subscription \(id): zone \(name) does not exist"))
                }
                return .success(name)
            }
        }
        func recordTypeProblem(_ recordType: String) -> String? {
            recordType.utf8.count <= RecordCodec.maxNameLength && RecordCodec.checkName(recordType, of: "record") == nil
                ? nil : "invalid record type \"\(recordType)\""
        }
        switch subscription.kind {
        case nil:
            return refuse("no kind: a query, record zone or database subscription")
        case .query(var query):
            guard key.scope != .shared else { return refuse("query subscriptions are not supported in the shared database") }
            if let problem = recordTypeProblem(query.recordType) { return refuse(problem) }
            guard query.firesOnRecordCreation || query.firesOnRecordUpdate || query.firesOnRecordDeletion else {
                return refuse(
                    "a query subscription needs firesOnRecordCreation, firesOnRecordUpdate or firesOnRecordDeletion")
            }
            do {
                _ = try QueryValidation.compile(Wire.Query(recordType: query.recordType, predicate: query.predicate))
            } catch {
                return refuse(error.message)
            }
            if let zoneID = query.zoneID {
                switch try zone(zoneID) {
                case .failure(let failure): return .failure(failure)
                case .success(let name): query.zoneID = ZoneResolution.zoneID(name, in: key)
                }
            }
            stored.kind = .query(query)
        case .recordZone(var subscriptionZone):
            guard key.scope == .private else {
                return refuse("record zone subscriptions are only supported in the private database")
            }
            guard let zoneID = subscriptionZone.zoneID else { return refuse("a record zone subscription needs a zone ID") }
            if !subscriptionZone.recordType.isEmpty, let problem = recordTypeProblem(subscriptionZone.recordType) {
                return refuse(problem)
            }
            switch try zone(zoneID) {
            case .failure(let failure):
                return .failure(failure)
            case .success(let name):
                guard name != RecordCodec.defaultZoneName else {
                    return refuse("record zone subscriptions are not supported in the default zone; use a custom zone")
                }
                subscriptionZone.zoneID = ZoneResolution.zoneID(name, in: key)
            }
            stored.kind = .recordZone(subscriptionZone)
        case .database(let database):
            guard key.scope != .public else {
                return refuse("database subscriptions are not supported in the public database")
            }
            if !database.recordType.isEmpty, let problem = recordTypeProblem(database.recordType) { return refuse(problem) }
        }
        if let info = subscription.notificationInfo {
            let keys =
                info.desiredKeys + info.alertLocalizationArgs + info.titleLocalizationArgs + info.subtitleLocalizationArgs
            for fieldKey in keys {
                if let failure = RecordCodec.checkFieldKey(fieldKey) {
                    return refuse("notification info: \(failure.message)")
                }
            }
        }
        return .success(stored)
    }
}
