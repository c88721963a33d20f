import CirrusStore
import CirrusWire

/// Makes and checks the opaque `CKServerChangeToken`s of the change feeds.
///
/// A token holds a feed position (zone incarnation and change sequence, or a database change
/// sequence) and an HMAC-SHA-256 tag over that position *and* the feed it belongs to — the
/// container, database scope, owner and, for a zone token, the zone name. The feed itself is
/// not in the token, so a token reveals nothing about whose it is, and one presented for any
/// other zone or user, or altered in any bit, fails the tag and is refused.
///
/// Layout (42 bytes): version 1 · kind · incarnation (8, big-endian) · sequence (8) · floor (8) ·
/// tag (16). The floor is how far tombstones had been pruned when the client's fetch started from
/// the beginning (see `RecordStorage.recordChanges`): it keeps the positions of that fetch valid.
///
/// For example:
/// ```swift
/// let sealer = ChangeTokenSealer(secret: secret)
/// let token = sealer.seal(.zone("Notes"), in: database, incarnation: 7, seq: 42, floor: 0)
/// let position = try sealer.open(token, .zone("Notes"), in: database)  // (7, 42, 0)
/// ```
public struct ChangeTokenSealer: Sendable {
    /// Which feed a token is a position in.
    public enum Feed: Hashable, Sendable {
        /// The record feed of one zone (by its name inside the database).
        case zone(String)
        /// The zone feed of a whole database.
        case database
        /// A user's notification feed in a container (the database key names the container
        /// and the user, with scope UNSPECIFIED).
        case notifications
    }

    /// A position in a feed.
    public struct Position: Hashable, Sendable {
        /// The zone's incarnation (0 for a database token, or a zone never written to).
        public var incarnation: Int64
        public var seq: Int64
        /// Tombstones up to here were pruned before the client's first fetch.
        public var floor: Int64
    }

    /// Why a token was refused.
    public struct Refusal: Error, Hashable, Sendable {
        public var message: String
    }

    static let version: UInt8 = 1
    static let tagLength = 16
    static let length = 2 + 8 + 8 + 8 + tagLength
    static let secretLength = 32

    let key: [UInt8]

    /// A sealer keyed by `secret` (any length; hashed down when longer than a block).
    public init(secret: [UInt8]) {
        self.key = secret.count > 64 ? Wire.SHA256.hash(secret) : secret
    }

    /// A sealer with a fresh random key: its tokens stop working when the process ends.
    public static func ephemeral() -> ChangeTokenSealer {
        var generator = SystemRandomNumberGenerator()
        return ChangeTokenSealer(secret: (0..<secretLength).map { _ in generator.next() })
    }

    /// The token for `position` in `feed` of `database`.
    public func seal(
        _ feed: Feed, in database: DatabaseKey, incarnation: Int64, seq: Int64, floor: Int64
    ) -> Wire.ServerChangeToken {
        var bytes: [UInt8] = [Self.version, Self.kind(feed)]
        bytes.reserveCapacity(Self.length)
        Self.append(incarnation, to: &bytes)
        Self.append(seq, to: &bytes)
        Self.append(floor, to: &bytes)
        bytes += self.tag(bytes, feed, database)
        return Wire.ServerChangeToken(opaque: bytes)
    }

    /// The position a token names, when it was sealed by this server for exactly this feed.
    ///
    /// - throws: ``Refusal`` for a token of another length, version, kind, feed or user, or
    ///   with any byte changed.
    public func open(
        _ token: Wire.ServerChangeToken, _ feed: Feed, in database: DatabaseKey
    ) throws(Refusal) -> Position {
        let bytes = token.opaque
        let what = Self.describe(feed)
        guard bytes.count == Self.length, bytes[0] == Self.version, bytes[1] == Self.kind(feed) else {
            throw Refusal(message: "the change token is not a token of \(what)")
        }
        let body = Array(bytes[0..<(Self.length - Self.tagLength)])
        let expected = self.tag(body, feed, database)
        var difference: UInt8 = 0
        for (a, b) in zip(expected, bytes[(Self.length - Self.tagLength)...]) { difference |= a ^ b }
        guard difference == 0 else {
            throw Refusal(message: "the change token was not issued for \(what) of this user")
        }
        let incarnation = Self.int64(body, at: 2)
        let seq = Self.int64(body, at: 10)
        let floor = Self.int64(body, at: 18)
        guard incarnation >= 0, seq >= 0, floor >= 0 else {
            throw Refusal(message: "the change token is not a token of \(what)")
        }
        return Position(incarnation: incarnation, seq: seq, floor: floor)
    }

    private func tag(_ body: [UInt8], _ feed: Feed, _ database: DatabaseKey) -> [UInt8] {
        var message = Array("cirrus change token\u{0}".utf8)
        message += body
        for part in [database.container, String(database.scope.rawValue), database.owner] {
            message += Array(part.utf8) + [0]
        }
        if case .zone(let name) = feed { message += Array(name.utf8) }
        return Array(Wire.SHA256.hmac(key: self.key, message: message).prefix(Self.tagLength))
    }

    private static func kind(_ feed: Feed) -> UInt8 {
        switch feed {
        case .zone: 1
        case .database: 2
        case .notifications: 3
        }
    }

    private static func describe(_ feed: Feed) -> String {
        switch feed {
        case .zone(let name): "zone \(name)"
        case .database: "the database"
        case .notifications: "the notification feed"
        }
    }

    private static func append(_ value: Int64, to bytes: inout [UInt8]) {
        for shift in stride(from: 56, through: 0, by: -8) { bytes.append(UInt8(truncatingIfNeeded: value >> Int64(shift))) }
    }

    private static func int64(_ bytes: [UInt8], at offset: Int) -> Int64 {
        var value: UInt64 = 0
        for byte in bytes[offset..<(offset + 8)] { value = value << 8 | UInt64(byte) }
        return Int64(bitPattern: value)
    }
}
