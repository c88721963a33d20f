import CirrusWire
import Foundation
import GRDB

/// One record a write saved or deleted, as subscriptions see it.
struct RecordChange: Sendable {
    var zoneName: String
    var recordType: String
    var recordName: String
    /// The record before the write; nil when it was created, or when no query subscription of
    /// its type needs it (then it is not loaded).
    var old: Wire.Record?
    /// The record after the write; nil when it was deleted.
    var new: Wire.Record?
}

/// A zone a write created or deleted.
struct ZoneChange: Sendable {
    var zoneName: String
    var wasDeleted: Bool
}

/// The subscriptions of one database, decoded and compiled; a write takes them inside its
/// transaction, so a subscription saved or deleted concurrently is either wholly in or out
/// (``SubscriptionCache`` compiles them once per generation of the database's subscriptions).
struct SubscriptionSet: Sendable {
    struct Entry: Sendable {
        /// The subscriber (a user record name).
        var owner: String
        var subscription: Wire.Subscription
        /// A query subscription's predicate; `.constant(true)` for the other kinds.
        var predicate: QueryNode
    }

    var entries: [Entry] = []

    var isEmpty: Bool { entries.isEmpty }

    /// Whether a change of a record of `recordType` needs the record's previous state (a query
    /// subscription compares it with the predicate to tell created, updated and deleted apart).
    func needsPreviousState(of recordType: String) -> Bool {
        entries.contains { entry in
            if case .query(let query) = entry.subscription.kind { return query.recordType == recordType }
            return false
        }
    }

    /// The subscriptions of the database, in the order they were first saved.
    static func load(_ db: Database, databaseID: Int64) throws -> SubscriptionSet {
        let rows = try db.rows(
            sql: """
                SELECT owner, body FROM subscriptions WHERE database_id = ? ORDER BY position
                """,
            arguments: [databaseID])
        var set = SubscriptionSet()
        for row in rows {
            let body: Data = row["body"]
            guard let subscription = try? Wire.Subscription(serializedBytes: [UInt8](body)) else {
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
            set.entries.append(Entry(owner: row["owner"], subscription: subscription, predicate: predicate))
        }
        return set
    }
}

/// Turns what one write changed into notifications: evaluates every subscription of the
/// database, stores a notification in the subscriber's feed for each that fires, and deletes
/// `firesOnce` subscriptions that fired — all inside the write's transaction, so a committed
/// change always has its notifications and a rolled-back one never does.
///
/// What fires:
/// - A query subscription, once per matching record change: `recordCreated` when a record of
///   its type is created matching the predicate or an existing one starts to match it,
///   `recordUpdated` when one that matched still matches after the change, `recordDeleted` when
///   one that matched is deleted or stops matching — each only if its option is set.
/// - A zone subscription, once per write that saved or deleted records (of its record type,
///   when it names one) in its zone, or deleted the zone.
/// - A database subscription, once per write that saved or deleted records (of its record type,
///   when it names one), or created or deleted a zone.
struct NotificationWriter {
    let db: Database
    let key: DatabaseKey
    let now: Wire.Timestamp
    /// The notifications written, per subscriber, in feed order: handed to the observers once
    /// the transaction commits, so a watch need not read back what was just written.
    private(set) var notified: [String: [StoredNotification]] = [:]

    init(db: Database, key: DatabaseKey, now: Wire.Timestamp) {
        self.db = db
        self.key = key
        self.now = now
    }

    mutating func fire(
        _ subscriptions: SubscriptionSet, databaseID: Int64, records: [RecordChange], zones: [ZoneChange]
    ) throws {
        guard !subscriptions.isEmpty, !records.isEmpty || !zones.isEmpty else { return }
        for entry in subscriptions.entries {
            switch entry.subscription.kind {
            case .query(let query):
                try fireQuery(entry, query, databaseID: databaseID, records: records)
            case .recordZone(let zone):
                let zoneName = zone.zoneID?.zoneName ?? RecordCodec.defaultZoneName
                let recordsChanged = records.contains { change in
                    change.zoneName == zoneName && (zone.recordType.isEmpty || change.recordType == zone.recordType)
                }
                let zoneDeleted = zones.contains { $0.zoneName == zoneName && $0.wasDeleted }
                if recordsChanged || zoneDeleted {
                    try store(
                        entry, type: .recordZone,
                        detail: .recordZone(Wire.RecordZoneNotification(
                            zoneID: ZoneResolution.zoneID(zoneName, in: key), databaseScope: key.scope)),
                        record: nil)
                }
            case .database(let database):
                let recordsChanged = records.contains {
                    database.recordType.isEmpty || $0.recordType == database.recordType
                }
                if recordsChanged || (!zones.isEmpty && database.recordType.isEmpty) {
                    try store(
                        entry, type: .database,
                        detail: .database(Wire.DatabaseNotification(databaseScope: key.scope)), record: nil)
                }
            case nil:
                continue
            }
        }
    }

