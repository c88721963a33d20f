internal import COpenSSL

/// Algorithms, session resumption and revocation: what makes a context meet
/// Mozilla's "modern" profile and resume cheaply.
extension TLSContext {
    /// TLS 1.3's AEAD suites (OpenSSL's default, spelled out so a changed
    /// system default cannot widen them).
    static let tls13CipherSuites = "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256"

    /// Binds a server's sessions to Cirrus: OpenSSL refuses to resume a
    /// session that checked a client certificate unless this is set.
    private static let sessionIDContext = Array("cirrus".utf8)

    static func setAlgorithms(_ sslContext: OpaquePointer, _ configuration: TLSConfiguration) throws {
        let groups = configuration.keyExchangeGroups.joined(separator: ":")
        guard !groups.isEmpty, cirrus_SSL_CTX_set1_groups_list(sslContext, groups) == 1 else {
            throw TLSError.configuration("cannot set the key-exchange groups \(configuration.keyExchangeGroups)")
        }
        guard SSL_CTX_set_ciphersuites(sslContext, Self.tls13CipherSuites) == 1 else {
            throw TLSError.configuration("cannot set the TLS 1.3 cipher suites")
        }
        let suites = configuration.tls12CipherSuites.joined(separator: ":")
        guard !suites.isEmpty, SSL_CTX_set_cipher_list(sslContext, suites) == 1 else {
            throw TLSError.configuration("cannot set the TLS 1.2 cipher suites \(configuration.tls12CipherSuites)")
        }
    }

    /// A server issues session tickets (stateless: no cache, keys that live
    /// and die with this context) and resumes them; a client hands each
    /// ticket it receives to its ``TLSSessionCache``.
    static func configureSessions(_ sslContext: OpaquePointer, _ configuration: TLSConfiguration) throws {
        switch configuration.role {
        case .server:
            // Resumption uses tickets, which need no server-side cache; without
            // this a TLS 1.2 server would keep up to 20,480 sessions in memory.
            _ = cirrus_SSL_CTX_set_session_cache_mode(sslContext, cirrus_SSL_SESS_CACHE_OFF)
            let set = Self.sessionIDContext.withUnsafeBufferPointer { bytes in
                SSL_CTX_set_session_id_context(sslContext, bytes.baseAddress, UInt32(bytes.count))
            }
            guard set == 1 else {
                throw TLSError.configuration("cannot set the session ID context")
            }
        case .client:
            // OpenSSL calls back for each ticket; the cache lives in Swift.
            _ = cirrus_SSL_CTX_set_session_cache_mode(
                sslContext,
                cirrus_SSL_SESS_CACHE_CLIENT | cirrus_SSL_SESS_CACHE_NO_INTERNAL_STORE
            )
            SSL_CTX_sess_set_new_cb(sslContext) { ssl, session in
                guard let ssl, let session, let connection = SSL_get_ex_data(ssl, 0) else {
                    return 0
                }
                Unmanaged<TLSConnection>.fromOpaque(connection).takeUnretainedValue().receivedSession(session)
                return 0  // OpenSSL keeps its reference; the cache holds a copy.
            }
        }
    }

    /// Loads `certificateRevocationListPath` and checks the peer's leaf
    /// certificate against it.
    static func loadRevocationLists(_ sslContext: OpaquePointer, _ configuration: TLSConfiguration) throws {
        guard let path = configuration.certificateRevocationListPath else {
            return
        }
        if configuration.role == .server, configuration.clientCertificateVerification == .none {
            throw TLSError(
                code: .configuration,
                message: "the revocation list '\(path)' needs client certificate verification (optional or required)"
            )
        }
        guard let store = SSL_CTX_get_cert_store(sslContext),
            let lookup = X509_STORE_add_lookup(store, X509_LOOKUP_file())
        else {
            throw TLSError.configuration("cannot set up revocation checking")
        }
        guard X509_load_crl_file(lookup, path, SSL_FILETYPE_PEM) > 0 else {
            throw TLSError.configuration("cannot load the certificate revocation list '\(path)' (PEM CRLs expected)")
        }
        guard X509_STORE_set_flags(store, cirrus_X509_V_FLAG_CRL_CHECK) == 1 else {
            throw TLSError.configuration("cannot turn on revocation checking")
        }
    }
}
