import Foundation

extension CKRecord {
    /// The name of a record type, such as `"Note"`.
    public typealias RecordType = String
    /// The name of a record field, such as `"title"`.
    public typealias FieldKey = String

    /// A record's identity: its name and its zone (``CKRecordID``).
    public typealias ID = CKRecordID

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
