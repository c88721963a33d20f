import CirrusModel
import CirrusWire
import Foundation

/// One database of a container: the user's private one, the public one, or the shared one.
///
/// For example:
/// ```swift
/// let database = CKContainer.default().privateCloudDatabase
/// database.add(CKFetchRecordsOperation(recordIDs: [id]))
/// ```
open class CKDatabase: @unchecked Sendable, CustomStringConvertible {
    // @unchecked Sendable: both stored properties are immutable and Sendable.

    /// CloudKit's database scopes (raw values as Apple's).
    public typealias Scope = CKDatabaseScope

    /// The container the database belongs to.
    public let container: CKContainer
    /// Which database this is.
    public let databaseScope: Scope

    init(container: CKContainer, scope: Scope) {
        self.container = container
        self.databaseScope = scope
    }

    /// Runs `operation` against this database.
    open func add(_ operation: CKDatabaseOperation) {
        operation.database = self
        self.container.add(operation)
    }

    /// Starts an operation that one of the convenience calls (async or completion handler) made
    /// for itself, on the calling thread: nothing else holds it and it has no dependencies, so
    /// the container's operation queue (a hop to another thread and its bookkeeping per call)
    /// would only delay it.
    func start(_ operation: CKDatabaseOperation) {
        operation.database = self
        ConvenienceScope.apply(to: operation)
        if operation.configuration.explicit.container == nil {
            operation.configuration.container = self.container
        }
        operation.start()
    }

    public var description: String {
        "<CKDatabase \(self.databaseScope) of \(self.container.containerIdentifier ?? "?")>"
    }
}
