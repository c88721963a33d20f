import CirrusWire
import Foundation
import Testing

@testable import CirrusModel

/// Subscriptions and notifications: their wire form both ways (through bytes) and the checks
/// made before anything is sent.
@Suite struct SubscriptionTests {
    /// model → wire → bytes → wire → model.
    func roundTrip(_ subscription: CKSubscription) throws -> CKSubscription {
        let wire = try subscription.wireSubscription
        let decoded = try Wire.Subscription(serializedBytes: wire.serializedBytes())
        #expect(decoded == wire)
        return try CKSubscription.make(wire: decoded)
    }

    func refusal(_ subscription: CKSubscription) -> CKError? {
        do {
            _ = try subscription.wireSubscription
            return nil
        } catch {
            return error
        }
    }

    @Test func rawValuesMatchCloudKit() {
        #expect(CKSubscription.SubscriptionType.query.rawValue == 1)
        #expect(CKSubscription.SubscriptionType.recordZone.rawValue == 2)
        #expect(CKSubscription.SubscriptionType.database.rawValue == 3)
        #expect(CKQuerySubscription.Options.firesOnRecordCreation.rawValue == 1)
        #expect(CKQuerySubscription.Options.firesOnRecordUpdate.rawValue == 2)
        #expect(CKQuerySubscription.Options.firesOnRecordDeletion.rawValue == 4)
        #expect(CKQuerySubscription.Options.firesOnce.rawValue == 8)
        #expect(CKNotification.NotificationType.query.rawValue == 1)
        #expect(CKNotification.NotificationType.recordZone.rawValue == 2)
        #expect(CKNotification.NotificationType.readNotification.rawValue == 3)
        #expect(CKNotification.NotificationType.database.rawValue == 4)
        #expect(CKQueryNotification.Reason.recordCreated.rawValue == 1)
        #expect(CKQueryNotification.Reason.recordUpdated.rawValue == 2)
        #expect(CKQueryNotification.Reason.recordDeleted.rawValue == 3)
    }

    @Test func querySubscriptionRoundTrips() throws {
        let subscription = CKQuerySubscription(
            recordType: "Note",
            predicate: CKPredicate(format: "priority > %d AND title BEGINSWITH %@", 5, "Gro"),
            subscriptionID: "urgent",
            options: [.firesOnRecordCreation, .firesOnRecordDeletion, .firesOnce]
        )
        subscription.zoneID = CKRecordZone.ID(zoneName: "Notes")
        let info = CKSubscription.NotificationInfo()
        info.alertBody = "changed"
        info.alertLocalizationArgs = ["title"]
        info.title = "Notes"
        info.subtitleLocalizationKey = "SUB"
        info.soundName = "ping.aiff"
        info.shouldBadge = true
        info.shouldSendContentAvailable = true
        info.desiredKeys = ["title", "priority"]
        info.category = "NOTE"
        info.collapseIDKey = "title"
        subscription.notificationInfo = info

        let back = try #require(try roundTrip(subscription) as? CKQuerySubscription)
        #expect(back.subscriptionID == "urgent")
        #expect(back.subscriptionType == .query)
        #expect(back.recordType == "Note")
        #expect(back.predicate.predicateFormat == subscription.predicate.predicateFormat)
        #expect(try back.predicate.wirePredicate == subscription.predicate.wirePredicate)
        #expect(back.querySubscriptionOptions == [.firesOnRecordCreation, .firesOnRecordDeletion, .firesOnce])
        #expect(back.zoneID == CKRecordZone.ID(zoneName: "Notes"))
        #expect(back.notificationInfo == info)
        #expect(back.notificationInfo?.alertLaunchImage == nil)
        #expect(back.notificationInfo?.desiredKeys == ["title", "priority"])
    }

    @Test func zoneAndDatabaseSubscriptionsRoundTrip() throws {
        let zone = CKRecordZoneSubscription(zoneID: CKRecordZone.ID(zoneName: "Notes", ownerName: "_alice"), subscriptionID: "z")
        zone.recordType = "Note"
        let backZone = try #require(try roundTrip(zone) as? CKRecordZoneSubscription)
        #expect(backZone.subscriptionType == .recordZone)
        #expect(backZone.zoneID == zone.zoneID)
        #expect(backZone.recordType == "Note")
        #expect(backZone.notificationInfo == nil)

        let anyType = try #require(try roundTrip(CKRecordZoneSubscription(zoneID: CKRecordZone.ID(zoneName: "Notes"))) as? CKRecordZoneSubscription)
        #expect(anyType.recordType == nil)
        #expect(!anyType.subscriptionID.isEmpty)

        let database = CKDatabaseSubscription(subscriptionID: "db")
        let silent = CKSubscription.NotificationInfo()
        silent.shouldSendContentAvailable = true
        database.notificationInfo = silent
        let backDatabase = try #require(try roundTrip(database) as? CKDatabaseSubscription)
        #expect(backDatabase.subscriptionType == .database)
        #expect(backDatabase.recordType == nil)
        #expect(backDatabase.notificationInfo?.shouldSendContentAvailable == true)
        #expect(CKDatabaseSubscription().subscriptionID != CKDatabaseSubscription().subscriptionID)
    }

