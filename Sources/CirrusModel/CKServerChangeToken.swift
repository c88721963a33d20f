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
    public init(wire: Wire.ServerChangeToken) {
        self.init(opaqueBytes: wire.opaque)
    }

    /// The token as a wire message.
    public var wireToken: Wire.ServerChangeToken {
        Wire.ServerChangeToken(opaque: opaqueBytes)
    }

    public var description: String { "<CKServerChangeToken: \(opaqueBytes.count) bytes>" }
}

/// Which database of a container (`CKDatabase.Scope`), with Apple's raw values.
public enum CKDatabaseScope: Int, Hashable, Sendable, CaseIterable {
    case `public` = 1
    case `private` = 2
    case shared = 3

    /// The scope of a wire value; `nil` for unspecified or unknown values.
    public init?(wire: Wire.DatabaseScope) {
        switch wire {
        case .public: self = .public
        case .private: self = .private
        case .shared: self = .shared
        case .unspecified, .unrecognized: return nil
        }
    }

    /// The scope as a wire value.
    public var wireScope: Wire.DatabaseScope {
        switch self {
        case .public: .public
        case .private: .private
        case .shared: .shared
        }
    }
}
