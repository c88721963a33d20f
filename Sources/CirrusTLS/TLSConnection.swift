internal import COpenSSL
import NIOCore

/// One OpenSSL `SSL` driven over two memory BIOs: ciphertext from the network
/// goes into `networkIn`, ciphertext for the network comes out of
/// `networkOut`. It never touches a socket and lives on one event loop.
final class TLSConnection {
    enum HandshakeResult {
        case complete
        case needsMoreData
        case failed(TLSError)
    }

    enum ReadResult {
        /// Some plaintext was appended to the buffer.
        case data
        /// OpenSSL needs more ciphertext before it has plaintext to give.
        case needsMoreData
        /// The peer sent close_notify.
        case closeNotify
        case failed(TLSError)
    }

    /// The largest plaintext of one TLS record.
    static let maximumRecordSize = 16_384
    /// A memory BIO that has grown past this while busy is replaced once it
    /// is empty, so a connection that once moved a lot is cheap when idle.
    private static let retainedBIOCapacity = 1_024

    let context: TLSContext
    /// Client only: where this connection's sessions are kept and taken from.
    private let sessionCacheKey: String?
    private let ssl: OpaquePointer
    private var networkIn: OpaquePointer
    private var networkOut: OpaquePointer

    /// - throws: ``TLSError`` `configuration` when the client cannot check
    ///   the host name it was given.
    init(context: TLSContext, serverHostname: String?, sessionCacheKey: String? = nil) throws {
        OpenSSLErrorQueue.clear()
        guard let ssl = SSL_new(context.sslContext) else {
            throw TLSError.configuration("SSL_new failed")
        }
        guard let networkIn = BIO_new(BIO_s_mem()) else {
            SSL_free(ssl)
            throw TLSError.configuration("BIO_new failed")
        }
        guard let networkOut = BIO_new(BIO_s_mem()) else {
            BIO_free(networkIn)
            SSL_free(ssl)
            throw TLSError.configuration("BIO_new failed")
        }
        // The SSL owns both BIOs from here on: SSL_free frees them.
        SSL_set_bio(ssl, networkIn, networkOut)
        self.context = context
        self.sessionCacheKey = context.configuration.role == .client ? sessionCacheKey : nil
        self.ssl = ssl
        self.networkIn = networkIn
        self.networkOut = networkOut

        switch context.configuration.role {
        case .server:
            SSL_set_accept_state(ssl)
        case .client:
            SSL_set_connect_state(ssl)
            try self.configureServerName(serverHostname, verify: context.configuration.verifyHostname)
            // The SSL never outlives self (deinit frees it), so the new-session
            // callback can reach self through an unretained pointer.
            SSL_set_ex_data(ssl, 0, Unmanaged.passUnretained(self).toOpaque())
            self.offerCachedSession()
        }
    }

    deinit {
        SSL_free(self.ssl)
    }

