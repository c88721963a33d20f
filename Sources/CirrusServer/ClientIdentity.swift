import CirrusTLS

/// Who is on the other end of a connection, as the server derived it.
public struct ClientIdentity: Sendable, Hashable {
    /// The CloudKit-style user record name, e.g. `_alice`.
    public var userRecordName: String
    /// Email addresses the client certificate vouches for (its subjectAltName); empty for a
    /// bearer token.
    public var verifiedEmails: [String]
    /// The ID of the directory bearer token the client authenticated with (see
    /// ``BearerToken``); nil for a certificate or a token of the `--tokens` file.
    public var tokenID: String?

    public init(userRecordName: String) {
        self.init(userRecordName: userRecordName, verifiedEmails: [])
    }

    public init(userRecordName: String, verifiedEmails: [String]) {
        self.userRecordName = userRecordName
        self.verifiedEmails = verifiedEmails
    }

    /// The identity a verified client certificate names: its subject common name, prefixed
    /// with `_` as CloudKit user record names are. `nil` when the certificate has no usable CN.
    public init?(certificate: TLSPeerCertificate) {
        guard let commonName = certificate.subjectCommonName, Self.isValidName(commonName) else {
            return nil
        }
        self.userRecordName = "_" + commonName
        self.verifiedEmails = certificate.emailAddresses
    }

    /// Names are 1…128 characters of letters, digits, `.`, `-`, `_`, `@`.
    static func isValidName(_ name: String) -> Bool {
        guard (1...128).contains(name.utf8.count) else { return false }
        return name.utf8.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."), UInt8(ascii: "-"),
                UInt8(ascii: "_"), UInt8(ascii: "@"):
                true
            default:
                false
            }
        }
    }
}
