import CirrusModel
import Foundation

/// CloudKit's batch completion-handler forms (iOS 15 and later; the query forms are in
/// `CKDatabase+Convenience.swift`): each runs the async form of the same name as one operation and hands its whole result to `completionHandler`, on an
/// arbitrary thread. A per-item failure is in the item's own result; the outer result fails only
/// when the whole operation does.
extension CKDatabase {
    /// Fetches records; each ID gets its own result.
    public func fetch(
        withRecordIDs recordIDs: [CKRecord.ID],
        desiredKeys: [CKRecord.FieldKey]? = nil,
        completionHandler: @escaping @Sendable (Result<[CKRecord.ID: Result<CKRecord, any Error>], any Error>) -> Void
    ) {
        Self.complete(completionHandler) { try await self.records(for: recordIDs, desiredKeys: desiredKeys) }
    }

    /// Saves and deletes records in one operation.
    public func modifyRecords(
        saving recordsToSave: [CKRecord],
        deleting recordIDsToDelete: [CKRecord.ID],
        savePolicy: CKModifyRecordsOperation.RecordSavePolicy = .ifServerRecordUnchanged,
        atomically: Bool = true,
        completionHandler:
            @escaping @Sendable (
                Result<
                    (saveResults: [CKRecord.ID: Result<CKRecord, any Error>], deleteResults: [CKRecord.ID: Result<Void, any Error>]),
                    any Error
                >
            ) -> Void
    ) {
        Self.complete(completionHandler) {
            try await self.modifyRecords(
                saving: recordsToSave, deleting: recordIDsToDelete, savePolicy: savePolicy, atomically: atomically)
        }
    }

    /// Fetches zones; each ID gets its own result.
    public func fetch(
        withRecordZoneIDs zoneIDs: [CKRecordZone.ID],
        completionHandler: @escaping @Sendable (Result<[CKRecordZone.ID: Result<CKRecordZone, any Error>], any Error>) -> Void
    ) {
        Self.complete(completionHandler) { try await self.recordZones(for: zoneIDs) }
    }

    /// Saves and deletes zones in one operation.
    public func modifyRecordZones(
        saving recordZonesToSave: [CKRecordZone],
        deleting recordZoneIDsToDelete: [CKRecordZone.ID],
        completionHandler:
            @escaping @Sendable (
                Result<
                    (
                        saveResults: [CKRecordZone.ID: Result<CKRecordZone, any Error>],
                        deleteResults: [CKRecordZone.ID: Result<Void, any Error>]
                    ),
                    any Error
                >
            ) -> Void
    ) {
        Self.complete(completionHandler) {
            try await self.modifyRecordZones(saving: recordZonesToSave, deleting: recordZoneIDsToDelete)
        }
    }

    /// Fetches subscriptions; each ID gets its own result.
    public func fetch(
        withSubscriptionIDs subscriptionIDs: [CKSubscription.ID],
        completionHandler: @escaping @Sendable (Result<[CKSubscription.ID: Result<CKSubscription, any Error>], any Error>) -> Void
    ) {
        Self.complete(completionHandler) { try await self.subscriptions(for: subscriptionIDs) }
    }

    /// Saves and deletes subscriptions in one operation.
    public func modifySubscriptions(
        saving subscriptionsToSave: [CKSubscription],
        deleting subscriptionIDsToDelete: [CKSubscription.ID],
        completionHandler:
            @escaping @Sendable (
                Result<
                    (
                        saveResults: [CKSubscription.ID: Result<CKSubscription, any Error>],
                        deleteResults: [CKSubscription.ID: Result<Void, any Error>]
                    ),
                    any Error
                >
            ) -> Void
    ) {
        Self.complete(completionHandler) {
            try await self.modifySubscriptions(saving: subscriptionsToSave, deleting: subscriptionIDsToDelete)
        }
    }

    /// Runs `body` in a task of its own and hands its outcome to `completionHandler`.
    private static func complete<Success>(
        _ completionHandler: @escaping @Sendable (Result<Success, any Error>) -> Void,
        _ body: @escaping @Sendable () async throws -> Success
    ) {
        Task {
            do {
                completionHandler(.success(try await body()))
            } catch {
                completionHandler(.failure(error))
            }
        }
    }
}
