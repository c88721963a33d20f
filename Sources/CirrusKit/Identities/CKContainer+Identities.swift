import CirrusModel
import CirrusWire
import Foundation

/// Whether the current user can use the container (CloudKit's `CKAccountStatus`; Apple's raw
/// values).
public enum CKAccountStatus: Int, Sendable, Hashable {
    /// The server could not be asked (see the error).
    case couldNotDetermine = 0
    /// The user is authenticated and enabled.
    case available = 1
    case restricted = 2
    /// The server does not serve this user: an administrator disabled them, or they present
    /// no credential the server accepts.
    case noAccount = 3
    /// The server is shutting down; ask again later.
    case temporarilyUnavailable = 4
}

extension CKContainer {
    /// Permissions a user grants the app (CloudKit's `CKContainer.ApplicationPermissions`).
    public struct ApplicationPermissions: OptionSet, Sendable, Hashable {
        public let rawValue: UInt
        public init(rawValue: UInt) { self.rawValue = rawValue }

        /// Others may discover the user by email address, phone number or user record ID.
        public static let userDiscoverability = ApplicationPermissions(rawValue: 1)
    }

    /// The state of a permission (CloudKit's `CKContainer.ApplicationPermissionStatus`; Apple's
    /// raw values).
    public enum ApplicationPermissionStatus: Int, Sendable, Hashable {
        /// Never asked.
        case initialState = 0
        case couldNotComplete = 1
        case denied = 2
        case granted = 3
    }
}

/// The current user: record ID, account status, discoverability.
///
/// For example:
/// ```swift
/// let me = try await container.userRecordID()
/// if try await container.accountStatus() == .available {
///     _ = try await container.requestApplicationPermission(.userDiscoverability)
/// }
/// ```
extension CKContainer {
    /// Fetches the current user's record ID (record name like `_alice`, default zone).
    ///
    /// The handler runs once, on a queue of the library's.
    public func fetchUserRecordID(completionHandler: @escaping @Sendable (CKRecord.ID?, (any Error)?) -> Void) {
        self.containerRequest(.fetchUserRecordID(Wire.FetchUserRecordIDRequest())) { result in
            switch result {
            case .success(let complete):
                guard case .fetchUserRecordID(let answer)? = complete.result, let wire = answer.userRecordID,
                    let id = try? CKRecord.ID(wire: wire)
                else {
                    completionHandler(nil, CKError(.internalError, message: "the server's answer carries no user record ID"))
                    return
                }
                completionHandler(id, nil)
            case .failure(let error):
                completionHandler(nil, error)
            }
        }
    }

    /// The current user's record ID.
    ///
    /// - throws: `CKError`, e.g. `.notAuthenticated` or `.networkFailure`.
    public func userRecordID() async throws -> CKRecord.ID {
        try await withCheckedThrowingContinuation { continuation in
            self.fetchUserRecordID { id, error in
                if let id {
                    continuation.resume(returning: id)
                } else {
                    continuation.resume(throwing: error ?? CKError(.internalError, message: "no user record ID and no error"))
                }
            }
        }
    }

    /// Fetches whether the current user can use the container. A server that refuses the
    /// user's credential (or disabled them) answers `.noAccount` without an error; one that is
    /// shutting down or out of reach `.temporarilyUnavailable`; other failures
    /// `.couldNotDetermine` with the error.
    public func accountStatus(completionHandler: @escaping @Sendable (CKAccountStatus, (any Error)?) -> Void) {
        self.containerRequest(.accountStatus(Wire.AccountStatusRequest())) { result in
            switch result {
            case .success(let complete):
                guard case .accountStatus(let answer)? = complete.result else {
                    completionHandler(.couldNotDetermine, CKError(.internalError, message: "the server's answer carries no status"))
                    return
                }
                completionHandler(CKAccountStatus(rawValue: Int(answer.status.rawValue)) ?? .couldNotDetermine, nil)
            case .failure(let error):
                switch error.code {
                case .notAuthenticated:
                    completionHandler(.noAccount, nil)
                case .serviceUnavailable, .accountTemporarilyUnavailable:
                    completionHandler(.temporarilyUnavailable, nil)
                default:
                    completionHandler(.couldNotDetermine, error)
                }
            }
        }
    }