    @Test func checksBeforeSending() {
        let fires: CKQuerySubscription.Options = [.firesOnRecordCreation]
        let empty = refusal(CKDatabaseSubscription(subscriptionID: ""))
        #expect(empty?.code == .invalidArguments)
        #expect(empty?.message == "a subscription needs a non-empty subscriptionID")

        let nothing = refusal(CKQuerySubscription(recordType: "Note", predicate: CKPredicate(value: true), subscriptionID: "q", options: [.firesOnce]))
        #expect(nothing?.code == .invalidArguments)
        #expect(nothing?.message?.contains("query subscription \"q\" fires on nothing") == true)

        let noType = refusal(CKQuerySubscription(recordType: "", predicate: CKPredicate(value: true), subscriptionID: "q", options: fires))
        #expect(noType?.message == "query subscription \"q\" needs a record type")

        let badPredicate = refusal(CKQuerySubscription(recordType: "Note", predicate: CKPredicate(format: "title ==="), subscriptionID: "q", options: fires))
        #expect(badPredicate?.code == .invalidArguments)
        #expect(badPredicate?.message?.hasPrefix("the predicate of query subscription \"q\" is invalid: ") == true)

        let defaultZone = refusal(CKRecordZoneSubscription(zoneID: .default, subscriptionID: "z"))
        #expect(defaultZone?.message == "zone subscription \"z\" names the default zone; zone subscriptions need a custom zone")

        let nul = refusal(CKDatabaseSubscription(subscriptionID: "a\u{0}b"))
        #expect(nul?.code == .invalidArguments)
    }

    @Test func scopeRules() {
        func refused(_ subscription: CKSubscription, _ scope: CKDatabaseScope) -> String? {
            do {
                try subscription.validate(for: scope)
                return nil
            } catch {
                return error.message
            }
        }
        let query = CKQuerySubscription(recordType: "Note", predicate: CKPredicate(value: true), subscriptionID: "q", options: [.firesOnRecordUpdate])
        let zone = CKRecordZoneSubscription(zoneID: CKRecordZone.ID(zoneName: "Notes"), subscriptionID: "z")
        let database = CKDatabaseSubscription(subscriptionID: "d")
        #expect(refused(query, .shared) == "subscription \"q\": query subscriptions are not available in the shared database")
        #expect(refused(query, .public) == nil)
        #expect(refused(query, .private) == nil)
        #expect(refused(zone, .public) == "subscription \"z\": zone subscriptions are not available in the public database")
        #expect(refused(zone, .private) == nil)
        #expect(refused(zone, .shared) == nil)
        #expect(refused(database, .public) == "subscription \"d\": database subscriptions are not available in the public database")
        #expect(refused(database, .shared) == nil)
    }

    @Test func wireSubscriptionsThatDoNotDecode() {
        #expect(throws: CKError.self) { try CKSubscription.make(wire: Wire.Subscription(subscriptionID: "", kind: .database(.init()))) }
        #expect(throws: CKError.self) { try CKSubscription.make(wire: Wire.Subscription(subscriptionID: "x")) }
        #expect(throws: CKError.self) { try CKSubscription.make(wire: Wire.Subscription(subscriptionID: "x", kind: .recordZone(.init()))) }
        // An absent predicate is TRUEPREDICATE.
        let query = try? CKSubscription.make(
            wire: Wire.Subscription(subscriptionID: "x", kind: .query(.init(recordType: "Note", firesOnRecordUpdate: true)))
        ) as? CKQuerySubscription
        #expect(query?.predicate.predicateFormat == "TRUEPREDICATE")
        #expect(query?.querySubscriptionOptions == [.firesOnRecordUpdate])
    }

    // MARK: - Notifications

    func throughBytes(_ wire: Wire.PushNotification) throws -> Wire.PushNotification {
        try Wire.PushNotification(serializedBytes: wire.serializedBytes())
    }

