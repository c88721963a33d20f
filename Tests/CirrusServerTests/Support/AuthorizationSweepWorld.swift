import CirrusWire
import Foundation
import Testing

/// What bob really owns on the server before alice probes it, and how to read it back.
struct SweepWorld {
    let bob: SweepIdentifiers

    /// Identifiers for requests that carry none of the sweep's.
    static let placeholderIdentifiers = SweepIdentifiers(
        owner: "", zoneName: "", defaultRecord: "", customRecord: "", publicRecord: "", subscription: "",
        publicSubscription: "", operationID: "", notificationID: "", zoneToken: .init(), defaultZoneToken: .init(),
        databaseToken: .init(), notificationToken: .init(), cursor: .init(), publicCursor: .init())

    static let currentUser = Wire.RecordZoneID(zoneName: "_defaultZone", ownerName: "__defaultOwner__")

    /// Bob creates one of everything a request can name: records in his default zone, a custom
    /// zone and the public database (beside one of alice's), subscriptions in both databases,
    /// notifications, change tokens of both feeds, query cursors and a long-lived operation.
    static func build(bob: inout SweepClient, alice: inout SweepClient) async throws -> SweepWorld {
        let work = Wire.RecordZoneID(zoneName: "BobWork", ownerName: "__defaultOwner__")
        let subscription = Wire.Subscription(
            subscriptionID: "bob-subscription",
            kind: .query(Wire.QuerySubscription(recordType: "Note", firesOnRecordCreation: true)))
        var publicSubscription = subscription
        publicSubscription.subscriptionID = "bob-public-subscription"
        try await expectSuccess(bob.run(.modifySubscriptions(Wire.ModifySubscriptionsRequest(subscriptionsToSave: [subscription]))))
        try await expectSuccess(
            bob.run(.modifySubscriptions(Wire.ModifySubscriptionsRequest(subscriptionsToSave: [publicSubscription])), scope: .public))
        try await expectSuccess(
            bob.run(.modifyRecordZones(Wire.ModifyRecordZonesRequest(recordZonesToSave: [Wire.RecordZone(zoneID: work)]))))
        let privateNotes = [
            note("bob-default-note", title: "bob's"), note("bob-default-note-2", title: "bob's too"),
            note("bob-work-note", title: "bob's work", zone: work),
        ]
        try await expectSuccess(bob.run(.modifyRecords(Wire.ModifyRecordsRequest(recordsToSave: privateNotes))))
        let publicNotes = [note("bob-public-note", title: "bob's public"), note("bob-public-note-2", title: "bob's public too")]
        try await expectSuccess(bob.run(.modifyRecords(Wire.ModifyRecordsRequest(recordsToSave: publicNotes)), scope: .public))
        try await expectSuccess(
            alice.run(.modifyRecords(Wire.ModifyRecordsRequest(recordsToSave: [note("alice-public-note", title: "alice's")])),
                scope: .public))

        let firstPage = Wire.QueryRequest(start: .query(Wire.Query(recordType: "Note")), resultsLimit: 1)
        let cursor = try #require(try await bob.run(.query(firstPage)).queryCursor, "bob's private query has more")
        let publicCursor = try #require(
            try await bob.run(.query(firstPage), scope: .public).queryCursor, "the public query has more")

        let zoneChanges = try await bob.run(.fetchRecordZoneChanges(Wire.FetchRecordZoneChangesRequest(zoneConfigurations: [
            Wire.ZoneChangesConfiguration(zoneID: work), Wire.ZoneChangesConfiguration(zoneID: currentUser),
        ])))
        let zoneTokens = zoneChanges.events.compactMap { payload -> (String, Wire.ServerChangeToken)? in
            guard case .fetchRecordZoneChanges(let event) = payload, case .recordZoneFetchResult(let result) = event.callback,
                case .success(let success) = result.outcome, let token = success.serverChangeToken
            else { return nil }
            return (result.zoneID?.zoneName ?? "", token)
        }
        let tokens = Dictionary(zoneTokens, uniquingKeysWith: { first, _ in first })
        let databaseChanges = try await bob.run(.fetchDatabaseChanges(Wire.FetchDatabaseChangesRequest()))
        guard case .fetchDatabaseChanges(let databaseResult) = databaseChanges.complete?.result else {
            throw SweepSetupFailed(what: "bob's database changes: \(databaseChanges)")
        }
        let notifications = try await bob.run(
            .fetchNotificationChanges(Wire.FetchNotificationChangesRequest()), scope: .unspecified)
        guard case .fetchNotificationChanges(let notificationResult) = notifications.complete?.result,
            case .fetchNotificationChanges(let firstNotification) = notifications.events.compactMap({ $0 }).first,
            case .notificationChanged(let notification) = firstNotification.callback
        else { throw SweepSetupFailed(what: "bob's notifications: \(notifications)") }

