internal import COpenSSL

/// The runtime form of a ``TLSConfiguration``: an OpenSSL `SSL_CTX` with the
/// certificates, keys and CAs loaded. Make one per configuration and share it
/// between all connections.
///
/// For example:
///
/// ```swift
/// let context = try TLSContext(configuration: .client(trustRootsPath: "Certs/ca.pem"))
/// channel.pipeline.syncOperations.addHandler(TLSHandler(context: context, serverHostname: "localhost"))
/// ```
///
/// A server context issues TLS 1.3 session tickets and resumes them; a client
/// context keeps the tickets it receives in its ``sessionCache``. Only the
/// groups X25519, P-256 and P-384 and, for TLS 1.2, ECDHE with AES-GCM or
/// ChaCha20-Poly1305 are negotiated.
///
/// `@unchecked Sendable` is safe: the `SSL_CTX` is only changed inside `init`
/// and is read-only afterwards; the session cache is locked; OpenSSL's reference counting and its internal
/// session and ticket state are guarded by OpenSSL's own locks; the ALPN list
/// is immutable once written and freed only in `deinit`.
public final class TLSContext: @unchecked Sendable {
    /// The configuration this context was made from.
    public let configuration: TLSConfiguration

    /// Client only: the sessions servers gave this context, offered again by
    /// handlers made with a `sessionCacheKey`; nil on a server.
    public let sessionCache: TLSSessionCache?

    let sslContext: OpaquePointer
    private let alpnProtocols: UnsafeMutablePointer<cirrus_alpn_protocols>?

    /// Creates the OpenSSL context and loads every file up front.
    ///
    /// - parameter sessionCache: client only: where sessions are kept; nil
    ///   gives the context a cache of its own. Contexts may share one when
    ///   their handlers' keys tell their identities and trust apart.
    /// - throws: ``TLSError`` with code ``TLSError/Code/configuration`` naming
    ///   the file and carrying OpenSSL's error queue when a certificate, key or
    ///   CA file is missing, unreadable or does not match, or a setting is invalid.
    public init(configuration: TLSConfiguration, sessionCache: TLSSessionCache? = nil) throws {
        cirrus_openssl_prepare()
        OpenSSLErrorQueue.clear()
        self.configuration = configuration
        self.sessionCache = configuration.role == .client ? sessionCache ?? TLSSessionCache() : nil
        let method = configuration.role == .server ? TLS_server_method() : TLS_client_method()
        guard let sslContext = SSL_CTX_new(method) else {
            throw TLSError.configuration("SSL_CTX_new failed")
        }
        self.sslContext = sslContext

        do {
            try Self.setProtocolVersions(sslContext, configuration)
            _ = cirrus_SSL_CTX_set_options(sslContext, cirrus_SSL_OP_NO_COMPRESSION | cirrus_SSL_OP_NO_RENEGOTIATION)
            // Idle connections give their record buffers back to the allocator.
            // The chain sent is the chain file, as written: without NO_AUTO_CHAIN
            // OpenSSL would complete it from the CAs loaded to check peers.
            _ = cirrus_SSL_CTX_set_mode(sslContext, cirrus_SSL_MODE_RELEASE_BUFFERS | cirrus_SSL_MODE_NO_AUTO_CHAIN)
            try Self.setAlgorithms(sslContext, configuration)
            try Self.configureSessions(sslContext, configuration)
            try Self.loadIdentity(sslContext, configuration)
            try Self.loadTrust(sslContext, configuration)
            try Self.loadRevocationLists(sslContext, configuration)
        } catch {
            SSL_CTX_free(sslContext)
            throw error
        }

        var alpnProtocols: UnsafeMutablePointer<cirrus_alpn_protocols>? = nil
        if !configuration.applicationProtocols.isEmpty {
            let wire: [UInt8]
            do {
                wire = try Self.alpnWireFormat(configuration.applicationProtocols)
            } catch {
                SSL_CTX_free(sslContext)
                throw error
            }
            switch configuration.role {
            case .client:
                // SSL_CTX_set_alpn_protos returns 0 on success.
                if SSL_CTX_set_alpn_protos(sslContext, wire, UInt32(wire.count)) != 0 {
                    SSL_CTX_free(sslContext)
                    throw TLSError.configuration("cannot set the ALPN protocols \(configuration.applicationProtocols)")
                }
            case .server:
                let bytes = UnsafeMutablePointer<UInt8>.allocate(capacity: wire.count)
                bytes.initialize(from: wire, count: wire.count)
                let protocols = UnsafeMutablePointer<cirrus_alpn_protocols>.allocate(capacity: 1)
                protocols.initialize(to: cirrus_alpn_protocols(length: UInt32(wire.count), bytes: bytes))
                alpnProtocols = protocols
                cirrus_SSL_CTX_set_alpn_select(sslContext, protocols)
                cirrus_SSL_CTX_require_alpn(sslContext)
            }
        }
        self.alpnProtocols = alpnProtocols
    }

