import CirrusModel
import CirrusWire
import Foundation

/// Fetches subscriptions of one database by ID, or all of them (CloudKit's
/// `CKFetchSubscriptionsOperation`).
///
/// For example:
/// ```swift
/// let operation = CKFetchSubscriptionsOperation.fetchAllSubscriptionsOperation()
/// operation.perSubscriptionResultBlock = { id, result in print(id, result) }
/// operation.fetchSubscriptionsResultBlock = { result in print(result) }
/// database.add(operation)
/// ```
open class CKFetchSubscriptionsOperation: CKDatabaseOperation, @unchecked Sendable {
    // @unchecked Sendable: as CKOperation — properties are set before start, blocks run on the
    // serial callback queue.

    /// The subscriptions to fetch; nil = every subscription of the database.
    open var subscriptionIDs: [CKSubscription.ID]?
    /// One subscription fetched, or why not (`unknownItem`).
    open var perSubscriptionResultBlock: ((CKSubscription.ID, Result<CKSubscription, any Error>) -> Void)?
    /// The whole operation's outcome (`partialFailure` when some IDs failed).
    open var fetchSubscriptionsResultBlock: ((Result<Void, any Error>) -> Void)?

    /// Deprecated in CloudKit (use `fetchSubscriptionsResultBlock`): the subscriptions by ID
    /// and the operation's error.
    open var fetchSubscriptionCompletionBlock: (([CKSubscription.ID: CKSubscription]?, (any Error)?) -> Void)?
    private var fetchedSubscriptions: [CKSubscription.ID: CKSubscription] = [:]

    public required override init() {
        super.init()
    }

    public convenience init(subscriptionIDs: [CKSubscription.ID]) {
        self.init()
        self.subscriptionIDs = subscriptionIDs
    }

    /// An operation that fetches every subscription of the database.
    open class func fetchAllSubscriptionsOperation() -> Self {
        let operation = Self()
        operation.subscriptionIDs = nil
        return operation
    }

    override func makeRequest(maximumItems: Int) throws -> Wire.Open.Request {
        guard let ids = self.subscriptionIDs else {
            return .fetchSubscriptions(Wire.FetchSubscriptionsRequest(fetchAllSubscriptions: true))
        }
        guard ids.count <= maximumItems else {
            throw CKError(.limitExceeded, message: "\(ids.count) subscriptions in one fetch; at most \(maximumItems) are allowed")
        }
        for id in ids where id.isEmpty || id.utf8.contains(0) {
            throw CKError(.invalidArguments, message: "subscription ID \"\(id)\" to fetch is empty or contains U+0000")
        }
        return .fetchSubscriptions(Wire.FetchSubscriptionsRequest(subscriptionIDs: ids))
    }

    override func handle(event: Wire.Event) {
        guard case .fetchSubscriptions(let payload) = event.payload else { return }
        switch payload.callback {
        case .perSubscriptionResult(let outcome):
            guard let (id, result) = SubscriptionOutcomeDecoder.decode(outcome) else { return }
            self.perSubscriptionResultBlock?(id, result)
            if case .success(let subscription) = result {
                self.fetchedSubscriptions[id] = subscription
            }
        case nil:
            break
        }
    }

    override func deliverResult(_ error: (any Error)?, complete: Wire.Complete?) {
        self.fetchSubscriptionsResultBlock?(error.map { .failure($0) } ?? .success(()))
        self.fetchSubscriptionCompletionBlock?(self.fetchedSubscriptions, error)
    }
}
