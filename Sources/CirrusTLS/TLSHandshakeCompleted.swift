internal import COpenSSL

/// Fired as a user inbound event by ``TLSHandler`` when the handshake
/// completes, and kept in ``TLSHandler/handshakeResult``.
///
/// For example:
///
/// ```swift
/// func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
///     if let tls = event as? TLSHandshakeCompleted {
///         user = tls.peerCertificate?.subjectCommonName
///     }
///     context.fireUserInboundEventTriggered(event)
/// }
/// ```
public struct TLSHandshakeCompleted: Sendable, Hashable {
    /// The ALPN protocol both sides agreed on, e.g. "cirrus/1"; nil without ALPN.
    public var negotiatedProtocol: String?
    /// OpenSSL's name of the protocol version, e.g. "TLSv1.3".
    public var protocolVersion: String
    /// OpenSSL's name of the cipher suite, e.g. "TLS_AES_256_GCM_SHA384".
    public var cipherSuite: String
    /// The certificate the peer presented (on a server: the client's, if any).
    /// A resumed session's certificate is the one checked at the full
    /// handshake that made the session.
    public var peerCertificate: TLSPeerCertificate?
    /// Whether this handshake resumed an earlier session (a ticket) instead
    /// of exchanging and checking certificates.
    public var isResumed: Bool

    public init(
        negotiatedProtocol: String?,
        protocolVersion: String,
        cipherSuite: String,
        peerCertificate: TLSPeerCertificate?,
        isResumed: Bool = false
    ) {
        self.negotiatedProtocol = negotiatedProtocol
        self.protocolVersion = protocolVersion
        self.cipherSuite = cipherSuite
        self.peerCertificate = peerCertificate
        self.isResumed = isResumed
    }
}

/// The leaf certificate a peer presented.
public struct TLSPeerCertificate: Sendable, Hashable {
    /// The subject as one RFC 2253 line, e.g. "CN=alice" or "CN=localhost,O=Cirrus Development".
    public var subject: String
    /// The subject's common name, e.g. "alice".
    public var subjectCommonName: String?
    /// The certificate in DER.
    public var derBytes: [UInt8]
    /// The email addresses of its subjectAltName (`email:` entries), as the CA vouched for them.
    public var emailAddresses: [String]

    public init(subject: String, subjectCommonName: String?, derBytes: [UInt8], emailAddresses: [String] = []) {
        self.subject = subject
        self.subjectCommonName = subjectCommonName
        self.derBytes = derBytes
        self.emailAddresses = emailAddresses
    }
}

extension TLSPeerCertificate {
    /// Reads an OpenSSL `X509`; the caller keeps its reference.
    init(x509: OpaquePointer) {
        let name = X509_get_subject_name(x509)
        self.init(
            subject: name.map(Self.rfc2253) ?? "",
            subjectCommonName: name.flatMap(Self.commonName),
            derBytes: Self.der(x509),
            emailAddresses: Self.emailAddresses(x509)
        )
    }

    /// The rfc822Name entries of the subjectAltName extension; at most 32, each at most 254
    /// bytes of printable ASCII (others are skipped).
    private static func emailAddresses(_ x509: OpaquePointer) -> [String] {
        guard let names = cirrus_X509_subject_alt_names(x509) else {
            return []
        }
        defer { cirrus_GENERAL_NAMES_free(names) }
        var emails: [String] = []
        for index in 0..<min(cirrus_sk_GENERAL_NAME_num(names), 32) {
            guard let email = cirrus_GENERAL_NAME_email(names, index), let bytes = ASN1_STRING_get0_data(email) else {
                continue
            }
            let length = Int(ASN1_STRING_length(email))
            let buffer = UnsafeBufferPointer(start: bytes, count: max(length, 0))
            guard (1...254).contains(buffer.count), buffer.allSatisfy({ (0x21...0x7E).contains($0) }) else {
                continue
            }
            emails.append(String(decoding: buffer, as: UTF8.self))
        }
        return emails
    }

    private static func rfc2253(_ name: OpaquePointer) -> String {
        guard let bio = BIO_new(BIO_s_mem()) else {
            return ""
        }
        defer { BIO_free(bio) }
        guard X509_NAME_print_ex(bio, name, 0, cirrus_XN_FLAG_RFC2253) >= 0 else {
            return ""
        }
        let length = cirrus_BIO_pending(bio)
        var bytes = [UInt8](repeating: 0, count: length)
        let read = bytes.withUnsafeMutableBytes { BIO_read(bio, $0.baseAddress, Int32(clamping: length)) }
        return String(decoding: bytes.prefix(max(Int(read), 0)), as: UTF8.self)
    }

    private static func commonName(_ name: OpaquePointer) -> String? {
        let index = X509_NAME_get_index_by_NID(name, NID_commonName, -1)
        guard index >= 0,
            let entry = X509_NAME_get_entry(name, index),
            let data = X509_NAME_ENTRY_get_data(entry)
        else {
            return nil
        }
        var utf8: UnsafeMutablePointer<UInt8>?
        let length = ASN1_STRING_to_UTF8(&utf8, data)
        guard length >= 0, let utf8 else {
            return nil
        }
        defer { cirrus_OPENSSL_free(utf8) }
        return String(decoding: UnsafeBufferPointer(start: utf8, count: Int(length)), as: UTF8.self)
    }

    private static func der(_ x509: OpaquePointer) -> [UInt8] {
        let length = i2d_X509(x509, nil)
        guard length > 0 else {
            return []
        }
        var bytes = [UInt8](repeating: 0, count: Int(length))
        bytes.withUnsafeMutableBufferPointer { buffer in
            var cursor = buffer.baseAddress
            _ = i2d_X509(x509, &cursor)
        }
        return bytes
    }
}
