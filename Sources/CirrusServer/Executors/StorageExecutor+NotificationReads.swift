import CirrusStore
import CirrusWire

/// `CKMarkNotificationsReadOperation` and `CKModifyBadgeOperation` (deprecated in CloudKit, run
/// faithfully): both act on the caller's own notification feed in the container, so another
/// user's notification ID reads exactly as one that never existed (`unknownItem`).
extension StorageExecutor {
    func markNotificationsRead(
        _ request: Wire.MarkNotificationsReadRequest, _ open: Wire.Open, caller: ClientIdentity
    ) async throws -> OperationCompletion {
        let feed: NotificationFeedKey
        do {
            (feed, _) = try Self.notificationFeed(open, caller: caller)
        } catch {
            return OperationCompletion(error: error.error)
        }
        let ids = request.notificationIDs
        if let refused = Self.tooManyItems(ids.count) {
            return refused
        }
        let found = try await storage.markNotificationsRead(ids, in: feed)
        var marked: [String] = []
        var failures: [Wire.ItemError] = []
        for (id, wasFound) in zip(ids, found) {
            if wasFound {
                marked.append(id)
            } else {
                failures.append(
                    Wire.ItemError(
                        item: .notificationID(id),
                        error: Wire.OperationError(code: .unknownItem, message: "no notification \(id.prefix(64))")))
            }
        }
        var completion = Self.completion(partialErrors: failures, items: "notifications")
        completion.result = .markNotificationsRead(Wire.MarkNotificationsReadResult(notificationIDsMarkedRead: marked))
        return completion
    }

    func modifyBadge(_ request: Wire.ModifyBadgeRequest, _ open: Wire.Open, caller: ClientIdentity) async throws
        -> OperationCompletion
    {
        let feed: NotificationFeedKey
        do {
            (feed, _) = try Self.notificationFeed(open, caller: caller)
        } catch {
            return OperationCompletion(error: error.error)
        }
        try await storage.setBadge(request.badgeValue, for: feed)
        return .success()
    }
}
