import CirrusWire
import Foundation

/// One record a write saved or deleted, as subscriptions see it.
package struct RecordChange: Sendable {
    package var zoneName: String
    package var recordType: String
    package var recordName: String
    /// The record before the write; nil when it was created, or when no query subscription of
    /// its type needs it (then it is not loaded).
    package var old: Wire.Record?
    /// The record after the write; nil when it was deleted.
    package var new: Wire.Record?

    package init(zoneName: String, recordType: String, recordName: String, old: Wire.Record?, new: Wire.Record?) {
        self.zoneName = zoneName
        self.recordType = recordType
        self.recordName = recordName
        self.old = old
        self.new = new
    }
}

/// A zone a write created or deleted.
package struct ZoneChange: Sendable {
    package var zoneName: String
    package var wasDeleted: Bool

    package init(zoneName: String, wasDeleted: Bool) {
        self.zoneName = zoneName
        self.wasDeleted = wasDeleted
    }
}

/// The subscriptions of one database, decoded and compiled; a write takes them inside its
/// transaction, so a subscription saved or deleted concurrently is either wholly in or out
/// (each engine compiles them once per generation of the database's subscriptions,
/// ``SubscriptionSetCache``).
package struct SubscriptionSet: Sendable {
    struct Entry: Sendable {
        /// The subscriber (a user record name).
        var owner: String
        var subscription: Wire.Subscription
        /// A query subscription's predicate; `.constant(true)` for the other kinds.
        var predicate: QueryNode
    }

    var entries: [Entry] = []

    package init() {}

    package var isEmpty: Bool { entries.isEmpty }

    /// Whether a change of a record of `recordType` needs the record's previous state (a query
    /// subscription compares it with the predicate to tell created, updated and deleted apart).
    package func needsPreviousState(of recordType: String) -> Bool {
        entries.contains { entry in
            if case .query(let query) = entry.subscription.kind { return query.recordType == recordType }
            return false
        }
    }

    /// Decodes and compiles stored subscriptions (subscriber, serialized `Wire.Subscription`),
    /// given in the order they were first saved: the order they fire in.
    ///
    /// - throws: ``StoreError`` `.corruptData` when a stored subscription does not decode.
    package static func compile(_ rows: [(owner: String, body: [UInt8])]) throws(StoreError) -> SubscriptionSet {
        var set = SubscriptionSet()
        set.entries.reserveCapacity(rows.count)
        for row in rows {
            guard let subscription = try? Wire.Subscription(serializedBytes: row.body) else {
                throw StoreError(.corruptData, "a stored subscription does not decode")
            }
            var predicate = QueryNode.constant(true)
            if case .query(let query) = subscription.kind {
                // Validated when saved; a predicate that no longer compiles matches nothing
                // rather than failing every write to the database.
                let compiled = try? QueryValidation.compile(
                    Wire.Query(recordType: query.recordType, predicate: query.predicate))
                predicate = compiled?.predicate ?? .constant(false)
            }
            set.entries.append(Entry(owner: row.owner, subscription: subscription, predicate: predicate))
        }
        return set
    }
}

