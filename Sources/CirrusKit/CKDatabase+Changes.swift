import CirrusModel
import Foundation
import NIOConcurrencyHelpers

extension CKDatabase {
    /// What changed in a zone (the async `recordZoneChanges(inZoneWith:since:)`).
    public enum RecordZoneChange {
        /// A record created or changed: its latest state.
        public struct Modification: Sendable {
            public let record: CKRecord
        }

        /// A record deleted.
        public struct Deletion: Sendable, Hashable {
            public let recordID: CKRecord.ID
            public let recordType: CKRecord.RecordType
        }
    }

    /// What changed in the database's zones (the async `databaseChanges(since:)`).
    public enum DatabaseChange {
        /// A zone created or changed.
        public struct Modification: Sendable, Hashable {
            public let zoneID: CKRecordZone.ID
        }

        /// A zone deleted (`purged` is always false on Cirrus, which has no purge).
        public struct Deletion: Sendable, Hashable {
            public let zoneID: CKRecordZone.ID
            public let purged: Bool
        }
    }

    /// One batch of a zone's changes after `changeToken` (nil = from the beginning). Call
    /// again with the returned token while `moreComing`.
    ///
    /// - throws: `CKError` — `changeTokenExpired` (fetch again without a token),
    ///   `zoneNotFound`, `invalidArguments` for a token of another zone.
    public func recordZoneChanges(
        inZoneWith zoneID: CKRecordZone.ID,
        since changeToken: CKServerChangeToken?,
        desiredKeys: [CKRecord.FieldKey]? = nil,
        resultsLimit: Int? = nil
    ) async throws -> (
        modificationResultsByID: [CKRecord.ID: Result<RecordZoneChange.Modification, any Error>],
        deletions: [RecordZoneChange.Deletion],
        changeToken: CKServerChangeToken,
        moreComing: Bool
    ) {
        let configuration = CKFetchRecordZoneChangesOperation.ZoneConfiguration(
            previousServerChangeToken: changeToken, resultsLimit: resultsLimit ?? 0, desiredKeys: desiredKeys)
        let operation = CKFetchRecordZoneChangesOperation(
            recordZoneIDs: [zoneID], configurationsByRecordZoneID: [zoneID: configuration])
        operation.fetchAllChanges = false
        struct Collected {
            var modifications: [CKRecord.ID: Result<RecordZoneChange.Modification, any Error>] = [:]
            var deletions: [RecordZoneChange.Deletion] = []
            var end: Result<(CKServerChangeToken, Bool), any Error>?
        }
        let collected = NIOLockedValueBox(Collected())
        operation.recordWasChangedBlock = { id, result in
            collected.withLockedValue {
                $0.modifications[id] = result.map { RecordZoneChange.Modification(record: $0) }
                $0.deletions.removeAll { $0.recordID == id }
            }
        }
        operation.recordWithIDWasDeletedBlock = { id, type in
            collected.withLockedValue {
                $0.modifications[id] = nil
                $0.deletions.append(RecordZoneChange.Deletion(recordID: id, recordType: type))
            }
        }
        operation.recordZoneFetchResultBlock = { _, result in
            collected.withLockedValue { $0.end = result.map { ($0.serverChangeToken, $0.moreComing) } }
        }
        try await self.run(operation) { operation.fetchRecordZoneChangesResultBlock = $0 }
        let result = collected.withLockedValue { $0 }
        guard let end = result.end else {
            throw CKError(.internalError, message: "the server finished without a result for zone \(zoneID.zoneName)")
        }
        let (token, moreComing) = try end.get()
        return (result.modifications, result.deletions, token, moreComing)
    }

    /// One batch of the zones created, changed or deleted after `changeToken` (nil = from the
    /// beginning). Call again with the returned token while `moreComing`.
    ///
    /// - throws: `CKError` — `changeTokenExpired` (fetch again without a token),
    ///   `invalidArguments` for a token of another database or user.
    public func databaseChanges(
        since changeToken: CKServerChangeToken?,
        resultsLimit: Int? = nil
    ) async throws -> (
        modifications: [DatabaseChange.Modification],
        deletions: [DatabaseChange.Deletion],
        changeToken: CKServerChangeToken,
        moreComing: Bool
    ) {
        let operation = CKFetchDatabaseChangesOperation(previousServerChangeToken: changeToken)
        operation.resultsLimit = resultsLimit ?? 0
        operation.fetchAllChanges = false
        struct Collected {
            var modifications: [DatabaseChange.Modification] = []
            var deletions: [DatabaseChange.Deletion] = []
            var end: (CKServerChangeToken, Bool)?
        }
        let collected = NIOLockedValueBox(Collected())
        operation.recordZoneWithIDChangedBlock = { id in
            collected.withLockedValue { $0.modifications.append(DatabaseChange.Modification(zoneID: id)) }
        }
        operation.recordZoneWithIDWasDeletedBlock = { id in
            collected.withLockedValue { $0.deletions.append(DatabaseChange.Deletion(zoneID: id, purged: false)) }
        }
        operation.recordZoneWithIDWasPurgedBlock = { id in
            collected.withLockedValue { $0.deletions.append(DatabaseChange.Deletion(zoneID: id, purged: true)) }
        }
        try await self.run(operation) { done in
            operation.fetchDatabaseChangesResultBlock = { result in
                done(result.map { token, moreComing in collected.withLockedValue { $0.end = (token, moreComing) } })
            }
        }
        let result = collected.withLockedValue { $0 }
        guard let (token, moreComing) = result.end else {
            throw CKError(.internalError, message: "the server finished without a change token")
        }
        return (result.modifications, result.deletions, token, moreComing)
    }
}
