@_spi(CirrusTools) import CirrusModel
import CirrusWire

/// Well-formed requests of every operation kind the storage executor runs, the way CirrusKit
/// sends them: the seeds the request and frame targets mutate from.
public enum SampleRequests {
    public static let container = "iCloud.com.example.fuzz"

    static let defaultZone = Wire.RecordZoneID(zoneName: "_defaultZone", ownerName: "__defaultOwner__")
    static let notesZone = Wire.RecordZoneID(zoneName: "Notes", ownerName: "__defaultOwner__")

    static func recordID(_ name: String, zone: Wire.RecordZoneID = defaultZone) -> Wire.RecordID {
        Wire.RecordID(recordName: name, zoneID: zone)
    }

    static func field(_ key: String, _ kind: Wire.FieldValue.Kind) -> Wire.RecordField {
        Wire.RecordField(key: key, value: Wire.FieldValue(kind: kind))
    }

    static func predicate(_ format: String, _ arguments: Any...) -> Wire.QueryPredicate {
        do {
            return try CKPredicate(format: format, argumentArray: arguments).toolsWirePredicate
        } catch {
            fatalError("sample predicate \(format) does not parse: \(error)")
        }
    }

    /// A record with one field of each kind.
    public static var sampleRecord: Wire.Record { note }

    static let note = Wire.Record(
        recordID: recordID("note-1"),
        recordType: "Note",
        fields: [
            field("title", .stringValue("Groceries")),
            field("count", .int64Value(3)),
            field("rating", .doubleValue(4.5)),
            field("due", .dateValue(Wire.Timestamp(seconds: 1_700_000_000, nanos: 5))),
            field("tags", .stringList(Wire.StringList(values: ["home", "weekly"]))),
            field("blob", .bytesValue([0, 1, 2, 255])),
            field("place", .locationValue(Wire.Location(latitude: 48.85, longitude: 2.35))),
            field("folder", .referenceValue(Wire.Reference(recordID: recordID("folder-1"), action: .deleteSelf))),
        ]
    )

    /// One `Open` per request kind (several for the kinds with distinct shapes).
    public static var requests: [Wire.Open.Request] {
        let token = Wire.ServerChangeToken(opaque: [1, 1] + [UInt8](repeating: 0, count: 40))
        return [
            .modifyRecords(Wire.ModifyRecordsRequest(recordsToSave: [note], savePolicy: .ifServerRecordUnchanged)),
            .modifyRecords(
                Wire.ModifyRecordsRequest(
                    recordsToSave: [Wire.Record(recordID: recordID("n2", zone: notesZone), recordType: "Note", changedKeys: ["title"])],
                    recordIDsToDelete: [recordID("note-1")], savePolicy: .changedKeys, isAtomic: true)),
            .fetchRecords(Wire.FetchRecordsRequest(recordIDs: [recordID("note-1"), recordID("missing")], desiredKeys: ["title"], desiredKeysSpecified: true)),
            .query(Wire.QueryRequest(
                start: .query(Wire.Query(
                    recordType: "Note",
                    predicate: predicate("title BEGINSWITH %@ AND count >= %d", "Gro", 1),
                    sortDescriptors: [Wire.QuerySortDescriptor(key: "count", ascending: false)])),
                resultsLimit: 1)),
            .query(Wire.QueryRequest(
                start: .query(Wire.Query(recordType: "Note", predicate: predicate("distanceToLocation:fromLocation:(place, %@) < 1000", CKLocation(latitude: 48.8, longitude: 2.3)))),
                zoneID: notesZone)),
            .query(Wire.QueryRequest(start: .cursor(Wire.QueryCursor(opaque: [UInt8](repeating: 7, count: 24))), resultsLimit: 5)),
            .modifyRecordZones(Wire.ModifyRecordZonesRequest(recordZonesToSave: [Wire.RecordZone(zoneID: notesZone)], recordZoneIDsToDelete: [Wire.RecordZoneID(zoneName: "Old", ownerName: "__defaultOwner__")])),
            .fetchRecordZones(Wire.FetchRecordZonesRequest(recordZoneIDs: [notesZone])),
            .fetchRecordZones(Wire.FetchRecordZonesRequest(fetchAllRecordZones: true)),
            .fetchRecordZoneChanges(Wire.FetchRecordZoneChangesRequest(
                zoneConfigurations: [Wire.ZoneChangesConfiguration(zoneID: defaultZone, previousServerChangeToken: token, resultsLimit: 2)],
                fetchAllChanges: true)),
            .fetchDatabaseChanges(Wire.FetchDatabaseChangesRequest(resultsLimit: 10)),
            .modifySubscriptions(Wire.ModifySubscriptionsRequest(
                subscriptionsToSave: [
                    Wire.Subscription(subscriptionID: "q", kind: .query(Wire.QuerySubscription(
                        recordType: "Note", predicate: predicate("count > 2"), firesOnRecordCreation: true))),
                    Wire.Subscription(subscriptionID: "z", kind: .recordZone(Wire.RecordZoneSubscription(zoneID: notesZone))),
                    Wire.Subscription(subscriptionID: "d", kind: .database(Wire.DatabaseSubscription())),
                ],
                subscriptionIDsToDelete: ["old"])),
            .fetchSubscriptions(Wire.FetchSubscriptionsRequest(fetchAllSubscriptions: true)),
            .fetchNotificationChanges(Wire.FetchNotificationChangesRequest(resultsLimit: 5)),
            .watchNotifications(Wire.WatchNotificationsRequest(since: token, databaseScopes: [.private])),
        ]
    }

    /// The `Open`s of ``requests``, in the private, public and shared databases in turn.
    public static var opens: [Wire.Open] {
        let scopes: [Wire.DatabaseScope] = [.private, .public, .shared]
        return self.requests.enumerated().map { index, request in
            Wire.Open(
                operationID: "op-\(index)",
                databaseScope: scopes[index % scopes.count],
                containerIdentifier: container,
                initialWindow: 100,
                request: request
            )
        }
    }
}
