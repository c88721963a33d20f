import CirrusStore
import CirrusWire

extension ChangeTokenSealer {
    /// One zone of a shared database as a database change token remembers it: whose zone, its
    /// incarnation and its change sequence when the token was made.
    struct SharedZoneVersion: Hashable, Sendable {
        var owner: String
        var zoneName: String
        var incarnation: Int64
        var seq: Int64
    }

    static let sharedVersion: UInt8 = 0x53

    /// The database change token of a shared database: the zones it held and their versions,
    /// sealed for `database` (the caller's shared database).
    func sealShared(_ zones: [SharedZoneVersion], in database: DatabaseKey) -> Wire.ServerChangeToken {
        var body: [UInt8] = [Self.sharedVersion]
        for zone in zones {
            body += Array(zone.owner.utf8) + [0] + Array(zone.zoneName.utf8) + [0]
            Self.appendShared(zone.incarnation, to: &body)
            Self.appendShared(zone.seq, to: &body)
        }
        return Wire.ServerChangeToken(opaque: body + self.sharedTag(body, database))
    }

    /// The zones a shared database's change token remembers, when this server sealed it for
    /// exactly `database`.
    ///
    /// - throws: ``Refusal`` for a token of anything else, or with any byte changed.
    func openShared(_ token: Wire.ServerChangeToken, in database: DatabaseKey) throws(Refusal) -> [SharedZoneVersion] {
        let bytes = token.opaque
        guard bytes.count > Self.tagLength, bytes[0] == Self.sharedVersion else {
            throw Refusal(message: "the change token is not a token of the shared database")
        }
        let body = Array(bytes[..<(bytes.count - Self.tagLength)])
        var difference: UInt8 = 0
        for (a, b) in zip(self.sharedTag(body, database), bytes[(bytes.count - Self.tagLength)...]) { difference |= a ^ b }
        guard difference == 0 else {
            throw Refusal(message: "the change token was not issued for the shared database of this user")
        }
        var zones: [SharedZoneVersion] = []
        var index = 1
        func string() -> String? {
            guard let end = body[index...].firstIndex(of: 0) else { return nil }
            defer { index = end + 1 }
            return String(decoding: body[index..<end], as: UTF8.self)
        }
        func int64() -> Int64? {
            guard index + 8 <= body.count else { return nil }
            defer { index += 8 }
            return body[index..<(index + 8)].reduce(0) { ($0 << 8) | Int64($1) }
        }
        while index < body.count {
            guard let owner = string(), let zoneName = string(), let incarnation = int64(), let seq = int64() else {
                throw Refusal(message: "the change token is not a token of the shared database")
            }
            zones.append(SharedZoneVersion(owner: owner, zoneName: zoneName, incarnation: incarnation, seq: seq))
        }
        return zones
    }

    private func sharedTag(_ body: [UInt8], _ database: DatabaseKey) -> [UInt8] {
        var message = Array("cirrus shared database token\u{0}".utf8) + body
        for part in [database.container, String(database.scope.rawValue), database.owner] {
            message += Array(part.utf8) + [0]
        }
        return Array(Wire.SHA256.hmac(key: self.key, message: message).prefix(Self.tagLength))
    }

    private static func appendShared(_ value: Int64, to bytes: inout [UInt8]) {
        for shift in stride(from: 56, through: 0, by: -8) { bytes.append(UInt8(truncatingIfNeeded: value >> Int64(shift))) }
    }
}
