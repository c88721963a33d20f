import CirrusWire

/// A bearer token of the user directory: `cirrus_` + a 16-hex-digit ID + `_` + 64 hex digits of
/// secret (32 random bytes). The directory keeps the ID and the SHA-256 of the whole token;
/// the token itself is shown once, when it is issued.
///
/// For example:
/// ```swift
/// let issued = BearerToken.generate()
/// print(issued.token)   // cirrus_3f2a9c…_8e1d…
/// ```
public struct BearerToken: Sendable, Hashable {
    public static let prefix = "cirrus_"

    /// The token a client presents in `Hello`.
    public let token: String
    /// Its public part.
    public let id: String
    /// SHA-256 of ``token``.
    public let hash: [UInt8]

    /// A new token from the system's random number generator.
    public static func generate() -> BearerToken {
        var generator = SystemRandomNumberGenerator()
        let id = hex((0..<8).map { _ in generator.next() })
        let secret = hex((0..<32).map { _ in generator.next() })
        let token = prefix + id + "_" + secret
        return BearerToken(token: token, id: id, hash: Wire.SHA256.hash(Array(token.utf8)))
    }

    /// The ID of `token` when it has the form of a directory token, else nil.
    public static func id(of token: String) -> String? {
        let bytes = Array(token.utf8)
        let prefixBytes = Array(prefix.utf8)
        guard bytes.count == prefixBytes.count + 16 + 1 + 64, bytes.starts(with: prefixBytes),
            bytes[prefixBytes.count + 16] == UInt8(ascii: "_")
        else { return nil }
        let id = bytes[prefixBytes.count..<prefixBytes.count + 16]
        let secret = bytes[(prefixBytes.count + 17)...]
        guard id.allSatisfy(isHexDigit), secret.allSatisfy(isHexDigit) else { return nil }
        return String(decoding: id, as: UTF8.self)
    }

    /// Whether `token` hashes to `hash`, comparing every byte whatever differs first.
    public static func matches(_ token: String, hash: [UInt8]) -> Bool {
        let digest = Wire.SHA256.hash(Array(token.utf8))
        guard digest.count == hash.count else { return false }
        var difference: UInt8 = 0
        for (a, b) in zip(digest, hash) { difference |= a ^ b }
        return difference == 0
    }

    private static func isHexDigit(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(byte)
    }

    private static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}
