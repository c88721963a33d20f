import CirrusKit
import CirrusModel
import Foundation

/// A pushed notification as one JSON object, the line `cirrus watch` prints:
///
/// ```json
/// {"$notificationID":"…","$type":"query","$subscriptionID":"tasks","$scope":"private",
///  "$reason":"created","$recordName":"t1","$zone":"_defaultZone","$created":"2026-…",
///  "fields":{"title":"Milk"},"$token":"base64…"}
/// ```
///
/// `$reason`, `$recordName` and `fields` (the subscription's desired keys) come with query
/// notifications, `$zone` with query and zone ones, `$alert` and `$badge` when the subscription
/// asks for them; `$token` is the feed position right after the notification (`--since`).
package enum NotificationJSON {
    package static func object(_ notification: CKNotification, converter: FieldConverter) -> JSONValue {
        var members: [(String, JSONValue)] = []
        if let id = notification.notificationID { members.append(("$notificationID", .string(id.rawValue))) }
        members.append(("$type", .string(Self.name(of: notification.notificationType))))
        if let subscriptionID = notification.subscriptionID { members.append(("$subscriptionID", .string(subscriptionID))) }
        switch notification {
        case let query as CKQueryNotification:
            members.append(("$scope", .string(Self.name(of: query.databaseScope))))
            members.append(("$reason", .string(Self.name(of: query.queryNotificationReason))))
            if let recordID = query.recordID {
                members.append(("$recordName", .string(recordID.recordName)))
                members.append(("$zone", .string(recordID.zoneID.zoneName)))
            }
        case let zone as CKRecordZoneNotification:
            members.append(("$scope", .string(Self.name(of: zone.databaseScope))))
            if let zoneID = zone.recordZoneID { members.append(("$zone", .string(zoneID.zoneName))) }
        case let database as CKDatabaseNotification:
            members.append(("$scope", .string(Self.name(of: database.databaseScope))))
        default:
            break
        }
        if let date = notification.creationDate { members.append(("$created", .string(converter.text(of: date)))) }
        if let body = notification.alertBody { members.append(("$alert", .string(body))) }
        if let badge = notification.badge { members.append(("$badge", .integer(badge.int64Value))) }
        if let query = notification as? CKQueryNotification, let fields = query.recordFields, !fields.isEmpty {
            let values = fields.keys.sorted().compactMap { key -> (String, JSONValue)? in
                guard let value = fields[key] as? any CKRecordValue else { return nil }
                return (key, RecordJSON.value(value, converter: converter))
            }
            members.append(("fields", .object(values)))
        }
        if let token = notification.changeToken {
            members.append(("$token", .string(Self.text(of: token))))
        }
        return .object(members)
    }

    /// A feed token as `cirrus` prints it and reads it back (`--since`): base64.
    package static func text(of token: CKServerChangeToken) -> String {
        Data(token.opaqueBytes).base64EncodedString()
    }

    static func name(of type: CKNotification.NotificationType) -> String {
        switch type {
        case .query: "query"
        case .recordZone: "recordZone"
        case .readNotification: "readNotification"
        case .database: "database"
        }
    }

    static func name(of scope: CKDatabase.Scope) -> String {
        switch scope {
        case .public: "public"
        case .private: "private"
        case .shared: "shared"
        }
    }

    static func name(of reason: CKQueryNotification.Reason) -> String {
        switch reason {
        case .recordCreated: "created"
        case .recordUpdated: "updated"
        case .recordDeleted: "deleted"
        }
    }
}
