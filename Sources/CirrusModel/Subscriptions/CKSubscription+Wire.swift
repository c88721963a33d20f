import CirrusWire
import Foundation

extension CKSubscription {
    /// The subscription as a wire message, after the checks CloudKit makes before sending.
    ///
    /// - throws: `CKError` `.invalidArguments` for an empty ID, a query subscription without a
    ///   record type, firing on nothing or with a predicate that did not parse (the message is
    ///   the `CKPredicate.ParseError`'s), a zone subscription on the default zone, or a string
    ///   containing U+0000.
    package var wireSubscription: Wire.Subscription {
        get throws(CKError) {
            let id = self.subscriptionID
            guard !id.isEmpty else {
                throw CKError(.invalidArguments, message: "a subscription needs a non-empty subscriptionID")
            }
            try FieldValue.checkWireString(id, what: "subscription ID \"\(id)\"")
            let kind: Wire.Subscription.Kind
            switch self {
            case let query as CKQuerySubscription:
                kind = .query(try query.wireQuerySubscription)
            case let zone as CKRecordZoneSubscription:
                guard zone.zoneID.zoneName != CKRecordZone.ID.defaultZoneName else {
                    throw CKError(
                        .invalidArguments,
                        message: "zone subscription \"\(id)\" names the default zone; zone subscriptions need a custom zone"
                    )
                }
                try FieldValue.checkWireString(zone.zoneID.zoneName, what: "the zone name of subscription \"\(id)\"")
                try FieldValue.checkWireString(zone.zoneID.ownerName, what: "the owner name of subscription \"\(id)\"")
                let recordType = zone.recordType ?? ""
                try FieldValue.checkWireString(recordType, what: "the record type of subscription \"\(id)\"")
                kind = .recordZone(Wire.RecordZoneSubscription(zoneID: zone.zoneID.wireZoneID, recordType: recordType))
            case let database as CKDatabaseSubscription:
                let recordType = database.recordType ?? ""
                try FieldValue.checkWireString(recordType, what: "the record type of subscription \"\(id)\"")
                kind = .database(Wire.DatabaseSubscription(recordType: recordType))
            default:
                throw CKError(
                    .invalidArguments,
                    message: "subscription \"\(id)\" is a \(type(of: self)); use CKQuerySubscription, CKRecordZoneSubscription or CKDatabaseSubscription"
                )
            }
            return Wire.Subscription(subscriptionID: id, kind: kind, notificationInfo: try self.notificationInfo?.wireNotificationInfo)
        }
    }

    /// Checks the rules of the database the subscription is saved to, as CloudKit does: no
    /// query subscriptions in the shared database, no zone or database subscriptions in the
    /// public database.
    ///
    /// - throws: `CKError` `.invalidArguments` naming the rule.
    public func validate(for scope: CKDatabaseScope) throws(CKError) {
        let refused: String?
        switch (self.subscriptionType, scope) {
        case (.query, .shared): refused = "query subscriptions are not available in the shared database"
        case (.recordZone, .public): refused = "zone subscriptions are not available in the public database"
        case (.database, .public): refused = "database subscriptions are not available in the public database"
        default: refused = nil
        }
        if let refused {
            throw CKError(.invalidArguments, message: "subscription \"\(self.subscriptionID)\": \(refused)")
        }
    }

    /// The subscription a wire message describes, as its subclass.
    ///
    /// - throws: `CKError` `.invalidArguments` for an empty ID, no kind, or a zone
    ///   subscription without a valid zone.
    package static func make(wire: Wire.Subscription) throws(CKError) -> CKSubscription {
        let id = wire.subscriptionID
        guard !id.isEmpty else {
            throw CKError(.invalidArguments, message: "invalid subscription from the wire: empty subscription ID")
        }
        let subscription: CKSubscription
        switch wire.kind {
        case .query(let query):
            let made = CKQuerySubscription(
                recordType: query.recordType,
                predicate: query.predicate.map(CKPredicate.init(wire:)) ?? CKPredicate(value: true),
                subscriptionID: id,
                options: CKQuerySubscription.Options(wire: query)
            )
            made.zoneID = try query.zoneID.map { (zone) throws(CKError) in try CKRecordZone.ID(wire: zone) }
            subscription = made
        case .recordZone(let zone):
            guard let wireZoneID = zone.zoneID else {
                throw CKError(.invalidArguments, message: "invalid zone subscription \"\(id)\" from the wire: no zone ID")
            }
            let made = CKRecordZoneSubscription(zoneID: try CKRecordZone.ID(wire: wireZoneID), subscriptionID: id)
            made.recordType = zone.recordType.isEmpty ? nil : zone.recordType
            subscription = made
        case .database(let database):
            let made = CKDatabaseSubscription(subscriptionID: id)
            made.recordType = database.recordType.isEmpty ? nil : database.recordType
            subscription = made
        case nil:
            throw CKError(.invalidArguments, message: "invalid subscription \"\(id)\" from the wire: no kind")
        }
        subscription.notificationInfo = wire.notificationInfo.map(NotificationInfo.init(wire:))
        return subscription
    }
}

