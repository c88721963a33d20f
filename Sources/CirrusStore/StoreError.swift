/// An error of the storage layer for a whole call (per-item failures are
/// ``ItemFailure`` values inside the call's result instead). The server maps
/// its code onto the protocol error a client sees.
///
/// For example:
/// ```swift
/// do { _ = try await storage.fetchAllZones(in: key) }
/// catch let error as StoreError where error.code == .badDatabase { … }
/// ```
public struct StoreError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What went wrong; a set of codes that can grow.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: Hashable, Sendable {
            case limitExceeded, invalidArguments, badDatabase, zoneNotFound
            case changeTokenExpired, corruptData, storageFailure
            case duplicateOperation, unknownOperation, leaseLost
            case unknownUser, alreadyExists
            case unavailable
        }

        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// More items in one request than the store accepts (default 400).
        public static let limitExceeded = Code(.limitExceeded)
        /// The request itself is malformed (e.g. a negative limit).
        public static let invalidArguments = Code(.invalidArguments)
        /// The database key names no valid database (e.g. an unspecified scope).
        public static let badDatabase = Code(.badDatabase)
        /// The zone a whole call is about does not exist.
        public static let zoneNotFound = Code(.zoneNotFound)
        /// A change sequence is older than the tombstones kept, or newer than the zone.
        public static let changeTokenExpired = Code(.changeTokenExpired)
        /// Stored bytes did not decode.
        public static let corruptData = Code(.corruptData)
        /// SQLite or the file system failed.
        public static let storageFailure = Code(.storageFailure)
        /// A long-lived operation with this ID is already registered for this user.
        public static let duplicateOperation = Code(.duplicateOperation)
        /// No such long-lived operation (or it is no longer running).
        public static let unknownOperation = Code(.unknownOperation)
        /// Another node holds the long-lived operation now (it took it over once this node's
        /// lease expired): this node may no longer journal it.
        public static let leaseLost = Code(.leaseLost)
        /// No such user in the directory.
        public static let unknownUser = Code(.unknownUser)
        /// What an administrator tried to create exists (a user, a lookup value another user holds).
        public static let alreadyExists = Code(.alreadyExists)
        /// The database server cannot be reached now (restarting, stopped, the connection
        /// lost): the call may succeed when tried again after a moment. A write that fails so
        /// either committed whole or not at all.
        public static let unavailable = Code(.unavailable)

        public var description: String { "\(base)" }
    }

    public var code: Code
    /// English, for logs.
    public var message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "StoreError.\(code): \(message)" }
}

extension StoreError {
    /// Wraps any error thrown below the storage API (GRDB, file system) unless
    /// it already is a `StoreError`.
    static func wrapping(_ error: any Error) -> StoreError {
        if let error = error as? StoreError { return error }
        return StoreError(.storageFailure, "\(error)")
    }
}