    deinit {
        SSL_CTX_free(self.sslContext)
        if let protocols = self.alpnProtocols {
            UnsafeMutablePointer(mutating: protocols.pointee.bytes)?.deallocate()
            protocols.deallocate()
        }
    }

    private static func setProtocolVersions(_ sslContext: OpaquePointer, _ configuration: TLSConfiguration) throws {
        if let maximum = configuration.maximumTLSVersion, maximum < configuration.minimumTLSVersion {
            throw TLSError(
                code: .configuration,
                message: "maximumTLSVersion \(maximum) is below minimumTLSVersion \(configuration.minimumTLSVersion)"
            )
        }
        guard cirrus_SSL_CTX_set_min_proto_version(sslContext, configuration.minimumTLSVersion.openSSLVersion) == 1 else {
            throw TLSError.configuration("cannot set the minimum TLS version \(configuration.minimumTLSVersion)")
        }
        if let maximum = configuration.maximumTLSVersion {
            guard cirrus_SSL_CTX_set_max_proto_version(sslContext, maximum.openSSLVersion) == 1 else {
                throw TLSError.configuration("cannot set the maximum TLS version \(maximum)")
            }
        }
    }

    private static func loadIdentity(_ sslContext: OpaquePointer, _ configuration: TLSConfiguration) throws {
        switch (configuration.certificateChainPath, configuration.privateKeyPath) {
        case (nil, nil):
            if configuration.role == .server {
                throw TLSError(code: .configuration, message: "a server needs certificateChainPath and privateKeyPath")
            }
        case (let chain?, nil):
            throw TLSError(code: .configuration, message: "certificate chain '\(chain)' is given without privateKeyPath")
        case (nil, let key?):
            throw TLSError(code: .configuration, message: "private key '\(key)' is given without certificateChainPath")
        case (let chain?, let key?):
            guard SSL_CTX_use_certificate_chain_file(sslContext, chain) == 1 else {
                throw TLSError.configuration("cannot load the certificate chain '\(chain)'")
            }
            guard SSL_CTX_use_PrivateKey_file(sslContext, key, SSL_FILETYPE_PEM) == 1 else {
                throw TLSError.configuration("cannot load the private key '\(key)' (for certificate chain '\(chain)')")
            }
            guard SSL_CTX_check_private_key(sslContext) == 1 else {
                throw TLSError.configuration("the private key '\(key)' does not match the certificate chain '\(chain)'")
            }
        }
    }

    private static func loadTrust(_ sslContext: OpaquePointer, _ configuration: TLSConfiguration) throws {
        switch configuration.role {
        case .client:
            if let roots = configuration.trustRootsPath {
                guard SSL_CTX_load_verify_locations(sslContext, roots, nil) == 1 else {
                    throw TLSError.configuration("cannot load the trust roots '\(roots)'")
                }
            } else {
                guard SSL_CTX_set_default_verify_paths(sslContext) == 1 else {
                    throw TLSError.configuration("cannot load the system's trust roots")
                }
            }
            SSL_CTX_set_verify(sslContext, SSL_VERIFY_PEER, nil)

        case .server:
            let verification = configuration.clientCertificateVerification
            if verification == .none {
                SSL_CTX_set_verify(sslContext, SSL_VERIFY_NONE, nil)
                return
            }
            guard let roots = configuration.trustRootsPath else {
                throw TLSError(
                    code: .configuration,
                    message: "clientCertificateVerification \(verification) needs the client CAs (clientCATrustRootsPath)"
                )
            }
            guard SSL_CTX_load_verify_locations(sslContext, roots, nil) == 1 else {
                throw TLSError.configuration("cannot load the client CAs '\(roots)'")
            }
            // Tells clients which CAs' certificates the server accepts.
            guard let names = SSL_load_client_CA_file(roots) else {
                throw TLSError.configuration("cannot read CA names from '\(roots)'")
            }
            SSL_CTX_set_client_CA_list(sslContext, names)
            let mode = verification == .required ? SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT : SSL_VERIFY_PEER
            SSL_CTX_set_verify(sslContext, mode, nil)
        }
    }

    private static func alpnWireFormat(_ protocols: [String]) throws -> [UInt8] {
        var wire: [UInt8] = []
        for name in protocols {
            let bytes = Array(name.utf8)
            guard (1...255).contains(bytes.count) else {
                throw TLSError(code: .configuration, message: "ALPN protocol '\(name)' must be 1 to 255 bytes long")
            }
            wire.append(UInt8(bytes.count))
            wire.append(contentsOf: bytes)
        }
        return wire
    }
}

extension TLSVersion {
    var openSSLVersion: Int32 {
        switch self {
        case .v1_2: TLS1_2_VERSION
        case .v1_3: TLS1_3_VERSION
        }
    }
}
