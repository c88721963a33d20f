/// How a TLS endpoint is set up: a value that a ``TLSContext`` turns into an
/// OpenSSL context.
///
/// For example, a server that requires client certificates from the
/// development CA:
///
/// ```swift
/// let configuration = TLSConfiguration.server(
///     certificateChainPath: "Certs/server.pem",
///     privateKeyPath: "Certs/server-key.pem",
///     clientCATrustRootsPath: "Certs/ca.pem",
///     clientCertificateVerification: .required
/// )
/// let context = try TLSContext(configuration: configuration)
/// ```
public struct TLSConfiguration: Sendable {
    public typealias Role = TLSRole
    public typealias ClientCertificateVerification = CirrusTLS.ClientCertificateVerification
    public typealias TLSVersion = CirrusTLS.TLSVersion

    /// Server or client.
    public var role: Role
    /// PEM file with the leaf certificate first, then its intermediates.
    public var certificateChainPath: String?
    /// PEM file with the private key of the leaf certificate.
    public var privateKeyPath: String?
    /// PEM bundle of CA certificates. A client trusts servers these CAs
    /// signed (nil: the system's roots); a server accepts client certificates
    /// these CAs signed.
    public var trustRootsPath: String?
    /// Server only: whether a client certificate is requested or required.
    public var clientCertificateVerification: ClientCertificateVerification
    /// PEM file of certificate revocation lists, one per CA in
    /// `trustRootsPath`. When set, the peer's leaf certificate is checked
    /// against them and a revoked one is refused at the handshake; a peer
    /// whose CA has no CRL in the file, or whose CRL has expired, is refused
    /// as well.
    public var certificateRevocationListPath: String?
    /// The oldest protocol version accepted; TLS 1.2 only when asked for.
    public var minimumTLSVersion: TLSVersion
    /// The newest protocol version offered; nil for the newest supported.
    public var maximumTLSVersion: TLSVersion?
    /// ALPN protocols, most preferred first. Empty turns ALPN off. A server
    /// with ALPN on refuses a client that offers none of them, or no ALPN at
    /// all, with a `no_application_protocol` alert.
    public var applicationProtocols: [String]
    /// Client only: check the server certificate names the host given to
    /// ``TLSHandler/init(context:serverHostname:sessionCacheKey:)``.
    public var verifyHostname: Bool
    /// Key-exchange groups offered (client) or accepted (server), OpenSSL
    /// names, most preferred first. The default, ``modernGroups``, is what
    /// Mozilla's "modern" profile allows; change it only to test.
    public var keyExchangeGroups: [String]
    /// Cipher suites for TLS 1.2 (used only when `minimumTLSVersion` is
    /// `.v1_2`), OpenSSL names. The default, ``modernTLS12CipherSuites``, is
    /// ECDHE with AES-GCM or ChaCha20-Poly1305 only; change it only to test.
    public var tls12CipherSuites: [String]

    /// X25519, P-256 and P-384: the groups of Mozilla's "modern" profile.
    public static let modernGroups = ["X25519", "P-256", "P-384"]
    /// ECDHE key exchange with AEAD ciphers only (forward secrecy, no CBC).
    public static let modernTLS12CipherSuites = [
        "ECDHE-ECDSA-AES128-GCM-SHA256", "ECDHE-RSA-AES128-GCM-SHA256",
        "ECDHE-ECDSA-AES256-GCM-SHA384", "ECDHE-RSA-AES256-GCM-SHA384",
        "ECDHE-ECDSA-CHACHA20-POLY1305", "ECDHE-RSA-CHACHA20-POLY1305",
    ]

    /// A configuration with every field spelled out.
    public init(
        role: Role,
        certificateChainPath: String? = nil,
        privateKeyPath: String? = nil,
        trustRootsPath: String? = nil,
        clientCertificateVerification: ClientCertificateVerification = .none,
        certificateRevocationListPath: String? = nil,
        minimumTLSVersion: TLSVersion = .v1_3,
        maximumTLSVersion: TLSVersion? = nil,
        applicationProtocols: [String] = ["cirrus/1"],
        verifyHostname: Bool = true,
        keyExchangeGroups: [String] = TLSConfiguration.modernGroups,
        tls12CipherSuites: [String] = TLSConfiguration.modernTLS12CipherSuites
    ) {
        self.role = role
        self.certificateChainPath = certificateChainPath
        self.privateKeyPath = privateKeyPath
        self.trustRootsPath = trustRootsPath
        self.clientCertificateVerification = clientCertificateVerification
        self.certificateRevocationListPath = certificateRevocationListPath
        self.minimumTLSVersion = minimumTLSVersion
        self.maximumTLSVersion = maximumTLSVersion
        self.applicationProtocols = applicationProtocols
        self.verifyHostname = verifyHostname
        self.keyExchangeGroups = keyExchangeGroups
        self.tls12CipherSuites = tls12CipherSuites
    }

    /// A server presenting `certificateChainPath`, optionally checking client
    /// certificates against the CAs in `clientCATrustRootsPath` and the
    /// revocation lists in `clientCRLPath`.
    ///
    /// For example: `.server(certificateChainPath: "Certs/server.pem", privateKeyPath: "Certs/server-key.pem")`.
    public static func server(
        certificateChainPath: String,
        privateKeyPath: String,
        clientCATrustRootsPath: String? = nil,
        clientCertificateVerification: ClientCertificateVerification = .none,
        clientCRLPath: String? = nil
    ) -> TLSConfiguration {
        TLSConfiguration(
            role: .server,
            certificateChainPath: certificateChainPath,
            privateKeyPath: privateKeyPath,
            trustRootsPath: clientCATrustRootsPath,
            clientCertificateVerification: clientCertificateVerification,
            certificateRevocationListPath: clientCRLPath
        )
    }

    /// A client trusting the CAs in `trustRootsPath` (nil: the system's
    /// roots), presenting a client certificate when both paths are given.
    ///
    /// For example: `.client(trustRootsPath: "Certs/ca.pem", certificateChainPath: "Certs/alice.pem", privateKeyPath: "Certs/alice-key.pem")`.
    public static func client(
        trustRootsPath: String? = nil,
        certificateChainPath: String? = nil,
        privateKeyPath: String? = nil
    ) -> TLSConfiguration {
        TLSConfiguration(
            role: .client,
            certificateChainPath: certificateChainPath,
            privateKeyPath: privateKeyPath,
            trustRootsPath: trustRootsPath
        )
    }
}

/// Which side of the handshake an endpoint plays.
public enum TLSRole: Sendable, Hashable {
    case server
    case client
}

/// Whether a server asks for, and insists on, a client certificate.
public enum ClientCertificateVerification: Sendable, Hashable {
    /// No client certificate is requested.
    case none
    /// A client certificate is requested; if one is sent it must verify.
    case optional
    /// A client certificate is required and must verify.
    case required
}

/// A TLS protocol version.
public enum TLSVersion: Sendable, Hashable, Comparable {
    case v1_2
    case v1_3
}

extension TLSVersion: CustomStringConvertible {
    public var description: String {
        switch self {
        case .v1_2: "TLSv1.2"
        case .v1_3: "TLSv1.3"
        }
    }
}
