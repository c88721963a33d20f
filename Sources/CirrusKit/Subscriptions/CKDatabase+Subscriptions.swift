import CirrusModel
import Foundation
import NIOConcurrencyHelpers

/// Subscriptions, async and with completion handlers, each call one operation on this
/// database.
///
/// For example:
/// ```swift
/// let subscription = CKQuerySubscription(
///     recordType: "Note", predicate: CKPredicate(value: true), subscriptionID: "notes",
///     options: [.firesOnRecordCreation, .firesOnRecordUpdate, .firesOnRecordDeletion])
/// let saved = try await database.save(subscription)
/// let all = try await database.allSubscriptions()
/// _ = try await database.deleteSubscription(withID: "notes")
/// ```
extension CKDatabase {
    /// Creates or replaces one subscription and returns it as the server has it.
    ///
    /// - throws: `CKError`, e.g. `invalidArguments` for a subscription the checks refuse
    ///   (before anything is sent) or the server refuses.
    public func save(_ subscription: CKSubscription) async throws -> CKSubscription {
        let (saved, _) = try await self.modifySubscriptions(saving: [subscription], deleting: [])
        return try Self.single(saved, subscription.subscriptionID)
    }

    /// Fetches one subscription.
    ///
    /// - throws: `CKError` `unknownItem` when there is none of that ID.
    public func subscription(for subscriptionID: CKSubscription.ID) async throws -> CKSubscription {
        let results = try await self.subscriptions(for: [subscriptionID])
        return try Self.single(results, subscriptionID)
    }

    /// Fetches subscriptions; each ID gets its own result.
    public func subscriptions(for ids: [CKSubscription.ID]) async throws -> [CKSubscription.ID: Result<CKSubscription, any Error>] {
        let operation = CKFetchSubscriptionsOperation(subscriptionIDs: ids)
        let results = NIOLockedValueBox<[CKSubscription.ID: Result<CKSubscription, any Error>]>([:])
        operation.perSubscriptionResultBlock = { id, result in results.withLockedValue { $0[id] = result } }
        try await self.run(operation) { operation.fetchSubscriptionsResultBlock = $0 }
        return results.withLockedValue { $0 }
    }

    /// Every subscription of the database, in the server's order.
    public func allSubscriptions() async throws -> [CKSubscription] {
        let operation = CKFetchSubscriptionsOperation.fetchAllSubscriptionsOperation()
        let subscriptions = NIOLockedValueBox<[CKSubscription]>([])
        let failures = NIOLockedValueBox<[any Error]>([])
        operation.perSubscriptionResultBlock = { _, result in
            switch result {
            case .success(let subscription): subscriptions.withLockedValue { $0.append(subscription) }
            case .failure(let error): failures.withLockedValue { $0.append(error) }
            }
        }
        try await self.run(operation) { operation.fetchSubscriptionsResultBlock = $0 }
        if let failure = failures.withLockedValue({ $0.first }) {
            throw failure
        }
        return subscriptions.withLockedValue { $0 }
    }

    /// Deletes one subscription and returns its ID.
    ///
    /// - throws: `CKError` `unknownItem` when there is none of that ID.
    public func deleteSubscription(withID subscriptionID: CKSubscription.ID) async throws -> CKSubscription.ID {
        let (_, deleted) = try await self.modifySubscriptions(saving: [], deleting: [subscriptionID])
        _ = try Self.single(deleted, subscriptionID)
        return subscriptionID
    }

    /// Saves and deletes subscriptions in one operation; each item gets its own result. Throws
    /// only when the whole operation fails (not for per-item failures).
    public func modifySubscriptions(
        saving subscriptionsToSave: [CKSubscription],
        deleting subscriptionIDsToDelete: [CKSubscription.ID]
    ) async throws -> (
        saveResults: [CKSubscription.ID: Result<CKSubscription, any Error>],
        deleteResults: [CKSubscription.ID: Result<Void, any Error>]
    ) {
        let operation = CKModifySubscriptionsOperation(
            subscriptionsToSave: subscriptionsToSave,
            subscriptionIDsToDelete: subscriptionIDsToDelete
        )
        let saves = NIOLockedValueBox<[CKSubscription.ID: Result<CKSubscription, any Error>]>([:])
        let deletes = NIOLockedValueBox<[CKSubscription.ID: Result<Void, any Error>]>([:])
        operation.perSubscriptionSaveBlock = { id, result in saves.withLockedValue { $0[id] = result } }
        operation.perSubscriptionDeleteBlock = { id, result in deletes.withLockedValue { $0[id] = result } }
        try await self.run(operation) { operation.modifySubscriptionsResultBlock = $0 }
        return (saves.withLockedValue { $0 }, deletes.withLockedValue { $0 })
    }
}

/// CloudKit's completion-handler forms. The handlers run on the operation's callback queue.
extension CKDatabase {
    /// Creates or replaces one subscription.
    public func save(_ subscription: CKSubscription, completionHandler: @escaping @Sendable (CKSubscription?, (any Error)?) -> Void) {
        let operation = CKModifySubscriptionsOperation(subscriptionsToSave: [subscription], subscriptionIDsToDelete: nil)
        let box = ResultBox<CKSubscription>()
        operation.perSubscriptionSaveBlock = { _, result in box.set(result) }
        operation.modifySubscriptionsResultBlock = { result in box.finish(result, completionHandler) }
        self.start(operation)
    }

    /// Fetches one subscription.
    public func fetch(
        withSubscriptionID subscriptionID: CKSubscription.ID,
        completionHandler: @escaping @Sendable (CKSubscription?, (any Error)?) -> Void
    ) {
        let operation = CKFetchSubscriptionsOperation(subscriptionIDs: [subscriptionID])
        let box = ResultBox<CKSubscription>()
        operation.perSubscriptionResultBlock = { _, result in box.set(result) }
        operation.fetchSubscriptionsResultBlock = { result in box.finish(result, completionHandler) }
        self.start(operation)
    }

    /// Fetches every subscription of the database.
    public func fetchAllSubscriptions(completionHandler: @escaping @Sendable ([CKSubscription]?, (any Error)?) -> Void) {
        let operation = CKFetchSubscriptionsOperation.fetchAllSubscriptionsOperation()
        let subscriptions = NIOLockedValueBox<[CKSubscription]>([])
        let failure = NIOLockedValueBox<(any Error)?>(nil)
        operation.perSubscriptionResultBlock = { _, result in
            switch result {
            case .success(let subscription): subscriptions.withLockedValue { $0.append(subscription) }
            case .failure(let error): failure.withLockedValue { $0 = $0 ?? error }
            }
        }
        operation.fetchSubscriptionsResultBlock = { result in
            if case .failure(let error) = result {
                completionHandler(nil, error)
            } else if let error = failure.withLockedValue({ $0 }) {
                completionHandler(nil, error)
            } else {
                completionHandler(subscriptions.withLockedValue { $0 }, nil)
            }
        }
        self.start(operation)
    }

    /// Deletes one subscription.
    public func delete(
        withSubscriptionID subscriptionID: CKSubscription.ID,
        completionHandler: @escaping @Sendable (CKSubscription.ID?, (any Error)?) -> Void
    ) {
        let operation = CKModifySubscriptionsOperation(subscriptionsToSave: nil, subscriptionIDsToDelete: [subscriptionID])
        let box = ResultBox<CKSubscription.ID>()
        operation.perSubscriptionDeleteBlock = { id, result in box.set(result.map { id }) }
        operation.modifySubscriptionsResultBlock = { result in box.finish(result, completionHandler) }
        self.start(operation)
    }
}