        let operationID = UUID().uuidString
        let longLived = try await bob.send(
            SweepProbe("bob's long-lived fetch", isLongLived: true, operationID: { _ in operationID }) { _ in
                .fetchRecords(Wire.FetchRecordsRequest(recordIDs: [recordID("bob-default-note")]))
            },
            with: placeholderIdentifiers)
        #expect(longLived.persisted && longLived.complete?.error == nil, "bob's long-lived operation: \(longLived)")

        return SweepWorld(bob: SweepIdentifiers(
            owner: "_bob", zoneName: work.zoneName, defaultRecord: "bob-default-note", customRecord: "bob-work-note",
            publicRecord: "bob-public-note", subscription: subscription.subscriptionID,
            publicSubscription: publicSubscription.subscriptionID, operationID: operationID,
            notificationID: notification.notificationID,
            zoneToken: try #require(tokens[work.zoneName]), defaultZoneToken: try #require(tokens["_defaultZone"]),
            databaseToken: try #require(databaseResult.serverChangeToken),
            notificationToken: try #require(notificationResult.serverChangeToken),
            cursor: cursor, publicCursor: publicCursor))
    }

    /// Everything bob can read of what he owns, as text: equal before and after the sweep
    /// when alice changed nothing of his.
    func snapshot(_ bob: inout SweepClient) async throws -> [String] {
        let ids = self.bob
        let work = Wire.RecordZoneID(zoneName: ids.zoneName, ownerName: "__defaultOwner__")
        let reads: [(Wire.Open.Request, Wire.DatabaseScope)] = [
            (.fetchRecords(Wire.FetchRecordsRequest(recordIDs: [
                recordID(ids.defaultRecord), recordID("bob-default-note-2"), recordID(ids.customRecord, zone: work),
            ])), .private),
            (.fetchRecords(Wire.FetchRecordsRequest(recordIDs: [recordID(ids.publicRecord), recordID("bob-public-note-2")])),
             .public),
            (.fetchRecordZones(Wire.FetchRecordZonesRequest(fetchAllRecordZones: true)), .private),
            (.fetchSubscriptions(Wire.FetchSubscriptionsRequest(fetchAllSubscriptions: true)), .private),
            (.fetchSubscriptions(Wire.FetchSubscriptionsRequest(fetchAllSubscriptions: true)), .public),
            (.fetchDatabaseChanges(Wire.FetchDatabaseChangesRequest()), .private),
            (.fetchRecordZoneChanges(Wire.FetchRecordZoneChangesRequest(zoneConfigurations: [
                Wire.ZoneChangesConfiguration(zoneID: work), Wire.ZoneChangesConfiguration(zoneID: Self.currentUser),
            ])), .private),
            (.fetchNotificationChanges(Wire.FetchNotificationChangesRequest()), .unspecified),
            (.fetchLongLivedOperationIDs(Wire.FetchLongLivedOperationIDsRequest()), .unspecified),
            (.fetchLongLivedOperation(Wire.FetchLongLivedOperationRequest(operationID: ids.operationID)), .unspecified),
            (.query(Wire.QueryRequest(cursor: ids.cursor)), .private),
        ]
        var snapshot: [String] = []
        for (request, scope) in reads {
            let answer = try await bob.run(request, scope: scope)
            #expect(answer.complete?.error == nil, "bob reads his own \(request): \(answer)")
            snapshot.append("\(answer.events) \(String(describing: answer.complete))")
        }
        return snapshot
    }

    private static func expectSuccess(_ answer: SweepAnswer, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(answer.complete?.error == nil, "setup: \(answer)", sourceLocation: sourceLocation)
    }
}

struct SweepSetupFailed: Error {
    var what: String
}

extension SweepAnswer {
    var queryCursor: Wire.QueryCursor? {
        guard case .query(let result) = complete?.result else { return nil }
        return result.cursor
    }
}

extension Wire.QueryRequest {
    init(cursor: Wire.QueryCursor) {
        self.init(start: .cursor(cursor))
    }
}
