import CirrusModel
import CirrusWire
import Foundation

/// Saves and deletes subscriptions of one database (CloudKit's
/// `CKModifySubscriptionsOperation`).
///
/// Each subscription is checked before anything is sent (`CKSubscription.wireSubscription`,
/// and the database's rules: no query subscriptions in the shared database, no zone or
/// database subscriptions in the public one); one that fails the checks fails the whole
/// operation with `invalidArguments`.
///
/// For example:
/// ```swift
/// let subscription = CKDatabaseSubscription(subscriptionID: "private-changes")
/// let operation = CKModifySubscriptionsOperation(subscriptionsToSave: [subscription], subscriptionIDsToDelete: nil)
/// operation.perSubscriptionSaveBlock = { id, result in print(id, result) }
/// operation.modifySubscriptionsResultBlock = { result in print(result) }
/// database.add(operation)
/// ```
open class CKModifySubscriptionsOperation: CKDatabaseOperation, @unchecked Sendable {
    // @unchecked Sendable: as CKOperation — properties are set before start, blocks run on the
    // serial callback queue.

    /// The subscriptions to create or replace.
    open var subscriptionsToSave: [CKSubscription]?
    /// The IDs of the subscriptions to delete.
    open var subscriptionIDsToDelete: [CKSubscription.ID]?

    /// One subscription saved (as the server has it) or not.
    open var perSubscriptionSaveBlock: ((CKSubscription.ID, Result<CKSubscription, any Error>) -> Void)?
    /// One subscription deleted or not (`unknownItem` when there was none of that ID).
    open var perSubscriptionDeleteBlock: ((CKSubscription.ID, Result<Void, any Error>) -> Void)?
    /// The whole operation's outcome (`partialFailure` when some items failed).
    open var modifySubscriptionsResultBlock: ((Result<Void, any Error>) -> Void)?

    /// Deprecated in CloudKit (use `modifySubscriptionsResultBlock`): the saved subscriptions,
    /// the deleted IDs and the operation's error.
    open var modifySubscriptionsCompletionBlock: (([CKSubscription]?, [CKSubscription.ID]?, (any Error)?) -> Void)?
    private var savedSubscriptions: [CKSubscription] = []
    private var deletedSubscriptionIDs: [CKSubscription.ID] = []

    public override init() {
        super.init()
    }

    public convenience init(subscriptionsToSave: [CKSubscription]? = nil, subscriptionIDsToDelete: [CKSubscription.ID]? = nil) {
        self.init()
        self.subscriptionsToSave = subscriptionsToSave
        self.subscriptionIDsToDelete = subscriptionIDsToDelete
    }

    override func makeRequest(maximumItems: Int) throws -> Wire.Open.Request {
        let subscriptions = self.subscriptionsToSave ?? []
        let deletions = self.subscriptionIDsToDelete ?? []
        guard subscriptions.count + deletions.count <= maximumItems else {
            throw CKError(
                .limitExceeded,
                message: "\(subscriptions.count + deletions.count) subscriptions in one operation; at most \(maximumItems) are allowed"
            )
        }
        let scope = CKDatabaseScope(wire: self.target().scope) ?? .private
        var wire: [Wire.Subscription] = []
        for subscription in subscriptions {
            try subscription.validate(for: scope)
            wire.append(try subscription.wireSubscription)
        }
        for id in deletions where id.isEmpty || id.utf8.contains(0) {
            throw CKError(.invalidArguments, message: "subscription ID \"\(id)\" to delete is empty or contains U+0000")
        }
        return .modifySubscriptions(Wire.ModifySubscriptionsRequest(subscriptionsToSave: wire, subscriptionIDsToDelete: deletions))
    }

    override func handle(event: Wire.Event) {
        guard case .modifySubscriptions(let payload) = event.payload else { return }
        switch payload.callback {
        case .perSubscriptionSave(let outcome):
            guard let (id, result) = SubscriptionOutcomeDecoder.decode(outcome) else { return }
            self.perSubscriptionSaveBlock?(id, result)
            if case .success(let subscription) = result {
                self.savedSubscriptions.append(subscription)
            }
        case .perSubscriptionDelete(let deleted):
            guard !deleted.subscriptionID.isEmpty else { return }
            self.perSubscriptionDeleteBlock?(deleted.subscriptionID, deleted.error.map { .failure(CKError(wire: $0)) } ?? .success(()))
            if deleted.error == nil {
                self.deletedSubscriptionIDs.append(deleted.subscriptionID)
            }
        case nil:
            break
        }
    }

    override func deliverResult(_ error: (any Error)?, complete: Wire.Complete?) {
        self.modifySubscriptionsResultBlock?(error.map { .failure($0) } ?? .success(()))
        self.modifySubscriptionsCompletionBlock?(self.savedSubscriptions, self.deletedSubscriptionIDs, error)
    }
}

/// Turns the wire's per-subscription outcomes into CloudKit results.
enum SubscriptionOutcomeDecoder {
    static func decode(_ outcome: Wire.SubscriptionOutcome) -> (CKSubscription.ID, Result<CKSubscription, any Error>)? {
        let id = outcome.subscriptionID
        guard !id.isEmpty else { return nil }
        switch outcome.outcome {
        case .subscription(let subscription):
            return (id, Result { () throws(CKError) in try CKSubscription.make(wire: subscription) }.mapError { $0 })
        case .error(let error):
            return (id, .failure(CKError(wire: error)))
        case nil:
            return (id, .failure(CKError(.internalError, message: "the server sent no outcome for subscription \(id)")))
        }
    }
}
