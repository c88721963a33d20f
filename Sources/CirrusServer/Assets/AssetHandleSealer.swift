import CirrusWire
import Foundation

/// Makes and checks the opaque asset handles: the upload handle a finished upload returns
/// (`UploadAssetResult.upload_handle`) and the download handle a record's asset carries
/// (`Asset.download_handle`).
///
/// A handle names content (SHA-256 and size) and when it expires, with an HMAC-SHA-256 tag over
/// those *and* the user it was issued to and its kind. The user is not in the handle: one
/// presented by another user, of the other kind, expired, or altered in any bit, is refused.
///
/// Layout: `u1.` or `d1.` then base64url of sha256 (32) · size (8, big-endian) · expiry
/// seconds (8) · tag (16).
///
/// For example:
/// ```swift
/// let sealer = AssetHandleSealer(secret: secret)
/// let handle = sealer.seal(.download, AssetHandleSealer.Claim(sha256: digest, size: 42, expires: now + 3600), for: "_alice")
/// let claim = try sealer.open(handle, .download, for: "_alice", now: now)
/// ```
public struct AssetHandleSealer: Sendable {
    /// What a handle lets its user do.
    public enum Kind: Sendable, Hashable {
        /// Save the uploaded content in a record.
        case upload
        /// Read the content.
        case download

        var prefix: String {
            switch self {
            case .upload: "u1."
            case .download: "d1."
            }
        }
    }

    /// What a handle names.
    public struct Claim: Sendable, Hashable {
        public var sha256: [UInt8]
        public var size: UInt64
        /// Seconds since the epoch after which the handle is refused.
        public var expires: Int64
    }

    private static let bodyLength = 32 + 8 + 8
    private static let tagLength = 16
    private let key: [UInt8]

    /// A sealer keyed by `secret` (the server secret; any length).
    public init(secret: [UInt8]) {
        self.key = Wire.SHA256.hmac(key: secret, message: Array("cirrus asset handles".utf8))
    }

    /// The handle of `kind` for `claim`, usable by `user` only.
    public func seal(_ kind: Kind, _ claim: Claim, for user: String) -> String {
        var bytes = claim.sha256
        Self.append(claim.size, to: &bytes)
        Self.append(UInt64(bitPattern: claim.expires), to: &bytes)
        bytes += self.tag(bytes, kind, user)
        return kind.prefix + Data(bytes).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
    }

    /// What `handle` names, when this server issued it to `user` as `kind` and it has not expired.
    ///
    /// - throws: ``AssetStoreError``: `permissionFailure` for a handle of another user, kind or
    ///   server, or damaged; `assetFileNotFound` for an expired one.
    public func open(_ handle: String, _ kind: Kind, for user: String, now: Int64) throws(AssetStoreError) -> Claim {
        let what = kind == .upload ? "upload handle" : "download handle"
        let refused = AssetStoreError(
            code: .permissionFailure, message: "the \(what) was not issued to this user by this server")
        guard handle.hasPrefix(kind.prefix), handle.count < 200 else { throw refused }
        let encoded = String(handle.dropFirst(kind.prefix.count))
            .replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        guard let data = Data(base64Encoded: encoded), data.count == Self.bodyLength + Self.tagLength else {
            throw refused
        }
        let bytes = [UInt8](data)
        let body = Array(bytes[..<Self.bodyLength])
        let expected = self.tag(body, kind, user)
        var difference: UInt8 = 0
        for (a, b) in zip(expected, bytes[Self.bodyLength...]) { difference |= a ^ b }
        guard difference == 0 else { throw refused }
        let claim = Claim(
            sha256: Array(body[0..<32]), size: Self.uint64(body, at: 32),
            expires: Int64(bitPattern: Self.uint64(body, at: 40)))
        guard claim.expires >= now else {
            throw AssetStoreError(code: .assetFileNotFound, message: "the \(what) expired; upload or fetch again")
        }
        return claim
    }

    private func tag(_ body: [UInt8], _ kind: Kind, _ user: String) -> [UInt8] {
        let message = Array(kind.prefix.utf8) + body + Array(user.utf8)
        return Array(Wire.SHA256.hmac(key: self.key, message: message).prefix(Self.tagLength))
    }

    private static func append(_ value: UInt64, to bytes: inout [UInt8]) {
        for shift in stride(from: 56, through: 0, by: -8) { bytes.append(UInt8(truncatingIfNeeded: value >> UInt64(shift))) }
    }

    private static func uint64(_ bytes: [UInt8], at offset: Int) -> UInt64 {
        var value: UInt64 = 0
        for byte in bytes[offset..<(offset + 8)] { value = value << 8 | UInt64(byte) }
        return value
    }
}
