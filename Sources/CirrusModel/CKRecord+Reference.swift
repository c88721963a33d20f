import Foundation

extension CKRecord {
    /// What happens to a record when the record its reference points at is deleted.
    public enum ReferenceAction: UInt, Hashable, Sendable {
        /// Nothing: the reference dangles.
        case none = 0
        /// The record holding the reference is deleted too (cascades).
        case deleteSelf = 1
    }

    /// A link from one record to another in the same zone (`CKRecord.Reference`).
    ///
    /// A value type here (Apple's is a class); equality compares `recordID` and `action`.
    ///
    /// For example:
    /// ```swift
    /// item["list"] = CKRecord.Reference(record: list, action: .deleteSelf)
    /// ```
    public struct Reference: Hashable, Sendable, CustomStringConvertible {
        /// The ID of the target record.
        public let recordID: CKRecord.ID
        /// What deleting the target does to the record holding this reference.
        public let action: ReferenceAction

        /// A reference to the record with the given ID.
        public init(recordID: CKRecord.ID, action: ReferenceAction) {
            self.recordID = recordID
            self.action = action
        }

        /// A reference to the given record.
        public init(record: CKRecord, action: ReferenceAction) {
            self.init(recordID: record.recordID, action: action)
        }

        public var description: String {
            "<CKReference: recordID=\(recordID), action=\(action)>"
        }
    }
}
