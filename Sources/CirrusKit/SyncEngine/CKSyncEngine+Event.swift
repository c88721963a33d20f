import CirrusModel
import Foundation

extension CKSyncEngine {
    /// What the sync engine tells its delegate, one event at a time, in order (CloudKit's
    /// `CKSyncEngine.Event`).
    ///
    /// For example:
    /// ```swift
    /// func handleEvent(_ event: CKSyncEngine.Event, syncEngine: CKSyncEngine) async {
    ///     switch event {
    ///     case .stateUpdate(let update): save(update.stateSerialization)
    ///     case .fetchedRecordZoneChanges(let changes): apply(changes.modifications, changes.deletions)
    ///     default: break
    ///     }
    /// }
    /// ```
    public enum Event: Sendable, CustomStringConvertible {
        /// The state changed: persist `stateSerialization` to continue from it next launch.
        case stateUpdate(StateUpdate)
        /// The user the engine syncs for is known for the first time, or changed.
        case accountChange(AccountChange)
        /// Zones created, changed or deleted on the server.
        case fetchedDatabaseChanges(FetchedDatabaseChanges)
        /// Records created, changed or deleted on the server (one batch of one zone).
        case fetchedRecordZoneChanges(FetchedRecordZoneChanges)
        /// The outcome of sending zone changes.
        case sentDatabaseChanges(SentDatabaseChanges)
        /// The outcome of sending one batch of record changes, failures included.
        case sentRecordZoneChanges(SentRecordZoneChanges)
        /// A fetch starts.
        case willFetchChanges(WillFetchChanges)
        /// A zone's changes are about to be fetched.
        case willFetchRecordZoneChanges(WillFetchRecordZoneChanges)
        /// A zone's changes were fetched, or fetching them failed (`error`).
        case didFetchRecordZoneChanges(DidFetchRecordZoneChanges)
        /// A fetch ended.
        case didFetchChanges(DidFetchChanges)
        /// A send starts.
        case willSendChanges(WillSendChanges)
        /// A send ended.
        case didSendChanges(DidSendChanges)

        public var description: String {
            switch self {
            case .stateUpdate: "stateUpdate"
            case .accountChange(let change): "accountChange(\(change.changeType))"
            case .fetchedDatabaseChanges(let changes):
                "fetchedDatabaseChanges(\(changes.modifications.count) changed, \(changes.deletions.count) deleted)"
            case .fetchedRecordZoneChanges(let changes):
                "fetchedRecordZoneChanges(\(changes.modifications.count) changed, \(changes.deletions.count) deleted)"
            case .sentDatabaseChanges(let sent):
                "sentDatabaseChanges(\(sent.savedZones.count) saved, \(sent.failedZoneSaves.count) failed, "
                    + "\(sent.deletedZoneIDs.count) deleted, \(sent.failedZoneDeletes.count) failed)"
            case .sentRecordZoneChanges(let sent):
                "sentRecordZoneChanges(\(sent.savedRecords.count) saved, \(sent.failedRecordSaves.count) failed, "
                    + "\(sent.deletedRecordIDs.count) deleted, \(sent.failedRecordDeletes.count) failed)"
            case .willFetchChanges: "willFetchChanges"
            case .willFetchRecordZoneChanges(let event): "willFetchRecordZoneChanges(\(event.zoneID.zoneName))"
            case .didFetchRecordZoneChanges(let event):
                "didFetchRecordZoneChanges(\(event.zoneID.zoneName)\(event.error.map { ", \($0.code)" } ?? ""))"
            case .didFetchChanges: "didFetchChanges"
            case .willSendChanges: "willSendChanges"
            case .didSendChanges: "didSendChanges"
            }
        }

        /// The state to persist.
        public struct StateUpdate: Sendable {
            /// The state to pass as `stateSerialization` on the next launch.
            public let stateSerialization: State.Serialization
        }

        /// A change of the account the engine syncs for.
        public struct AccountChange: Sendable {
            /// How the account changed.
            public enum ChangeType: Sendable, CustomStringConvertible {
                /// The first sync of this state: the user is `currentUser`.
                case signIn(currentUser: CKRecord.ID)
                /// The user is no longer signed in (not produced by Cirrus: a connection always
                /// has a user).
                case signOut(previousUser: CKRecord.ID)
                /// The state belonged to `previousUser`; the engine now syncs for `currentUser`
                /// and has reset its state (delete the previous user's local data).
                case switchAccounts(previousUser: CKRecord.ID, currentUser: CKRecord.ID)

                public var description: String {
                    switch self {
                    case .signIn(let user): "signIn(\(user.recordName))"
                    case .signOut(let user): "signOut(\(user.recordName))"
                    case .switchAccounts(let previous, let current): "switchAccounts(\(previous.recordName) → \(current.recordName))"
                    }
                }
            }

