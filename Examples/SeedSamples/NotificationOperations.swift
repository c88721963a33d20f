import CirrusKit

// Seed 002, "Notification Operations": each sample below is verbatim between its BEGIN and END lines,
// inside a function whose parameters are the values the sample uses but does not define.

func fetchNotificationChanges(container: CKContainer) {
    // BEGIN seed sample
    var notificationChangeToken: CKServerChangeToken? = loadNotificationToken()

    let operation = CKFetchNotificationChangesOperation(
        previousServerChangeToken: notificationChangeToken
    )

    operation.notificationChangedBlock = { notification in
        guard let queryNotification = notification as? CKQueryNotification else { return }

        if let recordID = queryNotification.recordID {
            print("Record changed: \(recordID)")
        }
    }

    operation.fetchNotificationChangesResultBlock = { result in
        switch result {
        case .success((let newToken, _)):
            notificationChangeToken = newToken
            saveNotificationToken(newToken)
        case .failure(let error):
            print("Failed to fetch notifications: \(error)")
        }
    }

    container.add(operation)
    // END seed sample
}