    /// Whether the current user can use the container (see `accountStatus(completionHandler:)`).
    ///
    /// - throws: `CKError` when the status could not be determined.
    public func accountStatus() async throws -> CKAccountStatus {
        try await withCheckedThrowingContinuation { continuation in
            self.accountStatus { status, error in
                if let error {
                    continuation.resume(throwing: error)
                } else {
                    continuation.resume(returning: status)
                }
            }
        }
    }

    /// Grants `applicationPermission` for the current user in this container (there is no
    /// prompt on a server: asking grants it) and hands back its new status.
    public func requestApplicationPermission(
        _ applicationPermission: ApplicationPermissions,
        completionHandler: @escaping @Sendable (ApplicationPermissionStatus, (any Error)?) -> Void
    ) {
        self.permissionRequest(applicationPermission, action: .request, completionHandler: completionHandler)
    }

    /// Grants `applicationPermission` (see `requestApplicationPermission(_:completionHandler:)`).
    ///
    /// - throws: `CKError`.
    public func requestApplicationPermission(_ applicationPermission: ApplicationPermissions) async throws
        -> ApplicationPermissionStatus
    {
        try await withCheckedThrowingContinuation { continuation in
            self.requestApplicationPermission(applicationPermission) { status, error in
                if let error { continuation.resume(throwing: error) } else { continuation.resume(returning: status) }
            }
        }
    }

    /// The current user's status of `applicationPermission` in this container.
    public func status(
        forApplicationPermission applicationPermission: ApplicationPermissions,
        completionHandler: @escaping @Sendable (ApplicationPermissionStatus, (any Error)?) -> Void
    ) {
        self.permissionRequest(applicationPermission, action: .status, completionHandler: completionHandler)
    }

    /// The current user's status of `applicationPermission` in this container.
    ///
    /// - throws: `CKError`.
    public func applicationPermissionStatus(for applicationPermission: ApplicationPermissions) async throws
        -> ApplicationPermissionStatus
    {
        try await withCheckedThrowingContinuation { continuation in
            self.status(forApplicationPermission: applicationPermission) { status, error in
                if let error { continuation.resume(throwing: error) } else { continuation.resume(returning: status) }
            }
        }
    }

    /// Withdraws `applicationPermission` (a Cirrus extension: on Apple platforms the user does
    /// this in Settings); others no longer discover the user.
    ///
    /// - throws: `CKError`.
    public func revokeApplicationPermission(_ applicationPermission: ApplicationPermissions) async throws
        -> ApplicationPermissionStatus
    {
        try await withCheckedThrowingContinuation { continuation in
            self.permissionRequest(applicationPermission, action: .revoke) { status, error in
                if let error { continuation.resume(throwing: error) } else { continuation.resume(returning: status) }
            }
        }
    }

    private func permissionRequest(
        _ permission: ApplicationPermissions, action: Wire.ApplicationPermissionAction,
        completionHandler: @escaping @Sendable (ApplicationPermissionStatus, (any Error)?) -> Void
    ) {
        guard permission == .userDiscoverability else {
            completionHandler(.couldNotComplete, CKError(.invalidArguments, message: "the only permission is userDiscoverability"))
            return
        }
        let request = Wire.ApplicationPermissionRequest(permission: .userDiscoverability, action: action)
        self.containerRequest(.applicationPermission(request)) { result in
            switch result {
            case .success(let complete):
                guard case .applicationPermission(let answer)? = complete.result else {
                    completionHandler(.couldNotComplete, CKError(.internalError, message: "the server's answer carries no status"))
                    return
                }
                completionHandler(ApplicationPermissionStatus(rawValue: Int(answer.status.rawValue)) ?? .couldNotComplete, nil)
            case .failure(let error):
                completionHandler(.couldNotComplete, error)
            }
        }
    }
}