/// What one write's changes fire, before the notifications have places in their feeds: every
/// engine runs ``SubscriptionMatcher`` inside the write's transaction, stores the
/// notifications in the subscribers' feeds (``placed(after:)``) and deletes the `firesOnce`
/// subscriptions that fired, so a committed change always has its notifications and a
/// rolled-back one never does.
package struct SubscriptionFirings: Sendable {
    /// One notification to store, in firing order.
    package struct Firing: Sendable {
        /// The subscriber, whose feed it goes to.
        package var owner: String
        /// Complete but for its feed position and badge.
        package var notification: Wire.PushNotification
        /// Whether its subscription badges (the feed's badge count grows by one).
        package var badges: Bool
    }

    /// A `firesOnce` subscription that fired: deleted by the same write.
    package struct FiredOnce: Sendable, Hashable {
        package var owner: String
        package var subscriptionID: String
    }

    /// How many notifications one subscriber's feed gets, and how many of them badge.
    package struct FeedGrowth: Sendable, Hashable {
        package var owner: String
        package var count: Int64
        package var badges: Int64
    }

    /// A feed's head sequence and badge count after the write added its notifications.
    package struct FeedPosition: Sendable, Hashable {
        package var head: Int64
        package var badge: Int64

        package init(head: Int64, badge: Int64) {
            self.head = head
            self.badge = badge
        }
    }

    package var firings: [Firing] = []
    package var firedOnce: [FiredOnce] = []
    /// The scope of the database whose change fired them.
    package var scope: Wire.DatabaseScope

    package var isEmpty: Bool { firings.isEmpty }

    /// How much each subscriber's feed grows, by subscriber (a store that locks feed rows
    /// takes them in this order).
    package var growth: [FeedGrowth] {
        var byOwner: [String: FeedGrowth] = [:]
        for firing in firings {
            byOwner[firing.owner, default: FeedGrowth(owner: firing.owner, count: 0, badges: 0)].count += 1
            if firing.badges { byOwner[firing.owner]?.badges += 1 }
        }
        return byOwner.values.sorted { $0.owner < $1.owner }
    }

    /// The notifications placed in their feeds, per subscriber in feed order, given where each
    /// feed stands once it grew by ``growth`` (its notifications are the last of the feed).
    ///
    /// - throws: ``StoreError`` `.storageFailure` when a subscriber's feed position is missing.
    package func placed(after positions: [String: FeedPosition]) throws(StoreError) -> [String: [StoredNotification]] {
        var next: [String: FeedPosition] = [:]
        for growth in growth {
            guard let position = positions[growth.owner] else {
                throw StoreError(.storageFailure, "the notification feed of \(growth.owner) did not move")
            }
            next[growth.owner] = FeedPosition(head: position.head - growth.count, badge: position.badge - growth.badges)
        }
        var placed: [String: [StoredNotification]] = [:]
        for firing in firings {
            guard var position = next[firing.owner] else { continue }
            position.head += 1
            var notification = firing.notification
            if firing.badges {
                position.badge += 1
                notification.badge = UInt32(clamping: position.badge)
            }
            next[firing.owner] = position
            placed[firing.owner, default: []].append(
                StoredNotification(seq: position.head, scope: scope, notification: notification))
        }
        return placed
    }
}

