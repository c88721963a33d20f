import CirrusModel
import CirrusWire
import Foundation

/// Marks notifications of the current user read (CloudKit's `CKMarkNotificationsReadOperation`,
/// deprecated there but part of the family). Container-level: add it to the container.
/// `CKFetchNotificationChangesOperation` then returns them with `isRead` set.
///
/// For example:
/// ```swift
/// let operation = CKMarkNotificationsReadOperation(notificationIDsToMarkRead: ids)
/// operation.markNotificationsReadCompletionBlock = { marked, error in print(marked ?? [], error ?? "") }
/// container.add(operation)
/// ```
open class CKMarkNotificationsReadOperation: CKOperation, @unchecked Sendable {
    // @unchecked Sendable: as CKOperation — properties are set before start, blocks run on the
    // serial callback queue.

    /// The notifications to mark (at most 400).
    open var notificationIDs: [CKNotification.ID] = []
    /// One notification marked, or why not (`unknownItem` for an ID not in the user's feed).
    open var perNotificationIDResultBlock: ((CKNotification.ID, Result<Void, any Error>) -> Void)?
    /// The whole operation's outcome (`partialFailure` when some IDs were unknown).
    open var markNotificationsReadResultBlock: ((Result<Void, any Error>) -> Void)?
    /// Deprecated in CloudKit: the IDs marked read and the operation's error.
    open var markNotificationsReadCompletionBlock: (([CKNotification.ID]?, (any Error)?) -> Void)?

    public override init() {
        super.init()
    }

    public convenience init(notificationIDsToMarkRead notificationIDs: [CKNotification.ID]) {
        self.init()
        self.notificationIDs = notificationIDs
    }

    override func makeRequest(maximumItems: Int) throws -> Wire.Open.Request {
        guard notificationIDs.count <= maximumItems else {
            throw CKError(.limitExceeded, message: "\(notificationIDs.count) notifications in one operation; at most \(maximumItems)")
        }
        return .markNotificationsRead(Wire.MarkNotificationsReadRequest(notificationIDs: notificationIDs.map(\.rawValue)))
    }

    override func deliverResult(_ error: (any Error)?, complete: Wire.Complete?) {
        var marked: [CKNotification.ID] = []
        if case .markNotificationsRead(let result)? = complete?.result {
            marked = result.notificationIDsMarkedRead.map(CKNotification.ID.init(rawValue:))
        }
        for id in marked {
            self.perNotificationIDResultBlock?(id, .success(()))
        }
        if let failures = (error as? CKError)?.partialErrorsByItemID {
            for (key, itemError) in failures {
                guard let raw = key.base as? String else { continue }
                self.perNotificationIDResultBlock?(CKNotification.ID(rawValue: raw), .failure(itemError))
            }
        }
        self.markNotificationsReadResultBlock?(error.map { .failure($0) } ?? .success(()))
        self.markNotificationsReadCompletionBlock?(complete == nil && error != nil ? nil : marked, error)
    }
}

/// Sets the badge count of the current user's notifications (CloudKit's
/// `CKModifyBadgeOperation`, deprecated there): the next notification of a subscription with
/// `shouldBadge` shows one more. Container-level: add it to the container.
///
/// For example:
/// ```swift
/// let operation = CKModifyBadgeOperation(badgeValue: 0)
/// operation.modifyBadgeResultBlock = { result in print(result) }
/// container.add(operation)
/// ```
open class CKModifyBadgeOperation: CKOperation, @unchecked Sendable {
    // @unchecked Sendable: as CKOperation.

    /// The new badge value (0 clears it).
    open var badgeValue: Int = 0
    /// The operation's outcome.
    open var modifyBadgeResultBlock: ((Result<Void, any Error>) -> Void)?
    /// Deprecated in CloudKit (use `modifyBadgeResultBlock`).
    open var modifyBadgeCompletionBlock: (((any Error)?) -> Void)?

    public override init() {
        super.init()
    }

    public convenience init(badgeValue: Int) {
        self.init()
        self.badgeValue = badgeValue
    }

    override func makeRequest(maximumItems: Int) throws -> Wire.Open.Request {
        guard let value = UInt32(exactly: badgeValue) else {
            throw CKError(.invalidArguments, message: "badge value \(badgeValue) is out of range (0…\(UInt32.max))")
        }
        return .modifyBadge(Wire.ModifyBadgeRequest(badgeValue: value))
    }

    override func deliverResult(_ error: (any Error)?, complete: Wire.Complete?) {
        self.modifyBadgeResultBlock?(error.map { .failure($0) } ?? .success(()))
        self.modifyBadgeCompletionBlock?(error)
    }
}
