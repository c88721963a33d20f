import CirrusModel
import CirrusWire
import Foundation
import NIOConcurrencyHelpers

/// Reads the notifications the server kept for the current user, after a change token
/// (CloudKit's `CKFetchNotificationChangesOperation`). Container-level: add it to the
/// container, not a database. For notifications as they happen, iterate
/// `container.notifications(since:)` instead.
///
/// For example:
/// ```swift
/// let operation = CKFetchNotificationChangesOperation(previousServerChangeToken: savedToken)
/// operation.notificationChangedBlock = { notification in handle(notification) }
/// operation.fetchNotificationChangesResultBlock = { result in
///     switch result {
///     case .success((let newToken, _)):
///         savedToken = newToken
///     case .failure(let error):
///         print(error)
///     }
/// }
/// container.add(operation)
/// ```
open class CKFetchNotificationChangesOperation: CKOperation, @unchecked Sendable {
    // @unchecked Sendable: as CKOperation — properties are set before start, blocks run on the
    // serial callback queue; `more` is lock-protected.

    /// Where the previous fetch ended; nil = from the oldest notification the server keeps.
    open var previousServerChangeToken: CKServerChangeToken?
    /// The most notifications to return; 0 = the server's default.
    open var resultsLimit: Int = 0

    /// One notification after the token, oldest first.
    open var notificationChangedBlock: ((CKNotification) -> Void)?
    /// The token to continue from and whether more notifications remain, or the error
    /// (`changeTokenExpired` means: fetch again without a token).
    open var fetchNotificationChangesResultBlock:
        ((Result<(serverChangeToken: CKServerChangeToken, moreComing: Bool), any Error>) -> Void)?
    /// Deprecated in CloudKit (use `fetchNotificationChangesResultBlock`).
    open var fetchNotificationChangesCompletionBlock: ((CKServerChangeToken?, (any Error)?) -> Void)?

    private let more = NIOLockedValueBox(false)

    /// After the operation finished: whether the server has more notifications after the
    /// returned token (fetch again with it).
    open var moreComing: Bool { self.more.withLockedValue { $0 } }

    public override init() {
        super.init()
    }

    public convenience init(previousServerChangeToken: CKServerChangeToken?) {
        self.init()
        self.previousServerChangeToken = previousServerChangeToken
    }

    override func makeRequest(maximumItems: Int) throws -> Wire.Open.Request {
        guard self.resultsLimit >= 0, self.resultsLimit <= Int(UInt32.max) else {
            throw CKError(.invalidArguments, message: "resultsLimit \(self.resultsLimit) is out of range")
        }
        return .fetchNotificationChanges(
            Wire.FetchNotificationChangesRequest(
                previousServerChangeToken: self.previousServerChangeToken?.wireToken,
                resultsLimit: UInt32(self.resultsLimit)
            )
        )
    }

    override func handle(event: Wire.Event) {
        guard case .fetchNotificationChanges(let payload) = event.payload else { return }
        switch payload.callback {
        case .notificationChanged(let notification):
            self.notificationChangedBlock?(CKNotification.make(wire: notification))
        case nil:
            break
        }
    }

    override func deliverResult(_ error: (any Error)?, complete: Wire.Complete?) {
        if let error {
            self.fetchNotificationChangesResultBlock?(.failure(error))
            self.fetchNotificationChangesCompletionBlock?(nil, error)
            return
        }
        guard case .fetchNotificationChanges(let result) = complete?.result, let token = result.serverChangeToken else {
            let error = CKError(.internalError, message: "the server completed without a change token")
            self.fetchNotificationChangesResultBlock?(.failure(error))
            self.fetchNotificationChangesCompletionBlock?(nil, error)
            return
        }
        let serverToken = CKServerChangeToken(wire: token)
        self.more.withLockedValue { $0 = result.moreComing }
        self.fetchNotificationChangesResultBlock?(.success((serverToken, result.moreComing)))
        self.fetchNotificationChangesCompletionBlock?(serverToken, nil)
    }
}
