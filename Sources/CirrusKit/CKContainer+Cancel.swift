import CirrusModel
import Foundation

extension CKContainer {
    /// Cancels every operation added to the container or one of its databases with `add(_:)`
    /// that has not finished: a running one sends `Cancel` to the server, and each one's
    /// result block gets `CKError.operationCancelled`. Operations the async and
    /// completion-handler conveniences start for themselves are not in that queue; cancel
    /// their tasks instead.
    ///
    /// For example:
    /// ```swift
    /// container.cancelAllOperations()
    /// ```
    public func cancelAllOperations() {
        // Those not running first: cancelling a running operation finishes it, and its
        // finishing can start an operation that depends on it before the queue's own
        // `cancelAllOperations` reaches that one, which would then open a stream only to
        // cancel it.
        for operation in self.operationQueue.operations where !operation.isExecuting {
            operation.cancel()
        }
        self.operationQueue.cancelAllOperations()
    }
}
