import CirrusModel
import CirrusWire
import Dispatch
import Foundation
import NIOConcurrencyHelpers

/// Long-lived operations (Docs/ARCHITECTURE.md §4): list the caller's, and rebuild one to resume it.
///
/// For example, the life cycle CloudKit documents:
/// ```swift
/// container.fetchAllLongLivedOperationIDs { operationIDs, error in
///     for operationID in operationIDs ?? [] {
///         container.fetchLongLivedOperation(withID: operationID) { operation, error in
///             guard let operation = operation as? CKModifyRecordsOperation else { return }
///             operation.perRecordSaveBlock = { id, result in … }
///             operation.modifyRecordsResultBlock = { result in … }
///             container.add(operation)  // sends Resume: saved callbacks, then live ones
///         }
///     }
/// }
/// ```
extension CKContainer {
    /// Fetches the IDs of the current user's long-lived operations that are running or that
    /// completed within the server's retention window (24 h by default) and whose result no
    /// client has received yet.
    ///
    /// The handler runs once, on a queue of the library's.
    public func fetchAllLongLivedOperationIDs(
        completionHandler: @escaping @Sendable ([CKOperation.ID]?, (any Error)?) -> Void
    ) {
        self.containerRequest(.fetchLongLivedOperationIDs(Wire.FetchLongLivedOperationIDsRequest())) { result in
            switch result {
            case .success(let complete):
                guard case .fetchLongLivedOperationIDs(let ids)? = complete.result else {
                    completionHandler(nil, CKError(.internalError, message: "the server's answer carries no operation IDs"))
                    return
                }
                completionHandler(ids.operationIDs, nil)
            case .failure(let error):
                completionHandler(nil, error)
            }
        }
    }

    /// The IDs of the current user's long-lived operations (see
    /// `fetchAllLongLivedOperationIDs(completionHandler:)`).
    ///
    /// - throws: `CKError`, e.g. `.networkFailure` or `.notAuthenticated`.
    public func allLongLivedOperationIDs() async throws -> [CKOperation.ID] {
        try await withCheckedThrowingContinuation { continuation in
            self.fetchAllLongLivedOperationIDs { ids, error in
                if let ids {
                    continuation.resume(returning: ids)
                } else {
                    continuation.resume(throwing: error ?? CKError(.internalError, message: "no operation IDs and no error"))
                }
            }
        }
    }

    /// Fetches the long-lived operation `operationID` as an operation object of its subclass
    /// (`CKModifyRecordsOperation`, `CKQueryOperation` …) with the request it was started
    /// with, its database and its configuration (`isLongLived` true).
    ///
    /// Set its callback blocks, then add it (`container.add(_:)`, its database's `add(_:)` or
    /// `start()`): it asks the server to resume instead of running again, so its blocks get
    /// every callback the operation produced so far, then the live ones, then its result. It is
    /// never run a second time.
    ///
    /// An ID that is unknown, another user's, or past retention ends with
    /// `CKError(.unknownItem)`, CloudKit's code for an ID that names nothing. A kind of
    /// operation this version of the library has no class for ends with `.internalError`.
    public func fetchLongLivedOperation(
        withID operationID: CKOperation.ID,
        completionHandler: @escaping @Sendable (CKOperation?, (any Error)?) -> Void
    ) {
        let request = Wire.FetchLongLivedOperationRequest(operationID: operationID)
        self.containerRequest(.fetchLongLivedOperation(request)) { result in
            switch result {
            case .success(let complete):
                guard case .fetchLongLivedOperation(let info)? = complete.result else {
                    completionHandler(nil, CKError(.internalError, message: "the server's answer carries no operation"))
                    return
                }
                do {
                    completionHandler(try CKOperation.longLivedOperation(from: info, in: self), nil)
                } catch {
                    completionHandler(nil, error)
                }
            case .failure(let error):
                completionHandler(nil, error)
            }
        }
    }

    /// The long-lived operation `operationID`, ready to be resumed (see
    /// `fetchLongLivedOperation(withID:completionHandler:)`).
    ///
    /// - throws: `CKError`: `.unknownItem` for an ID that is unknown, another user's or past
    ///   retention; `.networkFailure` …
    public func longLivedOperation(for operationID: CKOperation.ID) async throws -> CKOperation {
        try await withCheckedThrowingContinuation { continuation in
            self.fetchLongLivedOperation(withID: operationID) { operation, error in
                if let operation {
                    continuation.resume(returning: operation)
                } else {
                    continuation.resume(throwing: error ?? CKError(.internalError, message: "no operation and no error"))
                }
            }
        }
    }

    /// Runs one container-level request (`Open` with database scope UNSPECIFIED, no events) and
    /// hands its `Complete` (without error) or the error to `completion`, once. It gives up
    /// with `networkFailure` after `timeoutIntervalForRequest`'s default.
    func containerRequest(
        _ request: Wire.Open.Request,
        completion: @escaping @Sendable (Result<Wire.Complete, CKError>) -> Void
    ) {
        let open = Wire.Open(
            operationID: RandomUUID.string(),
            databaseScope: .unspecified,
            containerIdentifier: self.containerIdentifier ?? "",
            request: request
        )
        let queue = DispatchQueue(label: "CKContainer.request.\(open.operationID)")
        let done = NIOLockedValueBox(false)
        let finish: @Sendable (Result<Wire.Complete, CKError>) -> Void = { result in
            let first = done.withLockedValue { done -> Bool in
                defer { done = true }
                return !done
            }
            if first {
                completion(result)
            }
        }
        let stream = ClientStream(open: open, window: 1, queue: queue) { delivery in
            switch delivery {
            case .complete(let complete):
                finish(complete.error.map { .failure(CKError(wire: $0)) } ?? .success(complete))
            case .failed(let failure):
                finish(.failure(CKError(failure)))
            case .event, .persisted:
                break
            }
        }
        let timeout = CKOperation.Configuration.defaultTimeoutIntervalForRequest
        queue.asyncAfter(deadline: .now() + timeout) {
            stream.cancel(reason: "timed out")
            finish(.failure(CKError(.networkFailure, message: "no response within \(timeout) s")))
        }
        self.connectionManager.open(stream)
    }
}
