extension CKError {
    /// Every CloudKit error code, with Apple's raw values.
    public enum Code: Int, Hashable, Sendable, CaseIterable, CustomStringConvertible {
        case internalError = 1
        case partialFailure = 2
        case networkUnavailable = 3
        case networkFailure = 4
        case badContainer = 5
        case serviceUnavailable = 6
        case requestRateLimited = 7
        case missingEntitlement = 8
        case notAuthenticated = 9
        case permissionFailure = 10
        case unknownItem = 11
        case invalidArguments = 12
        case resultsTruncated = 13
        case serverRecordChanged = 14
        case serverRejectedRequest = 15
        case assetFileNotFound = 16
        case assetFileModified = 17
        case incompatibleVersion = 18
        case constraintViolation = 19
        case operationCancelled = 20
        case changeTokenExpired = 21
        case batchRequestFailed = 22
        case zoneBusy = 23
        case badDatabase = 24
        case quotaExceeded = 25
        case zoneNotFound = 26
        case limitExceeded = 27
        case userDeletedZone = 28
        case tooManyParticipants = 29
        case alreadyShared = 30
        case referenceViolation = 31
        case managedAccountRestricted = 32
        case participantMayNeedVerification = 33
        case serverResponseLost = 34
        case assetNotAvailable = 35
        case accountTemporarilyUnavailable = 36
        case participantAlreadyInvited = 37

        public var description: String {
            switch self {
            case .internalError: "internal error"
            case .partialFailure: "partial failure"
            case .networkUnavailable: "network unavailable"
            case .networkFailure: "network failure"
            case .badContainer: "bad container"
            case .serviceUnavailable: "service unavailable"
            case .requestRateLimited: "request rate limited"
            case .missingEntitlement: "missing entitlement"
            case .notAuthenticated: "not authenticated"
            case .permissionFailure: "permission failure"
            case .unknownItem: "unknown item"
            case .invalidArguments: "invalid arguments"
            case .resultsTruncated: "results truncated"
            case .serverRecordChanged: "server record changed"
            case .serverRejectedRequest: "server rejected request"
            case .assetFileNotFound: "asset file not found"
            case .assetFileModified: "asset file modified"
            case .incompatibleVersion: "incompatible version"
            case .constraintViolation: "constraint violation"
            case .operationCancelled: "operation cancelled"
            case .changeTokenExpired: "change token expired"
            case .batchRequestFailed: "batch request failed"
            case .zoneBusy: "zone busy"
            case .badDatabase: "bad database"
            case .quotaExceeded: "quota exceeded"
            case .zoneNotFound: "zone not found"
            case .limitExceeded: "limit exceeded"
            case .userDeletedZone: "user deleted zone"
            case .tooManyParticipants: "too many participants"
            case .alreadyShared: "already shared"
            case .referenceViolation: "reference violation"
            case .managedAccountRestricted: "managed account restricted"
            case .participantMayNeedVerification: "participant may need verification"
            case .serverResponseLost: "server response lost"
            case .assetNotAvailable: "asset not available"
            case .accountTemporarilyUnavailable: "account temporarily unavailable"
            case .participantAlreadyInvited: "participant already invited"
            }
        }
    }

    // Apple's `_BridgedStoredNSError` gives every code a static member on the error
    // type, so `catch CKError.serverRecordChanged` and `case CKError.zoneBusy` work.
    public static var internalError: Code { .internalError }
    public static var partialFailure: Code { .partialFailure }
    public static var networkUnavailable: Code { .networkUnavailable }
    public static var networkFailure: Code { .networkFailure }
    public static var badContainer: Code { .badContainer }
    public static var serviceUnavailable: Code { .serviceUnavailable }
    public static var requestRateLimited: Code { .requestRateLimited }
    public static var missingEntitlement: Code { .missingEntitlement }
    public static var notAuthenticated: Code { .notAuthenticated }
    public static var permissionFailure: Code { .permissionFailure }
    public static var unknownItem: Code { .unknownItem }
    public static var invalidArguments: Code { .invalidArguments }
    public static var resultsTruncated: Code { .resultsTruncated }
    public static var serverRecordChanged: Code { .serverRecordChanged }
    public static var serverRejectedRequest: Code { .serverRejectedRequest }
    public static var assetFileNotFound: Code { .assetFileNotFound }
    public static var assetFileModified: Code { .assetFileModified }
    public static var incompatibleVersion: Code { .incompatibleVersion }
    public static var constraintViolation: Code { .constraintViolation }
    public static var operationCancelled: Code { .operationCancelled }
    public static var changeTokenExpired: Code { .changeTokenExpired }
    public static var batchRequestFailed: Code { .batchRequestFailed }
    public static var zoneBusy: Code { .zoneBusy }
    public static var badDatabase: Code { .badDatabase }
    public static var quotaExceeded: Code { .quotaExceeded }
    public static var zoneNotFound: Code { .zoneNotFound }
    public static var limitExceeded: Code { .limitExceeded }
    public static var userDeletedZone: Code { .userDeletedZone }
    public static var tooManyParticipants: Code { .tooManyParticipants }
    public static var alreadyShared: Code { .alreadyShared }
    public static var referenceViolation: Code { .referenceViolation }
    public static var managedAccountRestricted: Code { .managedAccountRestricted }
    public static var participantMayNeedVerification: Code { .participantMayNeedVerification }
    public static var serverResponseLost: Code { .serverResponseLost }
    public static var assetNotAvailable: Code { .assetNotAvailable }
    public static var accountTemporarilyUnavailable: Code { .accountTemporarilyUnavailable }
    public static var participantAlreadyInvited: Code { .participantAlreadyInvited }

}

extension CKError.Code {
    /// Matches an error against a code: `catch CKError.unknownItem { … }`.
    public static func ~= (code: CKError.Code, error: any Error) -> Bool {
        (error as? CKError)?.code == code
    }
}
