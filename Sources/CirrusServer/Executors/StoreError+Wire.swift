import CirrusStore
import CirrusWire

// The one place the store's domain errors become protocol errors. The store never names a
// `Wire.ErrorCode`: a whole call fails with a `StoreError`, one item with an `ItemFailure`,
// and the executors stream what these map to.

extension StoreError.Code {
    /// The protocol error code a client sees for this store error (an engine's own failures,
    /// corrupt data or I/O, are the server's fault: `internalError`).
    var wireCode: Wire.ErrorCode {
        switch self {
        case .limitExceeded: .limitExceeded
        case .invalidArguments: .invalidArguments
        case .badDatabase: .badDatabase
        case .zoneNotFound: .zoneNotFound
        case .changeTokenExpired: .changeTokenExpired
        case .duplicateOperation: .duplicateOperationID
        case .unknownOperation: .unknownOperation
        case .unavailable: .serviceUnavailable
        case .corruptData, .storageFailure: .internalError
        default: .internalError
        }
    }
}

extension StoreError {
    /// The error as the server streams it to a client.
    var operationError: Wire.OperationError {
        Wire.OperationError(code: code.wireCode, message: message, retryAfterSeconds: code.retryAfterSeconds)
    }
}

extension StoreError.Code {
    /// How long a client should wait before trying again (`CKErrorRetryAfterKey`): for a
    /// database that is unreachable, about as long as a restart takes; nil for errors that
    /// trying again does not cure.
    var retryAfterSeconds: Double? {
        self == .unavailable ? 2 : nil
    }
}

extension ItemFailure.Code {
    /// The protocol error code a client sees for a failed item (each code has its CloudKit
    /// namesake; one the server does not know yet is its own fault: `internalError`).
    var wireCode: Wire.ErrorCode {
        switch self {
        case .unknownItem: .unknownItem
        case .zoneNotFound: .zoneNotFound
        case .serverRecordChanged: .serverRecordChanged
        case .batchRequestFailed: .batchRequestFailed
        case .invalidArguments: .invalidArguments
        case .permissionFailure: .permissionFailure
        case .assetFileNotFound: .assetFileNotFound
        case .assetFileModified: .assetFileModified
        case .limitExceeded: .limitExceeded
        case .referenceViolation: .referenceViolation
        case .quotaExceeded: .quotaExceeded
        case .serverRejectedRequest: .serverRejectedRequest
        case .alreadyShared: .alreadyShared
        case .tooManyParticipants: .tooManyParticipants
        default: .internalError
        }
    }
}

extension ZoneOwnerMapping {
    /// The error a client sees for a failed item, the records in it (the server's and the
    /// client's on `serverRecordChanged`) naming owners as the client does.
    func outbound(_ failure: ItemFailure) -> Wire.OperationError {
        var error = Wire.OperationError(code: failure.code.wireCode, message: failure.message)
        error.serverRecord = failure.serverRecord.map(self.outbound)
        error.clientRecord = failure.clientRecord.map(self.outbound)
        return error
    }
}
