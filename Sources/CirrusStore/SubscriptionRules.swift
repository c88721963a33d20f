import CirrusWire
import Foundation

/// The rules of ``SubscriptionStorage`` every engine shares: what a subscription to save must
/// be, how many a user keeps, and how a notification feed is read.
package enum SubscriptionRules {
    /// Subscriptions one user may keep in one database.
    package static let maximumPerDatabase = 1_000

    /// Checks the arguments of a modify-subscriptions request (before anything is read).
    ///
    /// - throws: ``StoreError`` `.invalidArguments` without a user.
    package static func checkSubscriber(_ user: String) throws(StoreError) {
        guard !user.isEmpty else { throw StoreError(.invalidArguments, "no user record name") }
    }

    /// A subscription to save as it is stored, or why it is refused: CloudKit's checks
    /// (``SubscriptionValidation``), then whether the request names its ID a second time
    /// (`seen` holds the IDs of the request's subscriptions checked so far and accepted).
    /// `zoneExists` says whether a custom zone of the database exists.
    package static func check(
        _ subscription: Wire.Subscription, in key: DatabaseKey, seen: inout Set<String>,
        zoneExists: (String) throws -> Bool
    ) rethrows -> ItemResult<Wire.Subscription> {
        let checked = try SubscriptionValidation.check(subscription, in: key, zoneExists: zoneExists)
        if case .success = checked, !seen.insert(subscription.subscriptionID).inserted {
            return .failure(
                RecordCodec.error(.invalidArguments, "subscription \(subscription.subscriptionID) appears twice in one request"))
        }
        return checked
    }

    /// Why a subscription cannot be stored, or nil: a new one (`exists` false) fails when its
    /// subscriber already keeps `count` subscriptions in the database, the most allowed.
    package static func limitRefusal(exists: Bool, count: Int) -> ItemFailure? {
        guard !exists, count >= maximumPerDatabase else { return nil }
        return RecordCodec.error(.limitExceeded, "at most \(maximumPerDatabase) subscriptions per user and database")
    }

    /// What a failed deletion of a subscription reports.
    package static func missing(_ subscriptionID: String) -> ItemFailure {
        RecordCodec.error(.unknownItem, "subscription \(subscriptionID) does not exist")
    }

    /// The kind of a subscription as stored (1 query, 2 zone, 3 database), the record type it
    /// names and its zone's name, copied out of its body for reading.
    package static func columns(of subscription: Wire.Subscription) -> (kind: Int, recordType: String, zoneName: String?) {
        switch subscription.kind {
        case .query(let query): (1, query.recordType, query.zoneID?.zoneName)
        case .recordZone(let zone): (2, zone.recordType, zone.zoneID?.zoneName)
        case .database(let database): (3, database.recordType, nil)
        case nil: (0, "", nil)
        }
    }

    /// A stored subscription's body, decoded.
    ///
    /// - throws: ``StoreError`` `.corruptData`.
    package static func decode(_ body: [UInt8]) throws(StoreError) -> Wire.Subscription {
        do {
            return try Wire.Subscription(serializedBytes: body)
        } catch {
            throw StoreError(.corruptData, "a stored subscription does not decode: \(error)")
        }
    }
}

/// How a notification feed is read, in every engine.
package enum NotificationFeedRules {
    /// Checks the limit of a read of a feed.
    ///
    /// - throws: ``StoreError`` `.invalidArguments` for a limit below 1.
    package static func checkLimit(_ limit: Int) throws(StoreError) {
        guard limit > 0 else { throw StoreError(.invalidArguments, "a notification batch needs a positive limit") }
    }

    /// The sequence a read of a feed starts after: `after`, or where the feed was pruned to.
    ///
    /// - throws: ``StoreError`` `.changeTokenExpired` when notifications after `after` were
    ///   pruned, or `after` is past the feed's last notification (`head`).
    package static func start(after: Int64?, head: Int64, pruned: Int64) throws(StoreError) -> Int64 {
        let start = after ?? pruned
        guard start >= pruned else {
            throw StoreError(.changeTokenExpired, "notifications after this change token were pruned; fetch without a token")
        }
        guard start <= head else {
            throw StoreError(.changeTokenExpired, "the change token is ahead of the notification feed")
        }
        return start
    }

    /// A stored notification: its body, with whether its user marked it read.
    ///
    /// - throws: ``StoreError`` `.corruptData` when the body does not decode.
    package static func notification(
        seq: Int64, scope: Int32, body: [UInt8], isRead: Bool
    ) throws(StoreError) -> StoredNotification {
        guard var notification = try? Wire.PushNotification(serializedBytes: body) else {
            throw StoreError(.corruptData, "a stored notification does not decode")
        }
        notification.isRead = isRead
        return StoredNotification(seq: seq, scope: Wire.DatabaseScope(rawValue: scope), notification: notification)
    }

    /// The batch of `notifications`, read after the start with `limit`, of a feed whose last
    /// notification is `head`.
    package static func batch(_ notifications: [StoredNotification], head: Int64, limit: Int) -> NotificationBatch {
        let last = notifications.last?.seq ?? head
        let moreComing = notifications.count == limit && last < head
        return NotificationBatch(notifications: notifications, lastSeq: moreComing ? last : head, moreComing: moreComing)
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
