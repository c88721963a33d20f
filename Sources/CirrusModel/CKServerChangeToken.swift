import CirrusWire
import Foundation

/// An opaque marker of a point in a change feed (`CKServerChangeToken`). Store it and
/// hand it back; never look inside.
///
/// An immutable `NSObject`, as Apple's is: it archives with `NSKeyedArchiver` under secure
/// coding (the way CloudKit apps keep tokens between launches), it is also `Codable`, and two
/// tokens are equal when they hold the same bytes.
///
/// For example:
/// ```swift
/// let data = try NSKeyedArchiver.archivedData(withRootObject: token, requiringSecureCoding: true)
/// let saved = try NSKeyedUnarchiver.unarchivedObject(ofClass: CKServerChangeToken.self, from: data)
/// ```
public final class CKServerChangeToken: NSObject, NSSecureCoding, NSCopying, Codable, Sendable {
    /// The server's bytes.
    public let opaqueBytes: [UInt8]

    /// A token holding the given server bytes.
    public init(opaqueBytes: [UInt8]) {
        self.opaqueBytes = opaqueBytes
        super.init()
    }

    /// The token of a wire message.
    package convenience init(wire: Wire.ServerChangeToken) {
        self.init(opaqueBytes: wire.opaque)
    }

    /// The token as a wire message.
    package var wireToken: Wire.ServerChangeToken {
        Wire.ServerChangeToken(opaque: opaqueBytes)
    }

    public override func isEqual(_ object: Any?) -> Bool {
        guard let other = object as? CKServerChangeToken else { return false }
        return self === other || self.opaqueBytes == other.opaqueBytes
    }

    public override var hash: Int {
        var hasher = Hasher()
        hasher.combine(self.opaqueBytes)
        return hasher.finalize()
    }

    public override var description: String { "<CKServerChangeToken: \(opaqueBytes.count) bytes>" }

    /// The token itself: it is immutable.
    public func copy(with zone: NSZone? = nil) -> Any { self }

    // MARK: NSSecureCoding

    private enum CodingKeys: String, CodingKey {
        case opaqueBytes
    }

    public static var supportsSecureCoding: Bool { true }

    public func encode(with coder: NSCoder) {
        coder.encode(Data(self.opaqueBytes) as NSData, forKey: CodingKeys.opaqueBytes.rawValue)
    }

    /// The token `encode(with:)` wrote; nil when the coder holds no bytes.
    public init?(coder: NSCoder) {
        guard coder.containsValue(forKey: CodingKeys.opaqueBytes.rawValue),
            let data = coder.decodeObject(of: NSData.self, forKey: CodingKeys.opaqueBytes.rawValue)
        else {
            return nil
        }
        self.opaqueBytes = [UInt8](data as Data)
        super.init()
    }

    // MARK: Codable

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.opaqueBytes = try container.decode([UInt8].self, forKey: .opaqueBytes)
        super.init()
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(self.opaqueBytes, forKey: .opaqueBytes)
    }
}
