import CirrusModel
import Foundation

extension CKSyncEngine {
    /// Why the engine fetches or sends.
    public enum SyncReason: Sendable, Hashable {
        /// The engine decided to (automatic sync: a push, pending changes, a retry).
        case scheduled
        /// The app called `fetchChanges(_:)` or `sendChanges(_:)`.
        case manual
    }

    /// How to fetch (CloudKit's `CKSyncEngine.FetchChangesOptions`).
    public struct FetchChangesOptions: Sendable {
        /// Which zones to fetch.
        public enum Scope: Sendable, Hashable {
            case all
            case zoneIDs(Set<CKRecordZone.ID>)
            case allExcluding(Set<CKRecordZone.ID>)

            /// Whether the scope includes `zoneID`.
            public func contains(_ zoneID: CKRecordZone.ID) -> Bool {
                switch self {
                case .all: true
                case .zoneIDs(let ids): ids.contains(zoneID)
                case .allExcluding(let ids): !ids.contains(zoneID)
                }
            }
        }

        /// Which zones to fetch. Default: `.all`.
        public var scope: Scope
        /// The group of the operations the fetch runs.
        public var operationGroup: CKOperationGroup?
        /// Zones to fetch first, in this order.
        public var prioritizedZoneIDs: [CKRecordZone.ID] = []

        /// Options for a fetch of `scope`.
        public init(scope: Scope = .all, operationGroup: CKOperationGroup? = nil) {
            self.scope = scope
            self.operationGroup = operationGroup
        }
    }

    /// How to send (CloudKit's `CKSyncEngine.SendChangesOptions`).
    public struct SendChangesOptions: Sendable {
        /// Which pending changes to send.
        public enum Scope: Sendable, Hashable {
            case all
            case zoneIDs(Set<CKRecordZone.ID>)
            case allExcluding(Set<CKRecordZone.ID>)
            case recordIDs(Set<CKRecord.ID>)

            /// Whether the scope includes changes of `zoneID`.
            public func contains(_ zoneID: CKRecordZone.ID) -> Bool {
                switch self {
                case .all: true
                case .zoneIDs(let ids): ids.contains(zoneID)
                case .allExcluding(let ids): !ids.contains(zoneID)
                case .recordIDs(let ids): ids.contains { $0.zoneID == zoneID }
                }
            }

            /// Whether the scope includes `recordID`.
            public func contains(_ recordID: CKRecord.ID) -> Bool {
                switch self {
                case .recordIDs(let ids): ids.contains(recordID)
                default: self.contains(recordID.zoneID)
                }
            }

            /// Whether the scope includes `change`.
            public func contains(_ change: PendingRecordZoneChange) -> Bool {
                self.contains(change.recordID)
            }

            /// Whether the scope includes `change`.
            public func contains(_ change: PendingDatabaseChange) -> Bool {
                self.contains(change.zoneID)
            }
        }

        /// Which pending changes to send. Default: `.all`.
        public var scope: Scope
        /// The group of the operations the send runs.
        public var operationGroup: CKOperationGroup?

        /// Options for a send of the changes in `scope`.
        public init(scope: Scope = .all, operationGroup: CKOperationGroup? = nil) {
            self.scope = scope
            self.operationGroup = operationGroup
        }
    }

    /// What a fetch is about, for `nextFetchChangesOptions` and the fetch events.
    public struct FetchChangesContext: Sendable {
        /// Why the engine fetches.
        public let reason: SyncReason
        /// What it fetches.
        public let options: FetchChangesOptions
    }

    /// What a send is about, for `nextRecordZoneChangeBatch` and the send events.
    public struct SendChangesContext: Sendable {
        /// Why the engine sends.
        public let reason: SyncReason
        /// What it sends.
        public let options: SendChangesOptions
    }

    /// The records the delegate hands the engine to send in one modify operation (CloudKit's
    /// `CKSyncEngine.RecordZoneChangeBatch`): at most 400 items.
    ///
    /// For example:
    /// ```swift
    /// func nextRecordZoneChangeBatch(_ context: CKSyncEngine.SendChangesContext, syncEngine: CKSyncEngine) async
    ///     -> CKSyncEngine.RecordZoneChangeBatch? {
    ///     let pending = syncEngine.state.pendingRecordZoneChanges.filter { context.options.scope.contains($0) }
    ///     return await CKSyncEngine.RecordZoneChangeBatch(pendingChanges: pending) { id in store.record(for: id) }
    /// }
    /// ```
    public struct RecordZoneChangeBatch: Sendable {
        /// The most items (saves plus deletes) one batch carries.
        public static let maximumItemCount = 400

        /// The records to save (with the change tags the app last got from the server).
        public var recordsToSave: [CKRecord]
        /// The records to delete.
        public var recordIDsToDelete: [CKRecord.ID]
        /// All or nothing per zone. Default: false (each record succeeds or fails alone).
        public var atomicByZone: Bool
        /// Pending saves whose record the provider did not have: the engine drops them.
        var skippedSaves: [CKRecord.ID] = []

        /// A batch of the given records.
        public init(recordsToSave: [CKRecord] = [], recordIDsToDelete: [CKRecord.ID] = [], atomicByZone: Bool = false) {
            self.recordsToSave = recordsToSave
            self.recordIDsToDelete = recordIDsToDelete
            self.atomicByZone = atomicByZone
        }

        /// The first changes of `pendingChanges`, up to 400, with each save's record from
        /// `recordProvider`; nil when there is nothing to send. A save whose record the
        /// provider returns nil for is left out, and the engine removes that pending change.
        public init?(
            pendingChanges: [PendingRecordZoneChange],
            recordProvider: @Sendable (CKRecord.ID) async -> CKRecord?
        ) async {
            self.init()
            var seen = Set<PendingRecordZoneChange>()
            for change in pendingChanges where seen.insert(change).inserted {
                guard self.recordsToSave.count + self.recordIDsToDelete.count < Self.maximumItemCount else { break }
                switch change {
                case .saveRecord(let id):
                    if let record = await recordProvider(id) {
                        self.recordsToSave.append(record)
                    } else {
                        self.skippedSaves.append(id)
                    }
                case .deleteRecord(let id):
                    self.recordIDsToDelete.append(id)
                }
            }
            if self.recordsToSave.isEmpty && self.recordIDsToDelete.isEmpty && self.skippedSaves.isEmpty {
                return nil
            }
        }
    }
}
