internal import COpenSSL

/// Everything that goes wrong in CirrusTLS: a ``Code`` to switch on, a
/// message for people, and OpenSSL's whole error queue.
///
/// For example:
///
/// ```swift
/// func errorCaught(context: ChannelHandlerContext, error: Error) {
///     if let error = error as? TLSError, error.code == .certificateVerificationFailed {
///         logger.warning("peer refused: \(error)")
///     }
/// }
/// ```
public struct TLSError: Error, CustomStringConvertible, Sendable {
    /// What kind of failure this is. New codes may be added.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: String, Hashable, Sendable {
            case configuration
            case handshakeFailed
            case certificateVerificationFailed
            case noApplicationProtocol
            case alertReceived
            case unexpectedEOF
            case ioFailure
        }

        private let base: Base

        private init(_ base: Base) {
            self.base = base
        }

        /// A certificate, key or CA file is missing, unreadable or does not
        /// match, or a setting is invalid.
        public static let configuration = Code(.configuration)
        /// The handshake failed (protocol version, cipher, the peer's alert…).
        public static let handshakeFailed = Code(.handshakeFailed)
        /// The peer's certificate did not verify here; ``TLSError/verifyResult``
        /// holds OpenSSL's reason, such as "hostname mismatch".
        public static let certificateVerificationFailed = Code(.certificateVerificationFailed)
        /// The client offered ALPN and no protocol was in common.
        public static let noApplicationProtocol = Code(.noApplicationProtocol)
        /// The peer sent a fatal alert after the handshake (with TLS 1.3 a
        /// client learns this way that the server refused its certificate).
        public static let alertReceived = Code(.alertReceived)
        /// The connection closed without a close_notify.
        public static let unexpectedEOF = Code(.unexpectedEOF)
        /// OpenSSL failed reading or writing application data.
        public static let ioFailure = Code(.ioFailure)

        public var description: String {
            self.base.rawValue
        }
    }

    /// What kind of failure this is.
    public var code: Code
    /// What happened, for people.
    public var message: String
    /// OpenSSL's certificate verification result, e.g. "unable to get local
    /// issuer certificate", when a certificate did not verify here.
    public var verifyResult: String?
    /// OpenSSL's error queue, oldest first, one `ERR_error_string_n` line each.
    public var openSSLErrors: [String]

    public init(code: Code, message: String, verifyResult: String? = nil, openSSLErrors: [String] = []) {
        self.code = code
        self.message = message
        self.verifyResult = verifyResult
        self.openSSLErrors = openSSLErrors
    }

    public var description: String {
        var text = "TLSError.\(self.code): \(self.message)"
        if let verifyResult = self.verifyResult, !self.message.contains(verifyResult) {
            text += " (certificate verification: \(verifyResult))"
        }
        if !self.openSSLErrors.isEmpty {
            text += " [OpenSSL: \(self.openSSLErrors.joined(separator: "; "))]"
        }
        return text
    }
}

extension TLSError {
    /// A `configuration` error carrying, and clearing, OpenSSL's error queue.
    static func configuration(_ message: String) -> TLSError {
        TLSError(code: .configuration, message: message, openSSLErrors: OpenSSLErrorQueue.drain().messages)
    }
}

/// OpenSSL's thread-local error queue. It must be drained on the thread that
/// made the failing call, right after it, and cleared before each call so an
/// old error is never blamed on a new connection.
struct OpenSSLErrorQueue {
    var codes: [UInt]
    var messages: [String]

    /// Takes every error off the queue, oldest first.
    static func drain() -> OpenSSLErrorQueue {
        var queue = OpenSSLErrorQueue(codes: [], messages: [])
        while true {
            let code = ERR_get_error()
            if code == 0 {
                break
            }
            queue.codes.append(code)
            queue.messages.append(Self.string(code))
        }
        return queue
    }

    static func clear() {
        ERR_clear_error()
    }

    /// Whether an error of the SSL library has `reason`.
    func containsSSLReason(_ reason: Int32) -> Bool {
        self.codes.contains { code in
            cirrus_ERR_GET_LIB(code) == cirrus_ERR_LIB_SSL && cirrus_ERR_GET_REASON(code) == reason
        }
    }

    /// Whether the peer sent a fatal alert (OpenSSL reports those as SSL
    /// reasons from `SSL_AD_REASON_OFFSET` up).
    var containsPeerAlert: Bool {
        self.codes.contains { code in
            cirrus_ERR_GET_LIB(code) == cirrus_ERR_LIB_SSL && cirrus_ERR_GET_REASON(code) >= cirrus_SSL_AD_REASON_OFFSET
        }
    }

    private static func string(_ code: UInt) -> String {
        // ERR_error_string_n always NUL-terminates within the length it is given.
        withUnsafeTemporaryAllocation(of: CChar.self, capacity: 256) { storage in
            guard let base = storage.baseAddress else {
                return "error \(code)"
            }
            ERR_error_string_n(code, base, storage.count)
            return String(cString: base)
        }
    }
}
