import CirrusTLS
import CirrusWire
import NIOCore

/// Why a connection or a stream on it failed, before it is turned into a `CKError`.
///
/// `code` is `.networkFailure` for transport trouble (refused, reset, TLS, protocol, timeouts)
/// and `.notAuthenticated` when the server refused who we are.
struct ConnectionFailure: Error, Sendable, Hashable, CustomStringConvertible {
    var code: Wire.ErrorCode
    var message: String

    var description: String { "\(self.code): \(self.message)" }

    static func network(_ message: String) -> ConnectionFailure {
        ConnectionFailure(code: .networkFailure, message: message)
    }

    /// A failure for `error` raised while connecting or on an open connection.
    /// `beforeHelloAck`: with TLS 1.3 a refused client certificate arrives as an alert after
    /// the handshake, before the server could answer `Hello`.
    static func from(_ error: any Error, beforeHelloAck: Bool, server: String) -> ConnectionFailure {
        switch error {
        case let failure as ConnectionFailure:
            return failure
        case let error as TLSError:
            if error.code == .alertReceived, beforeHelloAck {
                return ConnectionFailure(
                    code: .notAuthenticated,
                    message: "\(server) refused the TLS connection (client certificate missing or not trusted): \(error)"
                )
            }
            if error.code == .certificateVerificationFailed {
                return .network("the certificate of \(server) did not verify: \(error)")
            }
            if error.code == .configuration {
                return .network("TLS configuration for \(server) is invalid: \(error)")
            }
            return .network("TLS with \(server) failed: \(error)")
        case let error as WireError:
            return .network("\(server) sent a bad frame: \(error)")
        case let error as IOError:
            return .network("cannot reach \(server): \(error)")
        case let error as ChannelError:
            if case .connectTimeout = error {
                return .network("connecting to \(server) timed out")
            }
            return .network("connection to \(server) failed: \(error)")
        default:
            return .network("connection to \(server) failed: \(error)")
        }
    }

    /// The failure a `ConnectionError` frame from the server reports.
    static func from(_ error: Wire.ConnectionError, server: String) -> ConnectionFailure {
        let code: Wire.ErrorCode
        switch error.code {
        case .notAuthenticated: code = .notAuthenticated
        case .incompatibleVersion, .unsupportedVersion: code = .incompatibleVersion
        default: code = .networkFailure
        }
        return ConnectionFailure(code: code, message: "\(server) closed the connection: \(error.code): \(error.message)")
    }
}