    private mutating func fireQuery(
        _ entry: SubscriptionSet.Entry, _ query: Wire.QuerySubscription, databaseID: Int64, records: [RecordChange]
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
            try store(
                entry, type: .query,
                detail: .query(Wire.QueryNotification(
                    reason: reason,
                    recordID: Wire.RecordID(
                        recordName: change.recordName, zoneID: ZoneResolution.zoneID(change.zoneName, in: key)),
                    recordFields: fields,
                    databaseScope: key.scope)),
                record: record)
            if query.firesOnce {
                try db.run(
                    sql: "DELETE FROM subscriptions WHERE database_id = ? AND owner = ? AND subscription_id = ?",
                    arguments: [databaseID, entry.owner, entry.subscription.subscriptionID])
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

    /// Appends one notification to the subscriber's feed.
    private mutating func store(
        _ entry: SubscriptionSet.Entry, type: Wire.NotificationType, detail: Wire.PushNotification.Detail,
        record: Wire.Record?
    ) throws {
        let info = entry.subscription.notificationInfo ?? Wire.NotificationInfo()
        guard let feed = try db.row(
            sql: """
                INSERT INTO notification_feeds (container, owner, head_seq, badge) VALUES (?, ?, 1, ?)
                ON CONFLICT (container, owner) DO UPDATE SET head_seq = head_seq + 1, badge = badge + excluded.badge
                RETURNING head_seq, badge
                """,
            arguments: [key.container, entry.owner, info.shouldBadge ? 1 : 0])
        else {
            throw StoreError(.storageFailure, "notification feed vanished after insert")
        }
        let seq: Int64 = feed["head_seq"]
        let badge: Int64 = feed["badge"]

        var notification = Wire.PushNotification()
        notification.notificationID = UUID().uuidString.lowercased()
        notification.notificationType = type
        notification.containerIdentifier = key.container
        notification.subscriptionID = entry.subscription.subscriptionID
        notification.subscriptionOwnerUserRecordID = entry.owner
        notification.alert = Self.alert(info, record: record)
        notification.badge = info.shouldBadge ? UInt32(clamping: badge) : nil
        notification.soundName = info.soundName
        notification.category = info.category
        notification.creationDate = now
        notification.detail = detail
        try db.run(
            sql: """
                INSERT INTO notifications (container, owner, seq, scope, created_ns, body, notification_id)
                VALUES (?, ?, ?, ?, ?, ?, ?)
                """,
            arguments: [key.container, entry.owner, seq, key.scope.rawValue, RecordCodec.nanoseconds(now),
                        Data(notification.serializedBytes()), notification.notificationID])
        notified[entry.owner, default: []].append(StoredNotification(seq: seq, scope: key.scope, notification: notification))
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

extension QueryText {
    /// Whether `record`'s searchable text holds every word of `search`, ignoring case and
    /// diacritics — what FTS5's unicode61 tokenizer decides for a stored record, for a record
    /// that is not (or no longer) in the index.
    static func holds(_ search: QueryTextSearch, in record: Wire.Record) -> Bool {
        guard let text = RecordCodec.searchableText(of: record) else { return false }
        let words = Set(tokens(of: text).map(fold))
        return search.tokens.flatMap { tokens(of: $0) }.allSatisfy { words.contains(fold($0)) }
    }

    private static func fold(_ token: String) -> String {
        token.folding(options: [.caseInsensitive, .diacriticInsensitive], locale: nil)
    }
}