extension CKQuerySubscription {
    var wireQuerySubscription: Wire.QuerySubscription {
        get throws(CKError) {
            let id = self.subscriptionID
            guard !self.recordType.isEmpty else {
                throw CKError(.invalidArguments, message: "query subscription \"\(id)\" needs a record type")
            }
            try FieldValue.checkWireString(self.recordType, what: "the record type of subscription \"\(id)\"")
            let options = self.querySubscriptionOptions
            guard !options.isDisjoint(with: [.firesOnRecordCreation, .firesOnRecordUpdate, .firesOnRecordDeletion]) else {
                throw CKError(
                    .invalidArguments,
                    message: "query subscription \"\(id)\" fires on nothing: its options need firesOnRecordCreation, "
                        + "firesOnRecordUpdate or firesOnRecordDeletion"
                )
            }
            let predicate: Wire.QueryPredicate
            do {
                predicate = try self.predicate.wirePredicate
            } catch {
                throw CKError(
                    .invalidArguments,
                    message: "the predicate of query subscription \"\(id)\" is invalid: \(error.description)",
                    userInfo: [NSUnderlyingErrorKey: error]
                )
            }
            if let zoneID = self.zoneID {
                try FieldValue.checkWireString(zoneID.zoneName, what: "the zone name of subscription \"\(id)\"")
                try FieldValue.checkWireString(zoneID.ownerName, what: "the owner name of subscription \"\(id)\"")
            }
            return Wire.QuerySubscription(
                recordType: self.recordType,
                predicate: predicate,
                zoneID: self.zoneID?.wireZoneID,
                firesOnRecordCreation: options.contains(.firesOnRecordCreation),
                firesOnRecordUpdate: options.contains(.firesOnRecordUpdate),
                firesOnRecordDeletion: options.contains(.firesOnRecordDeletion),
                firesOnce: options.contains(.firesOnce)
            )
        }
    }
}

extension CKQuerySubscription.Options {
    init(wire: Wire.QuerySubscription) {
        self = []
        if wire.firesOnRecordCreation { self.insert(.firesOnRecordCreation) }
        if wire.firesOnRecordUpdate { self.insert(.firesOnRecordUpdate) }
        if wire.firesOnRecordDeletion { self.insert(.firesOnRecordDeletion) }
        if wire.firesOnce { self.insert(.firesOnce) }
    }
}

extension CKSubscription.NotificationInfo {
    /// The notification info of a wire message; empty strings and lists are nil.
    package convenience init(wire: Wire.NotificationInfo) {
        func string(_ value: String) -> String? { value.isEmpty ? nil : value }
        func list(_ value: [String]) -> [String]? { value.isEmpty ? nil : value }
        self.init(
            values: Values(
                alertBody: string(wire.alertBody),
                alertLocalizationKey: string(wire.alertLocalizationKey),
                alertLocalizationArgs: list(wire.alertLocalizationArgs),
                alertActionLocalizationKey: string(wire.alertActionLocalizationKey),
                alertLaunchImage: string(wire.alertLaunchImage),
                title: string(wire.title),
                titleLocalizationKey: string(wire.titleLocalizationKey),
                titleLocalizationArgs: list(wire.titleLocalizationArgs),
                subtitle: string(wire.subtitle),
                subtitleLocalizationKey: string(wire.subtitleLocalizationKey),
                subtitleLocalizationArgs: list(wire.subtitleLocalizationArgs),
                soundName: string(wire.soundName),
                shouldBadge: wire.shouldBadge,
                shouldSendContentAvailable: wire.shouldSendContentAvailable,
                shouldSendMutableContent: wire.shouldSendMutableContent,
                desiredKeys: list(wire.desiredKeys),
                category: string(wire.category),
                collapseIDKey: string(wire.collapseIDKey)
            )
        )
    }

    /// The notification info as a wire message (nil = empty).
    ///
    /// - throws: `CKError` `.invalidArguments` if a string contains U+0000.
    package var wireNotificationInfo: Wire.NotificationInfo {
        get throws(CKError) {
            let v = self.snapshot
            let strings = [
                v.alertBody, v.alertLocalizationKey, v.alertActionLocalizationKey, v.alertLaunchImage, v.title,
                v.titleLocalizationKey, v.subtitle, v.subtitleLocalizationKey, v.soundName, v.category, v.collapseIDKey,
            ].compactMap { $0 }
            let lists = [v.alertLocalizationArgs, v.titleLocalizationArgs, v.subtitleLocalizationArgs, v.desiredKeys]
            for value in strings + lists.flatMap({ $0 ?? [] }) {
                try FieldValue.checkWireString(value, what: "notification info \"\(value)\"")
            }
            return Wire.NotificationInfo(
                alertBody: v.alertBody ?? "",
                alertLocalizationKey: v.alertLocalizationKey ?? "",
                alertLocalizationArgs: v.alertLocalizationArgs ?? [],
                alertActionLocalizationKey: v.alertActionLocalizationKey ?? "",
                alertLaunchImage: v.alertLaunchImage ?? "",
                title: v.title ?? "",
                titleLocalizationKey: v.titleLocalizationKey ?? "",
                titleLocalizationArgs: v.titleLocalizationArgs ?? [],
                subtitle: v.subtitle ?? "",
                subtitleLocalizationKey: v.subtitleLocalizationKey ?? "",
                subtitleLocalizationArgs: v.subtitleLocalizationArgs ?? [],
                soundName: v.soundName ?? "",
                shouldBadge: v.shouldBadge,
                shouldSendContentAvailable: v.shouldSendContentAvailable,
                shouldSendMutableContent: v.shouldSendMutableContent,
                desiredKeys: v.desiredKeys ?? [],
                category: v.category ?? "",
                collapseIDKey: v.collapseIDKey ?? ""
            )
        }
    }
}
