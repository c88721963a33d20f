import CirrusWire
import Foundation

/// A record's identity: its name and its zone (CloudKit's `CKRecord.ID`; write it so).
///
/// An immutable `NSObject`, as Apple's is: equality and hashing compare `recordName` and
/// `zoneID` (`isEqual(_:)`, `hash`), it archives with `NSKeyedArchiver` under secure coding,
/// and it is also `Codable`. The class has a top-level name because Foundation on Linux
/// archives only top-level classes; `CKRecord.ID` is the name to use.
///
/// For example:
/// ```swift
/// let id = CKRecord.ID(recordName: "note-1", zoneID: CKRecordZone.ID(zoneName: "Notes"))
/// let data = try NSKeyedArchiver.archivedData(withRootObject: id, requiringSecureCoding: true)
/// let same = try NSKeyedUnarchiver.unarchivedObject(ofClass: CKRecord.ID.self, from: data)
/// ```
public final class CKRecordID: NSObject, NSSecureCoding, NSCopying, Codable, Sendable {
    /// The record's name, unique within its zone (1 … 255 ASCII characters; the
    /// server checks).
    public let recordName: String
    /// The zone that holds the record.
    public let zoneID: CKRecordZone.ID
    /// `hash`, computed once: record IDs key the dictionaries of every operation's results.
    private let cachedHash: Int

    /// A record ID in the given zone, by default the current user's default zone.
    public init(recordName: String, zoneID: CKRecordZone.ID = .default) {
        self.recordName = recordName
        self.zoneID = zoneID
        self.cachedHash = Self.hash(recordName, zoneID)
        super.init()
    }

    /// A record ID with a new unique name (a UUID string) in the given zone.
    convenience init(zoneID: CKRecordZone.ID) {
        self.init(recordName: RandomUUID.string(), zoneID: zoneID)
    }

    // MARK: Equality

    public override func isEqual(_ object: Any?) -> Bool {
        guard let other = object as? CKRecordID else { return false }
        return self === other
            || (self.cachedHash == other.cachedHash && self.recordName == other.recordName && self.zoneID == other.zoneID)
    }

    public override var hash: Int { self.cachedHash }

    private static func hash(_ recordName: String, _ zoneID: CKRecordZone.ID) -> Int {
        var hasher = Hasher()
        hasher.combine(recordName)
        hasher.combine(zoneID)
        return hasher.finalize()
    }

    public override var description: String {
        "<CKRecordID: recordName=\(recordName), zoneID=\(zoneID.zoneName):\(zoneID.ownerName)>"
    }

    /// The ID itself: it is immutable.
    public func copy(with zone: NSZone? = nil) -> Any { self }

    // MARK: NSSecureCoding

    private enum CodingKeys: String, CodingKey {
        case recordName, zoneID
    }

    public static var supportsSecureCoding: Bool { true }

    public func encode(with coder: NSCoder) {
        coder.encode(self.recordName as NSString, forKey: CodingKeys.recordName.rawValue)
        coder.encode(self.zoneID, forKey: CodingKeys.zoneID.rawValue)
    }

    /// The ID `encode(with:)` wrote; nil when the name or the zone ID is missing or of
    /// another class.
    public init?(coder: NSCoder) {
        guard coder.containsValue(forKey: CodingKeys.recordName.rawValue), coder.containsValue(forKey: CodingKeys.zoneID.rawValue),
            let recordName = coder.decodeObject(of: NSString.self, forKey: CodingKeys.recordName.rawValue),
            let zoneID = coder.decodeObject(of: CKRecordZoneID.self, forKey: CodingKeys.zoneID.rawValue)
        else {
            return nil
        }
        self.recordName = recordName as String
        self.zoneID = zoneID
        self.cachedHash = Self.hash(self.recordName, zoneID)
        super.init()
    }

    // MARK: Codable

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.recordName = try container.decode(String.self, forKey: .recordName)
        self.zoneID = try container.decode(CKRecordZoneID.self, forKey: .zoneID)
        self.cachedHash = Self.hash(self.recordName, self.zoneID)
        super.init()
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(self.recordName, forKey: .recordName)
        try container.encode(self.zoneID, forKey: .zoneID)
    }
}
