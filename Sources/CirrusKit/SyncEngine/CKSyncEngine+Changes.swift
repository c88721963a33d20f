import CirrusModel
import Foundation

extension CKSyncEngine {
    /// A change to a record that the sync engine has yet to send (CloudKit's
    /// `CKSyncEngine.PendingRecordZoneChange`). The engine keeps only the ID: it asks the
    /// delegate for the record when it builds a batch, so what it sends is always the record's
    /// latest state.
    ///
    /// For example:
    /// ```swift
    /// syncEngine.state.add(pendingRecordZoneChanges: [.saveRecord(note.recordID)])
    /// ```
    public enum PendingRecordZoneChange: Hashable, Sendable, Codable, CustomStringConvertible {
        /// Save the record with this ID (the delegate provides it when a batch is built).
        case saveRecord(CKRecord.ID)
        /// Delete the record with this ID.
        case deleteRecord(CKRecord.ID)

        /// The record the change is about.
        public var recordID: CKRecord.ID {
            switch self {
            case .saveRecord(let id), .deleteRecord(let id): id
            }
        }

        public var description: String {
            switch self {
            case .saveRecord(let id): "saveRecord(\(id.recordName) in \(id.zoneID.zoneName))"
            case .deleteRecord(let id): "deleteRecord(\(id.recordName) in \(id.zoneID.zoneName))"
            }
        }
    }

    /// A change to a zone that the sync engine has yet to send (CloudKit's
    /// `CKSyncEngine.PendingDatabaseChange`). Zone changes are sent before record changes.
    ///
    /// Two changes are equal when they are of the same kind and name the same zone ID (a
    /// `CKRecordZone` is otherwise compared by identity). Serialized, a `.saveZone` keeps the
    /// zone's ID and encryption scope, which is all a client sets on a zone.
    ///
    /// For example:
    /// ```swift
    /// syncEngine.state.add(pendingDatabaseChanges: [.saveZone(CKRecordZone(zoneName: "Notes"))])
    /// ```
    public enum PendingDatabaseChange: Hashable, Sendable, Codable, CustomStringConvertible {
        /// Create or update this zone.
        case saveZone(CKRecordZone)
        /// Delete the zone with this ID and every record in it.
        case deleteZone(CKRecordZone.ID)

        /// The zone the change is about.
        public var zoneID: CKRecordZone.ID {
            switch self {
            case .saveZone(let zone): zone.zoneID
            case .deleteZone(let id): id
            }
        }

        public static func == (lhs: Self, rhs: Self) -> Bool {
            switch (lhs, rhs) {
            case (.saveZone(let a), .saveZone(let b)): a.zoneID == b.zoneID
            case (.deleteZone(let a), .deleteZone(let b)): a == b
            default: false
            }
        }

        public func hash(into hasher: inout Hasher) {
            switch self {
            case .saveZone(let zone):
                hasher.combine(0)
                hasher.combine(zone.zoneID)
            case .deleteZone(let id):
                hasher.combine(1)
                hasher.combine(id)
            }
        }

        private enum CodingKeys: String, CodingKey {
            case saveZone, deleteZone, encryptionScope
        }

        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            if let id = try container.decodeIfPresent(CKRecordZone.ID.self, forKey: .saveZone) {
                let zone = CKRecordZone(zoneID: id)
                let scope = try container.decodeIfPresent(Int.self, forKey: .encryptionScope) ?? 0
                zone.encryptionScope = CKRecordZone.EncryptionScope(rawValue: scope) ?? .perRecord
                self = .saveZone(zone)
            } else if let id = try container.decodeIfPresent(CKRecordZone.ID.self, forKey: .deleteZone) {
                self = .deleteZone(id)
            } else {
                throw DecodingError.dataCorrupted(.init(
                    codingPath: decoder.codingPath, debugDescription: "a pending database change is neither saveZone nor deleteZone"))
            }
        }

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            switch self {
            case .saveZone(let zone):
                try container.encode(zone.zoneID, forKey: .saveZone)
                try container.encode(zone.encryptionScope.rawValue, forKey: .encryptionScope)
            case .deleteZone(let id):
                try container.encode(id, forKey: .deleteZone)
            }
        }

        public var description: String {
            switch self {
            case .saveZone(let zone): "saveZone(\(zone.zoneID.zoneName))"
            case .deleteZone(let id): "deleteZone(\(id.zoneName))"
            }
        }
    }
}
