import CirrusKit

// Seed 002, "Subscription Operations": each sample below is verbatim between its BEGIN and END lines,
// inside a function whose parameters are the values the sample uses but does not define.

func modifySubscriptions(database: CKDatabase, zoneID: CKRecordZone.ID) {
    // BEGIN seed sample
    // Create zone subscription
    let zoneSubscription = CKRecordZoneSubscription(zoneID: zoneID)
    zoneSubscription.notificationInfo = CKSubscription.NotificationInfo()
    zoneSubscription.notificationInfo?.shouldSendContentAvailable = true

    // Create query subscription
    let predicate = NSPredicate(format: "priority > %d", 5)
    let querySubscription = CKQuerySubscription(
        recordType: "Task",
        predicate: predicate,
        subscriptionID: "high-priority-tasks",
        options: [.firesOnRecordCreation, .firesOnRecordUpdate]
    )

    let operation = CKModifySubscriptionsOperation(
        subscriptionsToSave: [zoneSubscription, querySubscription],
        subscriptionIDsToDelete: nil
    )

    operation.perSubscriptionSaveBlock = { subscriptionID, result in
        switch result {
        case .success(let subscription):
            print("Subscription saved: \(subscriptionID)")
        case .failure(let error):
            print("Subscription failed: \(error)")
        }
    }

    database.add(operation)
    // END seed sample
}

func fetchSubscriptions(database: CKDatabase) {
    // BEGIN seed sample
    // Fetch specific subscriptions
    let operation = CKFetchSubscriptionsOperation(subscriptionIDs: ["sub1", "sub2"])

    // Or fetch all
    let allOperation = CKFetchSubscriptionsOperation.fetchAllSubscriptionsOperation()

    operation.perSubscriptionResultBlock = { subscriptionID, result in
        if case .success(let subscription) = result {
            print("Found subscription: \(subscription)")
        }
    }

    database.add(operation)
    // END seed sample
}