    @Test func queryNotificationFromTheWire() throws {
        let recordID = Wire.RecordID(recordName: "n1", zoneID: Wire.RecordZoneID(zoneName: "Notes", ownerName: "__defaultOwner__"))
        let wire = Wire.PushNotification(
            notificationID: "nid-1",
            notificationType: .query,
            containerIdentifier: "iCloud.test",
            subscriptionID: "urgent",
            subscriptionOwnerUserRecordID: "_alice",
            isPruned: true,
            alert: Wire.NotificationAlert(title: "T", body: "B", bodyLocalizationArgs: ["Groceries"], launchImage: "img"),
            badge: 3,
            soundName: "ping",
            category: "NOTE",
            creationDate: Date(timeIntervalSince1970: 1_700_000_000).wireTimestamp,
            detail: .query(
                Wire.QueryNotification(
                    reason: .recordCreated,
                    recordID: recordID,
                    recordFields: [
                        Wire.RecordField(key: "priority", value: Wire.FieldValue(kind: .int64Value(7))),
                        Wire.RecordField(key: "title", value: Wire.FieldValue(kind: .stringValue("Groceries"))),
                    ],
                    databaseScope: .private
                )
            )
        )
        let token = CKServerChangeToken(opaqueBytes: [9, 9])
        let notification = CKNotification.make(wire: try throughBytes(wire), changeToken: token)
        let query = try #require(notification as? CKQueryNotification)
        #expect(query.notificationID == CKNotification.ID(rawValue: "nid-1"))
        #expect(query.notificationType == .query)
        #expect(query.containerIdentifier == "iCloud.test")
        #expect(query.subscriptionID == "urgent")
        #expect(query.subscriptionOwnerUserRecordID == CKRecord.ID(recordName: "_alice"))
        #expect(query.isPruned)
        #expect(query.title == "T")
        #expect(query.alertBody == "B")
        #expect(query.alertLocalizationArgs == ["Groceries"])
        #expect(query.alertLaunchImage == "img")
        #expect(query.subtitle == nil)
        #expect(query.badge == NSNumber(value: 3))
        #expect(query.soundName == "ping")
        #expect(query.category == "NOTE")
        #expect(query.creationDate == Date(timeIntervalSince1970: 1_700_000_000))
        #expect(query.changeToken == token)
        #expect(query.queryNotificationReason == .recordCreated)
        #expect(query.recordID == CKRecord.ID(recordName: "n1", zoneID: CKRecordZone.ID(zoneName: "Notes")))
        #expect(query.databaseScope == .private)
        #expect(query.recordFields?["title"] as? String == "Groceries")
        #expect(query.recordFields?["priority"] as? Int == 7)
        // And back.
        #expect(query.wireNotification == wire)
    }

    @Test func zoneDatabaseAndUnknownNotifications() throws {
        let zoneWire = Wire.PushNotification(
            notificationID: "nid-2",
            notificationType: .recordZone,
            subscriptionID: "z",
            detail: .recordZone(Wire.RecordZoneNotification(zoneID: Wire.RecordZoneID(zoneName: "Notes", ownerName: "__defaultOwner__"), databaseScope: .shared))
        )
        let zone = try #require(CKNotification.make(wire: try throughBytes(zoneWire)) as? CKRecordZoneNotification)
        #expect(zone.notificationType == .recordZone)
        #expect(zone.recordZoneID == CKRecordZone.ID(zoneName: "Notes"))
        #expect(zone.databaseScope == .shared)
        #expect(zone.badge == nil)
        #expect(zone.changeToken == nil)
        #expect(zone.wireNotification == zoneWire)

        let databaseWire = Wire.PushNotification(
            notificationID: "nid-3", notificationType: .database, detail: .database(Wire.DatabaseNotification(databaseScope: .public))
        )
        let database = try #require(CKNotification.make(wire: try throughBytes(databaseWire)) as? CKDatabaseNotification)
        #expect(database.notificationType == .database)
        #expect(database.databaseScope == .public)
        #expect(database.wireNotification == databaseWire)

        // A read notification keeps its type; its detail still picks the subclass.
        let read = CKNotification.make(
            wire: Wire.PushNotification(notificationID: "nid-4", notificationType: .readNotification, detail: .database(.init(databaseScope: .private)))
        )
        #expect(read.notificationType == .readNotification)
        #expect(read is CKDatabaseNotification)

        // A kind this version does not know: a plain notification, nothing thrown.
        let unknown = CKNotification.make(wire: Wire.PushNotification(notificationID: "nid-5", notificationType: .unrecognized(42)))
        #expect(type(of: unknown) == CKNotification.self)
        #expect(unknown.notificationType == .database)

        // A query notification without fields has nil recordFields; a bad record ID is nil.
        let bare = try #require(
            CKNotification.make(
                wire: Wire.PushNotification(notificationType: .query, detail: .query(Wire.QueryNotification(reason: .recordDeleted, recordID: Wire.RecordID())))
            ) as? CKQueryNotification
        )
        #expect(bare.recordFields == nil)
        #expect(bare.recordID == nil)
        #expect(bare.queryNotificationReason == .recordDeleted)
        #expect(bare.notificationID == nil)
    }
}