/// Turns what one write changed into the notifications its database's subscriptions fire.
///
/// What fires:
/// - A query subscription, once per matching record change: `recordCreated` when a record of
///   its type is created matching the predicate or an existing one starts to match it,
///   `recordUpdated` when one that matched still matches after the change, `recordDeleted` when
///   one that matched is deleted or stops matching — each only if its option is set. A
///   `firesOnce` subscription fires for its first matching change only, and is deleted.
/// - A zone subscription, once per write that saved or deleted records (of its record type,
///   when it names one) in its zone, or deleted the zone.
/// - A database subscription, once per write that saved or deleted records (of its record type,
///   when it names one), or created or deleted a zone.
package struct SubscriptionMatcher {
    let key: DatabaseKey
    let now: Wire.Timestamp

    package init(key: DatabaseKey, now: Wire.Timestamp) {
        self.key = key
        self.now = now
    }

    /// What `subscriptions` fire for a write of `key`'s database that changed `records` and
    /// `zones`, in subscription order, then change order.
    package func fire(
        _ subscriptions: SubscriptionSet, records: [RecordChange], zones: [ZoneChange]
    ) throws -> SubscriptionFirings {
        var firings = SubscriptionFirings(scope: key.scope)
        guard !subscriptions.isEmpty, !records.isEmpty || !zones.isEmpty else { return firings }
        for entry in subscriptions.entries {
            switch entry.subscription.kind {
            case .query(let query):
                try fireQuery(entry, query, records: records, into: &firings)
            case .recordZone(let zone):
                let zoneName = zone.zoneID?.zoneName ?? RecordCodec.defaultZoneName
                let recordsChanged = records.contains { change in
                    change.zoneName == zoneName && (zone.recordType.isEmpty || change.recordType == zone.recordType)
                }
                let zoneDeleted = zones.contains { $0.zoneName == zoneName && $0.wasDeleted }
                if recordsChanged || zoneDeleted {
                    firings.firings.append(
                        firing(
                            entry, type: .recordZone,
                            detail: .recordZone(
                                Wire.RecordZoneNotification(
                                    zoneID: ZoneResolution.zoneID(zoneName, in: key), databaseScope: key.scope)),
                            record: nil))
                }
            case .database(let database):
                let recordsChanged = records.contains {
                    database.recordType.isEmpty || $0.recordType == database.recordType
                }
                if recordsChanged || (!zones.isEmpty && database.recordType.isEmpty) {
                    firings.firings.append(
                        firing(
                            entry, type: .database, detail: .database(Wire.DatabaseNotification(databaseScope: key.scope)),
                            record: nil))
                }
            case nil:
                continue
            }
        }
        return firings
    }

    private func fireQuery(
        _ entry: SubscriptionSet.Entry, _ query: Wire.QuerySubscription, records: [RecordChange],
        into firings: inout SubscriptionFirings
    ) throws {
        let zoneName = query.zoneID?.zoneName
        for change in records where change.recordType == query.recordType {
            if let zoneName, change.zoneName != zoneName { continue }
            let matchedBefore = try change.old.map { try matches(entry.predicate, $0, zoneName: change.zoneName) } ?? false
            let matchesNow = try change.new.map { try matches(entry.predicate, $0, zoneName: change.zoneName) } ?? false
            let reason: Wire.QueryNotificationReason
            switch (matchedBefore, matchesNow) {
            case (false, true):
                guard query.firesOnRecordCreation else { continue }
                reason = .recordCreated
            case (true, true):
                guard query.firesOnRecordUpdate else { continue }
                reason = .recordUpdated
            case (true, false):
                guard query.firesOnRecordDeletion else { continue }
                reason = .recordDeleted
            case (false, false):
                continue
            }
            let record = change.new ?? change.old
            let fields = RecordCodec.restrict(
                record ?? Wire.Record(), to: entry.subscription.notificationInfo?.desiredKeys ?? []
            ).fields
            firings.firings.append(
                firing(
                    entry, type: .query,
                    detail: .query(
                        Wire.QueryNotification(
                            reason: reason,
                            recordID: Wire.RecordID(
                                recordName: change.recordName, zoneID: ZoneResolution.zoneID(change.zoneName, in: key)),
                            recordFields: fields,
                            databaseScope: key.scope)),
                    record: record))
            if query.firesOnce {
                firings.firedOnce.append(
                    SubscriptionFirings.FiredOnce(owner: entry.owner, subscriptionID: entry.subscription.subscriptionID))
                return
            }
        }
    }

    private func matches(_ predicate: QueryNode, _ record: Wire.Record, zoneName: String) throws -> Bool {
        let evaluator = QueryEvaluator(zoneName: zoneName, databaseOwner: key.owner) { _, search in
            QueryText.holds(search, in: record)
        }
        return try evaluator.matches(predicate, record, rowID: 0)
    }

    /// One notification of `entry`, complete but for its feed position and badge.
    private func firing(
        _ entry: SubscriptionSet.Entry, type: Wire.NotificationType, detail: Wire.PushNotification.Detail,
        record: Wire.Record?
    ) -> SubscriptionFirings.Firing {
        let info = entry.subscription.notificationInfo ?? Wire.NotificationInfo()
        var notification = Wire.PushNotification()
        notification.notificationID = RandomUUID.string().lowercased()
        notification.notificationType = type
        notification.containerIdentifier = key.container
        notification.subscriptionID = entry.subscription.subscriptionID
        notification.subscriptionOwnerUserRecordID = entry.owner
        notification.alert = Self.alert(info, record: record)
        notification.soundName = info.soundName
        notification.category = info.category
        notification.creationDate = now
        notification.detail = detail
        return SubscriptionFirings.Firing(owner: entry.owner, notification: notification, badges: info.shouldBadge)
    }

    /// The alert a subscription's notification info asks for, its localization arguments (field
    /// keys) replaced by the record's values; nil when it asks for none.
    static func alert(_ info: Wire.NotificationInfo, record: Wire.Record?) -> Wire.NotificationAlert? {
        func values(_ keys: [String]) -> [String] {
            keys.map { key in
                guard let field = record?.fields.first(where: { $0.key == key && !$0.isEncrypted }) else { return "" }
                return Self.text(of: field.value?.kind)
            }
        }
        let alert = Wire.NotificationAlert(
            title: info.title,
            titleLocalizationKey: info.titleLocalizationKey,
            titleLocalizationArgs: values(info.titleLocalizationArgs),
            subtitle: info.subtitle,
            subtitleLocalizationKey: info.subtitleLocalizationKey,
            subtitleLocalizationArgs: values(info.subtitleLocalizationArgs),
            body: info.alertBody,
            bodyLocalizationKey: info.alertLocalizationKey,
            bodyLocalizationArgs: values(info.alertLocalizationArgs),
            actionLocalizationKey: info.alertActionLocalizationKey,
            launchImage: info.alertLaunchImage)
        return alert == Wire.NotificationAlert() ? nil : alert
    }

    /// A field value as an alert shows it.
    private static func text(of kind: Wire.FieldValue.Kind?) -> String {
        switch kind {
        case .stringValue(let value): value
        case .int64Value(let value): String(value)
        case .doubleValue(let value): String(value)
        case .dateValue(let value): String(RecordCodec.seconds(value))
        case .referenceValue(let reference): reference.recordID?.recordName ?? ""
        case .stringList(let list): list.values.joined(separator: ", ")
        case .int64List(let list): list.values.map(String.init).joined(separator: ", ")
        case .doubleList(let list): list.values.map { String($0) }.joined(separator: ", ")
        default: ""
        }
    }
}
