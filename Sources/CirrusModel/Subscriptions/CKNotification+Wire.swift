import CirrusWire
import Foundation

extension CKNotification {
    /// The notification a wire message describes, as the subclass its detail names
    /// (`CKQueryNotification`, `CKRecordZoneNotification`, `CKDatabaseNotification`).
    ///
    /// Never throws: what does not decode is left out (a record ID or zone ID that is not
    /// valid is nil, a record field that does not decode is absent). A notification of a kind
    /// this version does not know arrives as a plain `CKNotification` of type `.database`
    /// ("something changed: fetch the changes").
    ///
    /// - parameter changeToken: the feed position just after the notification (pushed
    ///   notifications carry it).
    package static func make(wire: Wire.PushNotification, changeToken: CKServerChangeToken? = nil) -> CKNotification {
        var content = Content(wire: wire, changeToken: changeToken)
        switch wire.detail {
        case .query(let query):
            if content.notificationType == .database { content.notificationType = .query }
            var fields: [CKRecord.FieldKey: FieldValue] = [:]
            for field in query.recordFields where !field.key.isEmpty {
                guard let kind = field.value?.kind,
                    let value = try? FieldValue(wire: kind, assetDirectory: nil)
                else { continue }
                fields[field.key] = value
            }
            return CKQueryNotification(
                content: content,
                reason: Self.reason(query.reason),
                recordID: query.recordID.flatMap { try? CKRecord.ID(wire: $0) },
                fields: query.recordFields.isEmpty ? nil : fields,
                databaseScope: CKDatabaseScope(wire: query.databaseScope) ?? .private
            )
        case .recordZone(let zone):
            if content.notificationType == .database { content.notificationType = .recordZone }
            return CKRecordZoneNotification(
                content: content,
                recordZoneID: zone.zoneID.flatMap { try? CKRecordZone.ID(wire: $0) },
                databaseScope: CKDatabaseScope(wire: zone.databaseScope) ?? .private
            )
        case .database(let database):
            return CKDatabaseNotification(content: content, databaseScope: CKDatabaseScope(wire: database.databaseScope) ?? .private)
        case nil:
            return CKNotification(content: content)
        }
    }

    private static func reason(_ wire: Wire.QueryNotificationReason) -> CKQueryNotification.Reason {
        switch wire {
        case .recordCreated: .recordCreated
        case .recordDeleted: .recordDeleted
        default: .recordUpdated
        }
    }

    /// The notification as a wire message (for in-process servers and tests). Record fields
    /// are sent without asset content.
    package var wireNotification: Wire.PushNotification {
        let content = self.content
        var wire = Wire.PushNotification(
            notificationID: content.notificationID?.rawValue ?? "",
            notificationType: Wire.NotificationType(rawValue: Int32(content.notificationType.rawValue)),
            containerIdentifier: content.containerIdentifier ?? "",
            subscriptionID: content.subscriptionID ?? "",
            subscriptionOwnerUserRecordID: content.subscriptionOwnerUserRecordID?.recordName ?? "",
            isPruned: content.isPruned,
            badge: content.badge,
            soundName: content.soundName ?? "",
            category: content.category ?? "",
            creationDate: content.creationDate?.wireTimestamp,
            isRead: content.isRead
        )
        let alert = Wire.NotificationAlert(
            title: content.title ?? "",
            titleLocalizationKey: content.titleLocalizationKey ?? "",
            titleLocalizationArgs: content.titleLocalizationArgs ?? [],
            subtitle: content.subtitle ?? "",
            subtitleLocalizationKey: content.subtitleLocalizationKey ?? "",
            subtitleLocalizationArgs: content.subtitleLocalizationArgs ?? [],
            body: content.alertBody ?? "",
            bodyLocalizationKey: content.alertLocalizationKey ?? "",
            bodyLocalizationArgs: content.alertLocalizationArgs ?? [],
            actionLocalizationKey: content.alertActionLocalizationKey ?? "",
            launchImage: content.alertLaunchImage ?? ""
        )
        wire.alert = alert == Wire.NotificationAlert() ? nil : alert
        switch self {
        case let query as CKQueryNotification:
            let noContent = { (asset: CKAsset) throws(CKError) -> Wire.Asset in
                (try? asset.wireAsset(inlineContent: false)) ?? asset.wireAsset ?? Wire.Asset()
            }
            let fields = (query.storedFields ?? [:]).sorted { $0.key < $1.key }.compactMap { key, value -> Wire.RecordField? in
                guard let kind = try? value.wireKind(encodeAsset: noContent) else { return nil }
                return Wire.RecordField(key: key, value: Wire.FieldValue(kind: kind))
            }
            wire.detail = .query(
                Wire.QueryNotification(
                    reason: Wire.QueryNotificationReason(rawValue: Int32(query.queryNotificationReason.rawValue)),
                    recordID: query.recordID?.wireRecordID,
                    recordFields: fields,
                    databaseScope: query.databaseScope.wireScope
                )
            )
        case let zone as CKRecordZoneNotification:
            wire.detail = .recordZone(
                Wire.RecordZoneNotification(zoneID: zone.recordZoneID?.wireZoneID, databaseScope: zone.databaseScope.wireScope)
            )
        case let database as CKDatabaseNotification:
            wire.detail = .database(Wire.DatabaseNotification(databaseScope: database.databaseScope.wireScope))
        default:
            break
        }
        return wire
    }
}

extension CKNotification.Content {
    init(wire: Wire.PushNotification, changeToken: CKServerChangeToken?) {
        func string(_ value: String) -> String? { value.isEmpty ? nil : value }
        func list(_ value: [String]) -> [String]? { value.isEmpty ? nil : value }
        let type: CKNotification.NotificationType
        switch wire.notificationType {
        case .query: type = .query
        case .recordZone: type = .recordZone
        case .readNotification: type = .readNotification
        case .database, .unspecified, .unrecognized: type = .database
        }
        let alert = wire.alert ?? Wire.NotificationAlert()
        self.init(
            notificationID: string(wire.notificationID).map(CKNotification.ID.init(rawValue:)),
            notificationType: type,
            containerIdentifier: string(wire.containerIdentifier),
            subscriptionID: string(wire.subscriptionID),
            subscriptionOwnerUserRecordID: string(wire.subscriptionOwnerUserRecordID).map { CKRecord.ID(recordName: $0) },
            isPruned: wire.isPruned,
            alertBody: string(alert.body),
            alertLocalizationKey: string(alert.bodyLocalizationKey),
            alertLocalizationArgs: list(alert.bodyLocalizationArgs),
            title: string(alert.title),
            titleLocalizationKey: string(alert.titleLocalizationKey),
            titleLocalizationArgs: list(alert.titleLocalizationArgs),
            subtitle: string(alert.subtitle),
            subtitleLocalizationKey: string(alert.subtitleLocalizationKey),
            subtitleLocalizationArgs: list(alert.subtitleLocalizationArgs),
            alertActionLocalizationKey: string(alert.actionLocalizationKey),
            alertLaunchImage: string(alert.launchImage),
            badge: wire.badge,
            soundName: string(wire.soundName),
            category: string(wire.category),
            creationDate: wire.creationDate.map(Date.init(wireTimestamp:)),
            changeToken: changeToken,
            isRead: wire.isRead
        )
    }
}
