import CirrusWire
import Foundation

/// Why the asset store refused or failed a request: the wire code the client gets, and a
/// message saying what to do about it.
public struct AssetStoreError: Error, Sendable, Hashable, CustomStringConvertible {
    public var code: Wire.ErrorCode
    public var message: String

    public init(code: Wire.ErrorCode, message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { self.message }

    /// The operation error a client sees.
    var operationError: Wire.OperationError {
        Wire.OperationError(code: self.code, message: self.message)
    }

    static func invalid(_ message: String) -> AssetStoreError {
        AssetStoreError(code: .invalidArguments, message: message)
    }

    /// A failed system call on `path`, with errno's reason. A full disk (or quota) is
    /// `quotaExceeded` with a message saying so; the rest are internal errors.
    static func system(_ what: String, _ path: String) -> AssetStoreError {
        let error = errno
        let reason = String(cString: strerror(error))
        if error == ENOSPC || error == EDQUOT || error == EFBIG {
            return AssetStoreError(
                code: .quotaExceeded, message: "the server is out of disk space for assets (\(reason)); nothing was stored")
        }
        return AssetStoreError(code: .internalError, message: "\(what) \(path): \(reason)")
    }
}
