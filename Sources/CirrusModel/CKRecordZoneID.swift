import Foundation

/// A zone's identity: its name and owner (CloudKit's `CKRecordZone.ID`; write it so).
///
/// An immutable `NSObject`, as Apple's is: equality and hashing compare `zoneName` and
/// `ownerName` (`isEqual(_:)`, `hash`), it archives with `NSKeyedArchiver` under secure coding,
/// and it is also `Codable`. The class has a top-level name because Foundation on Linux
/// archives only top-level classes; `CKRecordZone.ID` is the name to use.
///
/// For example:
/// ```swift
/// let zoneID = CKRecordZone.ID(zoneName: "Notes")
/// let data = try NSKeyedArchiver.archivedData(withRootObject: zoneID, requiringSecureCoding: true)
/// let same = try NSKeyedUnarchiver.unarchivedObject(ofClass: CKRecordZone.ID.self, from: data)
/// ```
public final class CKRecordZoneID: NSObject, NSSecureCoding, NSCopying, Codable, Sendable {
    /// The name of the default zone of every database.
    public static let defaultZoneName = "_defaultZone"
    /// The default zone of the current user.
    public static let `default` = CKRecordZoneID()

    /// The zone's name, unique within its owner's database.
    public let zoneName: String
    /// The record name of the zone's owner; `CKCurrentUserDefaultName` for the current user.
    public let ownerName: String
    /// `hash`, computed once: zone IDs key dictionaries, through record IDs, on every save.
    private let cachedHash: Int

    /// A zone ID; both arguments default to the current user's default zone.
    public init(zoneName: String = CKRecordZoneID.defaultZoneName, ownerName: String = CKCurrentUserDefaultName) {
        self.zoneName = zoneName
        self.ownerName = ownerName
        self.cachedHash = Self.hash(zoneName, ownerName)
        super.init()
    }

    // MARK: Equality

    public override func isEqual(_ object: Any?) -> Bool {
        guard let other = object as? CKRecordZoneID else { return false }
        return self === other
            || (self.cachedHash == other.cachedHash && self.zoneName == other.zoneName && self.ownerName == other.ownerName)
    }

    public override var hash: Int { self.cachedHash }

    private static func hash(_ zoneName: String, _ ownerName: String) -> Int {
        var hasher = Hasher()
        hasher.combine(zoneName)
        hasher.combine(ownerName)
        return hasher.finalize()
    }

    public override var description: String {
        "<CKRecordZoneID: zoneName=\(zoneName), ownerName=\(ownerName)>"
    }

    /// The ID itself: it is immutable.
    public func copy(with zone: NSZone? = nil) -> Any { self }

    // MARK: NSSecureCoding

    private enum CodingKeys: String, CodingKey {
        case zoneName, ownerName
    }

    public static var supportsSecureCoding: Bool { true }

    public func encode(with coder: NSCoder) {
        coder.encode(self.zoneName as NSString, forKey: CodingKeys.zoneName.rawValue)
        coder.encode(self.ownerName as NSString, forKey: CodingKeys.ownerName.rawValue)
    }

    /// The ID `encode(with:)` wrote; nil when either name is missing or not a string.
    public init?(coder: NSCoder) {
        guard coder.containsValue(forKey: CodingKeys.zoneName.rawValue), coder.containsValue(forKey: CodingKeys.ownerName.rawValue),
            let zoneName = coder.decodeObject(of: NSString.self, forKey: CodingKeys.zoneName.rawValue),
            let ownerName = coder.decodeObject(of: NSString.self, forKey: CodingKeys.ownerName.rawValue)
        else {
            return nil
        }
        self.zoneName = zoneName as String
        self.ownerName = ownerName as String
        self.cachedHash = Self.hash(self.zoneName, self.ownerName)
        super.init()
    }

    // MARK: Codable

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.zoneName = try container.decode(String.self, forKey: .zoneName)
        self.ownerName = try container.decode(String.self, forKey: .ownerName)
        self.cachedHash = Self.hash(self.zoneName, self.ownerName)
        super.init()
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(self.zoneName, forKey: .zoneName)
        try container.encode(self.ownerName, forKey: .ownerName)
    }
}
