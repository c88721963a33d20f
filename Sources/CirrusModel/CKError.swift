import Foundation

/// The error domain of CloudKit errors.
public let CKErrorDomain = "CKErrorDomain"
/// userInfo key: the per-item errors of a `partialFailure`, `[AnyHashable: any Error]`.
public let CKPartialErrorsByItemIDKey = "CKPartialErrors"
/// userInfo key: the record as it is on the server (`serverRecordChanged`).
public let CKRecordChangedErrorServerRecordKey = "ServerRecord"
/// userInfo key: the record the client tried to save (`serverRecordChanged`).
public let CKRecordChangedErrorClientRecordKey = "ClientRecord"
/// userInfo key: the record the client's change was based on (`serverRecordChanged`).
public let CKRecordChangedErrorAncestorRecordKey = "AncestorRecord"
/// userInfo key: seconds to wait before retrying, as a `Double`.
public let CKErrorRetryAfterKey = "CKRetryAfter"
/// userInfo key (Cirrus): the wire protocol's error number (`Wire.ErrorCode.rawValue`,
/// an `Int`) when it is not a CloudKit code, such as a connection-level code (1000+).
public let CirrusWireErrorCodeKey = "CirrusWireErrorCode"

/// An error from CloudKit (`CKError`): a code plus details for some codes.
///
/// For example:
/// ```swift
/// do { try await database.save(record) }
/// catch let error as CKError where error.code == .serverRecordChanged {
///     let current = error.serverRecord
/// }
/// ```
public struct CKError: Error, Sendable, CustomNSError, LocalizedError, CustomStringConvertible {
    /// One failed item of a partial failure: its ID (a `CKRecord.ID`, `CKRecordZone.ID`,
    /// subscription ID `String`, share `URL` …) and its error.
    public typealias ItemError = (itemID: any Hashable & Sendable, error: any Error)

    /// The error's code.
    public let code: Code
    /// The server's (or client's) explanation, for logs.
    public let message: String?
    /// Seconds to wait before retrying, if the server advised it.
    public let retryAfterSeconds: Double?
    /// For `serverRecordChanged`: the record as it is now on the server.
    public let serverRecord: CKRecord?
    /// For `serverRecordChanged`: the record the client tried to save.
    public let clientRecord: CKRecord?
    /// For `serverRecordChanged`: the record the client's change was based on.
    public let ancestorRecord: CKRecord?
    /// For `partialFailure`: the failed items in the server's order.
    public let partialErrors: [ItemError]
    private let extraUserInfo: [String: any Sendable]

    /// An error with a code and optional userInfo, as Apple's `CKError(_:userInfo:)`.
    ///
    /// Well-known keys (`NSLocalizedDescriptionKey`, `CKErrorRetryAfterKey`,
    /// `CKRecordChangedError…RecordKey`) fill the matching properties.
    public init(_ code: Code, userInfo: [String: any Sendable] = [:]) {
        var extra = userInfo
        let message = extra.removeValue(forKey: NSLocalizedDescriptionKey) as? String
        let retry = extra.removeValue(forKey: CKErrorRetryAfterKey)
        let server = extra.removeValue(forKey: CKRecordChangedErrorServerRecordKey) as? CKRecord
        let client = extra.removeValue(forKey: CKRecordChangedErrorClientRecordKey) as? CKRecord
        let ancestor = extra.removeValue(forKey: CKRecordChangedErrorAncestorRecordKey) as? CKRecord
        self.init(
            code, message: message,
            retryAfterSeconds: (retry as? Double) ?? (retry as? NSNumber)?.doubleValue ?? (retry as? Int).map(Double.init),
            serverRecord: server, clientRecord: client, ancestorRecord: ancestor, userInfo: extra)
    }

    /// An error with every detail given.
    public init(
        _ code: Code,
        message: String? = nil,
        retryAfterSeconds: Double? = nil,
        serverRecord: CKRecord? = nil,
        clientRecord: CKRecord? = nil,
        ancestorRecord: CKRecord? = nil,
        partialErrors: [ItemError] = [],
        userInfo: [String: any Sendable] = [:]
    ) {
        self.code = code
        self.message = message
        self.retryAfterSeconds = retryAfterSeconds
        self.serverRecord = serverRecord
        self.clientRecord = clientRecord
        self.ancestorRecord = ancestorRecord
        self.partialErrors = partialErrors
        self.extraUserInfo = userInfo
    }

    /// For `partialFailure`: each failed item's error, keyed by item ID as CloudKit does
    /// (`CKRecord.ID`, `CKRecordZone.ID`, subscription ID …); `nil` for other errors.
    public var partialErrorsByItemID: [AnyHashable: any Error]? {
        guard code == .partialFailure || !partialErrors.isEmpty else { return nil }
        var result: [AnyHashable: any Error] = [:]
        for item in partialErrors {
            result[AnyHashable(item.itemID)] = item.error
        }
        return result
    }

    /// The error's details under CloudKit's userInfo keys.
    public var userInfo: [String: Any] { errorUserInfo }

    // MARK: CustomNSError, LocalizedError

    public static var errorDomain: String { CKErrorDomain }
    public var errorCode: Int { code.rawValue }

    public var errorUserInfo: [String: Any] {
        var info: [String: Any] = [:]
        for (key, value) in extraUserInfo { info[key] = value }
        info[NSLocalizedDescriptionKey] = errorDescription
        if let retryAfterSeconds { info[CKErrorRetryAfterKey] = retryAfterSeconds }
        if let serverRecord { info[CKRecordChangedErrorServerRecordKey] = serverRecord }
        if let clientRecord { info[CKRecordChangedErrorClientRecordKey] = clientRecord }
        if let ancestorRecord { info[CKRecordChangedErrorAncestorRecordKey] = ancestorRecord }
        if let partialErrorsByItemID { info[CKPartialErrorsByItemIDKey] = partialErrorsByItemID }
        return info
    }

    public var errorDescription: String? {
        if let message, !message.isEmpty { return message }
        return "CloudKit error \(code.rawValue) (\(code))"
    }

    public var description: String {
        var text = "<CKError \(code.rawValue) (\(code))"
        if let message, !message.isEmpty { text += ": \"\(message)\"" }
        if let retryAfterSeconds { text += "; retry after \(retryAfterSeconds)s" }
        if !partialErrors.isEmpty { text += "; \(partialErrors.count) partial errors" }
        return text + ">"
    }
}
