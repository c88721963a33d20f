@testable import CirrusKit
import CirrusModel
import CirrusWire
import Foundation
import Testing

/// Each operation class rebuilt from the `Open` the server keeps for a long-lived operation
/// sends the same request again, and keeps its ID, database and configuration.
@Suite("Long-lived operations rebuilt from their Open")
struct LongLivedDecodingTests {
    static let container = CKContainer(identifier: "iCloud.test", configuration: CirrusClientConfiguration(port: 1))
    static let zone = CKRecordZone.ID(zoneName: "Notes", ownerName: "_alice")

    static func operations() -> [CKDatabaseOperation] {
        let record = CKRecord(recordType: "Note", recordID: CKRecord.ID(recordName: "n1", zoneID: zone))
        record["title"] = "hello"
        let modify = CKModifyRecordsOperation(recordsToSave: [record], recordIDsToDelete: [CKRecord.ID(recordName: "old")])
        modify.savePolicy = .changedKeys
        modify.isAtomic = false
        modify.clientChangeTokenData = Data([9, 8])

        let fetch = CKFetchRecordsOperation(recordIDs: [CKRecord.ID(recordName: "a", zoneID: zone)])
        fetch.desiredKeys = ["title"]

        let query = CKQueryOperation(
            query: CKQuery(recordType: "Note", predicate: CKPredicate(format: "title BEGINSWITH %@", "he"))
        )
        query.query?.sortDescriptors = [CKSortDescriptor(key: "title", ascending: false)]
        query.zoneID = zone
        query.resultsLimit = 7
        query.desiredKeys = []
        let cursor = CKQueryOperation(cursor: CKQueryOperation.Cursor(data: Data([1, 2, 3])))

        let modifyZones = CKModifyRecordZonesOperation(
            recordZonesToSave: [CKRecordZone(zoneName: "New")],
            recordZoneIDsToDelete: [zone]
        )
        let fetchZones = CKFetchRecordZonesOperation(recordZoneIDs: [zone])
        let fetchAllZones = CKFetchRecordZonesOperation.fetchAllRecordZonesOperation()

        let zoneChanges = CKFetchRecordZoneChangesOperation(
            recordZoneIDs: [zone, CKRecordZone.ID(zoneName: "Other")],
            configurationsByRecordZoneID: [
                zone: .init(previousServerChangeToken: CKServerChangeToken(opaqueBytes: [4, 5]), resultsLimit: 3, desiredKeys: ["title"])
            ]
        )
        zoneChanges.fetchAllChanges = false
        let databaseChanges = CKFetchDatabaseChangesOperation(previousServerChangeToken: CKServerChangeToken(opaqueBytes: [6]))
        databaseChanges.resultsLimit = 10
        databaseChanges.fetchAllChanges = false
        let zoneSubscription = CKRecordZoneSubscription(zoneID: zone, subscriptionID: "zone-sub")
        zoneSubscription.recordType = "Note"
        let info = CKSubscription.NotificationInfo()
        info.shouldSendContentAvailable = true
        zoneSubscription.notificationInfo = info
        let modifySubscriptions = CKModifySubscriptionsOperation(
            subscriptionsToSave: [zoneSubscription, CKDatabaseSubscription(subscriptionID: "db-sub")],
            subscriptionIDsToDelete: ["old-sub"]
        )
        let fetchSubscriptions = CKFetchSubscriptionsOperation(subscriptionIDs: ["a", "b"])
        let fetchAllSubscriptions = CKFetchSubscriptionsOperation.fetchAllSubscriptionsOperation()
        return [
            modify, fetch, query, cursor, modifyZones, fetchZones, fetchAllZones, zoneChanges, databaseChanges,
            modifySubscriptions, fetchSubscriptions, fetchAllSubscriptions,
        ]
    }