            /// How it changed.
            public let changeType: ChangeType
        }

        /// Zones changed or deleted on the server.
        public struct FetchedDatabaseChanges: Sendable {
            /// A zone created or changed (its record changes follow).
            public struct Modification: Sendable, Hashable {
                /// The zone.
                public let zoneID: CKRecordZone.ID
            }

            /// A zone deleted: delete its records locally.
            public struct Deletion: Sendable, Hashable {
                /// Why a zone went away.
                public enum Reason: Sendable, Hashable {
                    /// Deleted by a client.
                    case deleted
                    /// Purged (not produced by Cirrus, which has no purge).
                    case purged
                    /// Its encrypted data was reset (not produced by Cirrus).
                    case encryptedDataReset
                }

                /// The zone.
                public let zoneID: CKRecordZone.ID
                /// Why it went away.
                public let reason: Reason
            }

            /// What was created or changed.
            public let modifications: [Modification]
            /// What was deleted.
            public let deletions: [Deletion]
        }

        /// Records changed or deleted on the server.
        public struct FetchedRecordZoneChanges: Sendable {
            /// A record created or changed: its state on the server.
            public struct Modification: Sendable {
                /// The record as the server has it (with its change tag).
                public let record: CKRecord
            }

            /// A record deleted.
            public struct Deletion: Sendable, Hashable {
                /// The deleted record.
                public let recordID: CKRecord.ID
                /// Its type.
                public let recordType: CKRecord.RecordType
            }

            /// What was created or changed.
            public let modifications: [Modification]
            /// What was deleted.
            public let deletions: [Deletion]
        }

        /// The outcome of sending zone changes.
        public struct SentDatabaseChanges: Sendable {
            /// A zone the server did not save, and why.
            public struct FailedZoneSave: Sendable {
                /// The zone the app asked to save.
                public let zone: CKRecordZone
                /// Why.
                public let error: CKError
            }

            /// Zones saved, as the server has them.
            public let savedZones: [CKRecordZone]
            /// Zones not saved, with their errors.
            public let failedZoneSaves: [FailedZoneSave]
            /// Zones deleted.
            public let deletedZoneIDs: [CKRecordZone.ID]
            /// Zones not deleted, with their errors.
            public let failedZoneDeletes: [CKRecordZone.ID: CKError]
        }

        /// The outcome of sending one batch of record changes.
        ///
        /// Saved and deleted changes leave the state. A failure that may pass (network,
        /// `zoneBusy`, `serviceUnavailable`, `requestRateLimited`) stays pending and the engine
        /// retries it; any other failure (`serverRecordChanged` with the server's record,
        /// `zoneNotFound`, `unknownItem`, `quotaExceeded` …) leaves the state: resolve it and
        /// add the change again.
        public struct SentRecordZoneChanges: Sendable {
            /// A record the server did not save, and why.
            public struct FailedRecordSave: Sendable {
                /// The record the delegate provided.
                public let record: CKRecord
                /// Why.
                public let error: CKError
            }

            /// Records saved, as the server has them (with their new change tags).
            public let savedRecords: [CKRecord]
            /// Records not saved, each with its error (`serverRecordChanged` carries `serverRecord`).
            public let failedRecordSaves: [FailedRecordSave]
            /// Records deleted.
            public let deletedRecordIDs: [CKRecord.ID]
            /// Records not deleted, with their errors.
            public let failedRecordDeletes: [CKRecord.ID: CKError]
        }

        /// A fetch starts.
        public struct WillFetchChanges: Sendable {
            /// Why and how the engine fetches.
            public let context: FetchChangesContext
        }

        /// A zone's fetch starts.
        public struct WillFetchRecordZoneChanges: Sendable {
            /// The zone.
            public let zoneID: CKRecordZone.ID
        }

        /// The end of one zone's fetch. `error` is `changeTokenExpired` when the zone's token
        /// was too old: the engine then fetches the zone again from the start (another
        /// `willFetchRecordZoneChanges` follows), so keep only the records it reports before the
        /// next successful `didFetchRecordZoneChanges` of that zone.
        public struct DidFetchRecordZoneChanges: Sendable {
            /// The zone.
            public let zoneID: CKRecordZone.ID
            /// Why the zone's fetch failed; nil when it succeeded.
            public let error: CKError?
        }

        /// A fetch ended (a fetch that fails part way throws instead).
        public struct DidFetchChanges: Sendable {
            /// Why and how the engine fetches.
            public let context: FetchChangesContext
        }

        /// A send starts.
        public struct WillSendChanges: Sendable {
            /// Why and how the engine sends.
            public let context: SendChangesContext
        }

        /// A send ended.
        public struct DidSendChanges: Sendable {
            /// Why and how the engine sends.
            public let context: SendChangesContext
        }
    }
}
