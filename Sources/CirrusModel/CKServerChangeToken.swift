import CirrusWire

/// An opaque marker of a point in a change feed (`CKServerChangeToken`). Store it and
/// hand it back; never look inside.
///
/// A value type here (Apple's is an `NSSecureCoding` class): `Codable` stands in for
/// archiving.
public struct CKServerChangeToken: Hashable, Sendable, Codable, CustomStringConvertible {
    /// The server's bytes.
    public let opaqueBytes: [UInt8]

    /// A token holding the given server bytes.
    public init(opaqueBytes: [UInt8]) {
        self.opaqueBytes = opaqueBytes
    }

    /// The token of a wire message.
    package init(wire: Wire.ServerChangeToken) {
        self.init(opaqueBytes: wire.opaque)
    }

    /// The token as a wire message.
    package var wireToken: Wire.ServerChangeToken {
        Wire.ServerChangeToken(opaque: opaqueBytes)
    }

    public var description: String { "<CKServerChangeToken: \(opaqueBytes.count) bytes>" }
}