    private func configureServerName(_ hostname: String?, verify: Bool) throws {
        guard let hostname, !hostname.isEmpty else {
            if verify {
                throw TLSError(
                    code: .configuration,
                    message: "verifyHostname is on but no serverHostname was given to TLSHandler"
                )
            }
            return
        }
        let isIPAddress = (try? SocketAddress(ipAddress: hostname, port: 0)) != nil
        if !isIPAddress {
            // SNI carries host names only, never IP literals (RFC 6066 §3).
            guard cirrus_SSL_set_tlsext_host_name(self.ssl, hostname) == 1 else {
                throw TLSError.configuration("cannot send the server name '\(hostname)'")
            }
        }
        guard verify else {
            return
        }
        if isIPAddress {
            guard X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(self.ssl), hostname) == 1 else {
                throw TLSError.configuration("cannot verify the IP address '\(hostname)'")
            }
        } else {
            guard SSL_set1_host(self.ssl, hostname) == 1 else {
                throw TLSError.configuration("cannot verify the host name '\(hostname)'")
            }
        }
    }

    // MARK: Sessions

    /// Offers a session taken from the context's cache, if there is one. A
    /// session the server no longer accepts costs nothing: the handshake is
    /// then a full one.
    private func offerCachedSession() {
        guard let key = self.sessionCacheKey, let bytes = self.context.sessionCache?.take(for: key) else {
            return
        }
        bytes.withUnsafeBufferPointer { buffer in
            var cursor = buffer.baseAddress
            guard let session = d2i_SSL_SESSION(nil, &cursor, buffer.count) else {
                OpenSSLErrorQueue.clear()
                return
            }
            _ = SSL_set_session(self.ssl, session)
            SSL_SESSION_free(session)
        }
        OpenSSLErrorQueue.clear()
    }

    /// Called by OpenSSL (through the context's new-session callback) for
    /// each ticket the server sends; keeps a copy in the cache.
    func receivedSession(_ session: OpaquePointer) {
        guard let key = self.sessionCacheKey, let cache = self.context.sessionCache,
            SSL_SESSION_is_resumable(session) == 1
        else {
            return
        }
        let length = i2d_SSL_SESSION(session, nil)
        guard length > 0 else {
            return
        }
        var bytes = [UInt8](repeating: 0, count: Int(length))
        let written = bytes.withUnsafeMutableBufferPointer { buffer in
            var cursor = buffer.baseAddress
            return i2d_SSL_SESSION(session, &cursor)
        }
        if written == length {
            cache.store(bytes, for: key)
        }
    }

    // MARK: Moving ciphertext

    /// Hands ciphertext from the network to OpenSSL.
    func receiveFromNetwork(_ buffer: ByteBuffer) {
        buffer.withUnsafeReadableBytes { bytes in
            guard let base = bytes.baseAddress, bytes.count > 0 else {
                return
            }
            // A memory BIO takes everything it is given (it grows).
            var offset = 0
            while offset < bytes.count {
                let chunk = Int32(clamping: bytes.count - offset)
                let written = BIO_write(self.networkIn, base + offset, chunk)
                guard written > 0 else {
                    return
                }
                offset += Int(written)
            }
        }
    }

    /// Ciphertext OpenSSL has produced for the network and not yet handed out.
    var pendingNetworkBytes: Int {
        cirrus_BIO_pending(self.networkOut)
    }

    /// Ciphertext received and not yet decrypted, plus decrypted plaintext
    /// not yet read: an upper bound for the plaintext the next reads return.
    var pendingInboundBytes: Int {
        cirrus_BIO_pending(self.networkIn) + Int(SSL_pending(self.ssl))
    }

    /// Appends all ciphertext waiting for the network to `buffer`.
    func readNetworkOutput(into buffer: inout ByteBuffer) {
        let pending = self.pendingNetworkBytes
        guard pending > 0 else {
            return
        }
        buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: pending) { bytes in
            guard let base = bytes.baseAddress else {
                return 0
            }
            let read = BIO_read(self.networkOut, base, Int32(clamping: pending))
            return max(Int(read), 0)
        }
    }

    /// Replaces an empty memory BIO that has grown large: a memory BIO never
    /// gives back what it once allocated. Call after each burst.
    func releaseIdleBIOs() {
        if cirrus_BIO_pending(self.networkOut) == 0,
            cirrus_BIO_mem_capacity(self.networkOut) > Self.retainedBIOCapacity,
            let fresh = BIO_new(BIO_s_mem())
        {
            SSL_set0_wbio(self.ssl, fresh)  // frees the old one
            self.networkOut = fresh
        }
        if cirrus_BIO_pending(self.networkIn) == 0,
            cirrus_BIO_mem_capacity(self.networkIn) > Self.retainedBIOCapacity,
            let fresh = BIO_new(BIO_s_mem())
        {
            SSL_set0_rbio(self.ssl, fresh)  // frees the old one
            self.networkIn = fresh
        }
    }

    // MARK: Handshake

    func handshake() -> HandshakeResult {
        OpenSSLErrorQueue.clear()
        let result = SSL_do_handshake(self.ssl)
        if result == 1 {
            return .complete
        }
        switch SSL_get_error(self.ssl, result) {
        case SSL_ERROR_WANT_READ, SSL_ERROR_WANT_WRITE:
            return .needsMoreData
        default:
            return .failed(self.handshakeError())
        }
    }

    private func handshakeError() -> TLSError {
        let queue = OpenSSLErrorQueue.drain()
        let verifyResult = SSL_get_verify_result(self.ssl)
        if verifyResult != X509_V_OK {
            let reason = String(cString: X509_verify_cert_error_string(verifyResult))
            return TLSError(
                code: .certificateVerificationFailed,
                message: "the peer's certificate did not verify: \(reason)",
                verifyResult: reason,
                openSSLErrors: queue.messages
            )
        }
        if queue.containsSSLReason(cirrus_SSL_R_NO_APPLICATION_PROTOCOL)
            || queue.containsSSLReason(cirrus_SSL_R_TLSV1_ALERT_NO_APPLICATION_PROTOCOL)
        {
            let offered = self.context.configuration.applicationProtocols
            return TLSError(
                code: .noApplicationProtocol,
                message: "no application protocol (ALPN) in common; this side offers \(offered)",
                openSSLErrors: queue.messages
            )
        }
        let detail = queue.messages.last.map { ": \(Self.reason(of: $0))" } ?? ""
        return TLSError(code: .handshakeFailed, message: "TLS handshake failed\(detail)", openSSLErrors: queue.messages)
    }

    /// The reason text at the end of an `ERR_error_string_n` line
    /// ("error:0A000086:SSL routines::certificate verify failed").
    private static func reason(of line: String) -> String {
        line.split(separator: ":", omittingEmptySubsequences: false).last.map(String.init) ?? line
    }

    /// What the handshake settled, read once it is complete.
    func handshakeCompleted() -> TLSHandshakeCompleted {
        var negotiatedProtocol: String?
        var alpnBytes: UnsafePointer<UInt8>?
        var alpnLength: UInt32 = 0
        SSL_get0_alpn_selected(self.ssl, &alpnBytes, &alpnLength)
        if let alpnBytes, alpnLength > 0 {
            negotiatedProtocol = String(decoding: UnsafeBufferPointer(start: alpnBytes, count: Int(alpnLength)), as: UTF8.self)
        }
        let version = SSL_get_version(self.ssl).map { String(cString: $0) } ?? "unknown"
        let cipher = SSL_get_current_cipher(self.ssl).flatMap { SSL_CIPHER_get_name($0) }.map { String(cString: $0) }
        var peerCertificate: TLSPeerCertificate?
        if let certificate = SSL_get1_peer_certificate(self.ssl) {
            peerCertificate = TLSPeerCertificate(x509: certificate)
            X509_free(certificate)
        }
        return TLSHandshakeCompleted(
            negotiatedProtocol: negotiatedProtocol,
            protocolVersion: version,
            cipherSuite: cipher ?? "unknown",
            peerCertificate: peerCertificate,
            isResumed: SSL_session_reused(self.ssl) == 1
        )
    }

    // MARK: Application data

    /// Decrypts into `buffer`'s writable bytes, growing it when it is full.
    func read(into buffer: inout ByteBuffer) -> ReadResult {
        OpenSSLErrorQueue.clear()
        if buffer.writableBytes == 0 {
            buffer.reserveCapacity(minimumWritableBytes: max(self.pendingInboundBytes, 1_024))
        }
        var result: Int32 = 0
        buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: 0) { bytes in
            guard let base = bytes.baseAddress else {
                return 0
            }
            result = SSL_read(self.ssl, base, Int32(clamping: bytes.count))
            return max(Int(result), 0)
        }
        if result > 0 {
            return .data
        }
        switch SSL_get_error(self.ssl, result) {
        case SSL_ERROR_WANT_READ, SSL_ERROR_WANT_WRITE:
            return .needsMoreData
        case SSL_ERROR_ZERO_RETURN:
            return .closeNotify
        default:
            let queue = OpenSSLErrorQueue.drain()
            if queue.containsPeerAlert {
                let detail = queue.messages.last.map { ": \(Self.reason(of: $0))" } ?? ""
                return .failed(TLSError(code: .alertReceived, message: "the peer sent a fatal alert\(detail)", openSSLErrors: queue.messages))
            }
            return .failed(TLSError(code: .ioFailure, message: "SSL_read failed", openSSLErrors: queue.messages))
        }
    }

    /// Encrypts all of `bytes` into TLS records (up to 16 KiB of plaintext each).
    func write(_ bytes: UnsafeRawBufferPointer) -> TLSError? {
        guard let base = bytes.baseAddress else {
            return nil
        }
        OpenSSLErrorQueue.clear()
        var offset = 0
        while offset < bytes.count {
            let chunk = min(bytes.count - offset, Self.maximumRecordSize)
            let written = SSL_write(self.ssl, base + offset, Int32(chunk))
            guard written > 0 else {
                // A memory BIO always accepts output, so any failure is final.
                let queue = OpenSSLErrorQueue.drain()
                return TLSError(code: .ioFailure, message: "SSL_write failed", openSSLErrors: queue.messages)
            }
            offset += Int(written)
        }
        return nil
    }

    /// Queues a close_notify for the peer.
    func shutdown() {
        OpenSSLErrorQueue.clear()
        _ = SSL_shutdown(self.ssl)
        OpenSSLErrorQueue.clear()
    }
}
