import Foundation

extension CKRecord {
    /// The name of a record type, such as `"Note"`.
    public typealias RecordType = String
    /// The name of a record field, such as `"title"`.
    public typealias FieldKey = String

    /// A record's identity: its name and its zone (`CKRecord.ID`).
    ///
    /// A value type here (Apple's is a class); equality and hashing compare
    /// `recordName` and `zoneID`, as Apple's `isEqual:` does.
    ///
    /// For example:
    /// ```swift
    /// let id = CKRecord.ID(recordName: "note-1", zoneID: CKRecordZone.ID(zoneName: "Notes"))
    /// ```
    public struct ID: Hashable, Sendable, Codable, CustomStringConvertible {
        /// The record's name, unique within its zone (1 … 255 ASCII characters; the
        /// server checks).
        public let recordName: String
        /// The zone that holds the record.
        public let zoneID: CKRecordZone.ID

        /// A record ID in the given zone, by default the current user's default zone.
        public init(recordName: String, zoneID: CKRecordZone.ID = .default) {
            self.recordName = recordName
            self.zoneID = zoneID
        }

        /// A record ID with a new unique name (a UUID string) in the given zone.
        init(zoneID: CKRecordZone.ID) {
            self.init(recordName: UUID().uuidString, zoneID: zoneID)
        }

        public var description: String {
            "<CKRecordID: recordName=\(recordName), zoneID=\(zoneID.zoneName):\(zoneID.ownerName)>"
        }
    }

    /// Record types the system defines (`CKRecord.SystemType`).
    public enum SystemType {
        /// The type of user records (`"Users"`).
        public static let userRecord: CKRecord.RecordType = "Users"
        /// The type of share records (`"cloudkit.share"`).
        public static let share: CKRecord.RecordType = "cloudkit.share"
        /// The type of zone-wide share records (`"cloudkit.zoneshare"`).
        public static let zoneShare: CKRecord.RecordType = "cloudkit.zoneshare"
    }

    /// Field keys the system defines (`CKRecord.SystemFieldKey`), usable in queries and sorts.
    public enum SystemFieldKey {
        public static let creationDate: CKRecord.FieldKey = "___createTime"
        public static let modificationDate: CKRecord.FieldKey = "___modTime"
        public static let creatorUserRecordID: CKRecord.FieldKey = "___createdBy"
        public static let lastModifiedUserRecordID: CKRecord.FieldKey = "___modifiedBy"
        public static let recordID: CKRecord.FieldKey = "___recordID"
        public static let parent: CKRecord.FieldKey = "parent"
        public static let share: CKRecord.FieldKey = "share"
    }

    /// The record name of the share of a zone-wide shared zone.
    public static let nameZoneWideShare = "cloudkit.zoneshare"
}
