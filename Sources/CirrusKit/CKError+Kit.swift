import CirrusModel
import CirrusWire
import Foundation

extension CKError {
    /// The CloudKit error for a connection or stream failure.
    init(_ failure: ConnectionFailure) {
        self.init(Code(wire: failure.code), message: failure.message)
    }

    /// `error` as a `CKError`: itself when it is one, else a network failure describing it.
    static func wrapping(_ error: any Error) -> CKError {
        switch error {
        case let error as CKError: error
        case let failure as ConnectionFailure: CKError(failure)
        default: CKError(.networkFailure, message: "\(error)")
        }
    }
}
