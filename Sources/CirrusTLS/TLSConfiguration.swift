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
    /// The oldest protocol version accepted; TLS 1.2 only when asked for.
    public var minimumTLSVersion: TLSVersion
    /// The newest protocol version offered; nil for the newest supported.
    public var maximumTLSVersion: TLSVersion?
    /// ALPN protocols, most preferred first. Empty turns ALPN off.
    public var applicationProtocols: [String]
    /// Client only: check the server certificate names the host given to
    /// ``TLSHandler/init(context:serverHostname:)``.
    public var verifyHostname: Bool

    /// A configuration with every field spelled out.
    public init(
        role: Role,
        certificateChainPath: String? = nil,
        privateKeyPath: String? = nil,
        trustRootsPath: String? = nil,
        clientCertificateVerification: ClientCertificateVerification = .none,
        minimumTLSVersion: TLSVersion = .v1_3,
        maximumTLSVersion: TLSVersion? = nil,
        applicationProtocols: [String] = ["cirrus/1"],
        verifyHostname: Bool = true
    ) {
        self.role = role
        self.certificateChainPath = certificateChainPath
        self.privateKeyPath = privateKeyPath
        self.trustRootsPath = trustRootsPath
        self.clientCertificateVerification = clientCertificateVerification
        self.minimumTLSVersion = minimumTLSVersion
        self.maximumTLSVersion = maximumTLSVersion
        self.applicationProtocols = applicationProtocols
        self.verifyHostname = verifyHostname
    }

    /// A server presenting `certificateChainPath`, optionally checking client
    /// certificates against the CAs in `clientCATrustRootsPath`.
    ///
    /// For example: `.server(certificateChainPath: "Certs/server.pem", privateKeyPath: "Certs/server-key.pem")`.
    public static func server(
        certificateChainPath: String,
        privateKeyPath: String,
        clientCATrustRootsPath: String? = nil,
        clientCertificateVerification: ClientCertificateVerification = .none
    ) -> TLSConfiguration {
        TLSConfiguration(
            role: .server,
            certificateChainPath: certificateChainPath,
            privateKeyPath: privateKeyPath,
            trustRootsPath: clientCATrustRootsPath,
            clientCertificateVerification: clientCertificateVerification
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