    @Test("Every operation class: same subclass, same request, same ID", arguments: 0..<12)
    func roundTrip(index: Int) throws {
        let original = Self.operations()[index]
        original.configuration.isLongLived = true
        original.configuration.timeoutIntervalForResource = 3600
        original.configuration.qualityOfService = .userInitiated
        let request = try original.makeRequest(maximumItems: 400)
        let open = Wire.Open(
            operationID: original.operationID,
            databaseScope: .shared,
            containerIdentifier: "iCloud.test",
            configuration: original.configuration.explicit.wire,
            request: request
        )
        let info = Wire.LongLivedOperationInfo(operationID: original.operationID, open: open, status: .running, lastSeq: 4)
        let rebuilt = try CKOperation.longLivedOperation(from: info, in: Self.container)
        #expect(type(of: rebuilt) == type(of: original))
        #expect(rebuilt.operationID == original.operationID)
        #expect(try rebuilt.makeRequest(maximumItems: 400) == request)
        #expect(rebuilt.isLongLived)
        #expect(rebuilt.configuration.timeoutIntervalForResource == 3600)
        #expect(rebuilt.configuration.qualityOfService == .userInitiated)
        #expect(rebuilt.configuration.container === Self.container)
        #expect((rebuilt as? CKDatabaseOperation)?.database?.databaseScope == .shared)
        #expect(rebuilt.resumedOpen == open)
    }

    @Test("The container-level CKFetchNotificationChangesOperation: same request, same ID, no database")
    func notificationChanges() throws {
        let original = CKFetchNotificationChangesOperation(previousServerChangeToken: CKServerChangeToken(opaqueBytes: [7, 7]))
        original.resultsLimit = 25
        original.configuration.isLongLived = true
        let request = try original.makeRequest(maximumItems: 400)
        let open = Wire.Open(
            operationID: original.operationID,
            databaseScope: .unspecified,
            containerIdentifier: "iCloud.test",
            configuration: original.configuration.explicit.wire,
            request: request
        )
        let info = Wire.LongLivedOperationInfo(operationID: original.operationID, open: open, status: .running, lastSeq: 1)
        let rebuilt = try #require(try CKOperation.longLivedOperation(from: info, in: Self.container) as? CKFetchNotificationChangesOperation)
        #expect(rebuilt.operationID == original.operationID)
        #expect(rebuilt.previousServerChangeToken == CKServerChangeToken(opaqueBytes: [7, 7]))
        #expect(rebuilt.resultsLimit == 25)
        #expect(try rebuilt.makeRequest(maximumItems: 400) == request)
        #expect(rebuilt.target().scope == .unspecified)
    }

    @Test("A kind this library has no class for, or no request at all: internalError")
    func unsupported() {
        let watch = Wire.Open(operationID: "op", request: .watchNotifications(Wire.WatchNotificationsRequest()))
        for info in [
            Wire.LongLivedOperationInfo(operationID: "op", open: watch),
            Wire.LongLivedOperationInfo(operationID: "op"),
        ] {
            #expect(throws: CKError.self) {
                do {
                    _ = try CKOperation.longLivedOperation(from: info, in: Self.container)
                } catch let error as CKError {
                    #expect(error.code == .internalError)
                    throw error
                }
            }
        }
    }
}

@Suite("EventSequence")
struct EventSequenceTests {
    @Test("Each seq once, in order; duplicates dropped; a gap reported")
    func admit() {
        var sequence = EventSequence()
        #expect(sequence.admit(1) == .deliver)
        #expect(sequence.admit(2) == .deliver)
        #expect(sequence.admit(1) == .duplicate)
        #expect(sequence.admit(2) == .duplicate)
        #expect(sequence.admit(4) == .gap(expected: 3))
        #expect(sequence.delivered == 2)
        #expect(sequence.admit(3) == .deliver)
        var resumed = EventSequence(delivered: 10)
        #expect(resumed.admit(10) == .duplicate)
        #expect(resumed.admit(11) == .deliver)
    }
}
