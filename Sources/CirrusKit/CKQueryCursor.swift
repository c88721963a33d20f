import CirrusWire
import Foundation

/// Where a query stopped, to continue it with `CKQueryOperation(cursor:)` (CloudKit's
/// `CKQueryOperation.Cursor`; write it so).
///
/// Opaque bytes from the server that pin the query, zone and desired keys. An immutable
/// `NSObject`, as Apple's is: it archives with `NSKeyedArchiver` under secure coding, it is
/// also `Codable` (so an app can keep it between launches either way), and two cursors are
/// equal when they hold the same bytes. The class has a top-level name because Foundation on
/// Linux archives only top-level classes.
///
/// For example:
/// ```swift
/// let data = try NSKeyedArchiver.archivedData(withRootObject: cursor, requiringSecureCoding: true)
/// let saved = try NSKeyedUnarchiver.unarchivedObject(ofClass: CKQueryOperation.Cursor.self, from: data)
/// ```
public final class CKQueryCursor: NSObject, NSSecureCoding, NSCopying, Codable, Sendable {
    /// The server's opaque bytes.
    public let data: Data

    /// A cursor from the server's bytes.
    public init(data: Data) {
        self.data = data
        super.init()
    }

    /// The cursor a wire message carries.
    package convenience init(wire: Wire.QueryCursor) {
        self.init(data: Data(wire.opaque))
    }

    /// The cursor as a wire message.
    package var wireCursor: Wire.QueryCursor {
        Wire.QueryCursor(opaque: [UInt8](self.data))
    }

    public override func isEqual(_ object: Any?) -> Bool {
        guard let other = object as? CKQueryCursor else { return false }
        return self === other || self.data == other.data
    }

    public override var hash: Int {
        var hasher = Hasher()
        hasher.combine(self.data)
        return hasher.finalize()
    }

    public override var description: String { "<CKQueryCursor \(self.data.count) bytes>" }

    /// The cursor itself: it is immutable.
    public func copy(with zone: NSZone? = nil) -> Any { self }

    // MARK: NSSecureCoding

    private enum CodingKeys: String, CodingKey {
        case data
    }

    public static var supportsSecureCoding: Bool { true }

    public func encode(with coder: NSCoder) {
        coder.encode(self.data as NSData, forKey: CodingKeys.data.rawValue)
    }

    /// The cursor `encode(with:)` wrote; nil when the coder holds no bytes.
    public init?(coder: NSCoder) {
        guard coder.containsValue(forKey: CodingKeys.data.rawValue),
            let data = coder.decodeObject(of: NSData.self, forKey: CodingKeys.data.rawValue)
        else {
            return nil
        }
        self.data = data as Data
        super.init()
    }

    // MARK: Codable

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.data = try container.decode(Data.self, forKey: .data)
        super.init()
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(self.data, forKey: .data)
    }
}
