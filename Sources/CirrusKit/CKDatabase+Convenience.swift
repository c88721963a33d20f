import CirrusModel
import Foundation
import NIOConcurrencyHelpers

/// CloudKit's completion-handler conveniences, each one operation. The handlers run on the
/// operation's callback queue.
extension CKDatabase {
    /// Fetches one record.
    public func fetch(
        withRecordID recordID: CKRecord.ID,
        completionHandler: @escaping @Sendable (CKRecord?, (any Error)?) -> Void
    ) {
        let operation = CKFetchRecordsOperation(recordIDs: [recordID])
        let box = ResultBox<CKRecord>()
        operation.perRecordResultBlock = { _, result in box.set(result) }
        operation.fetchRecordsResultBlock = { result in box.finish(result, completionHandler) }
        self.start(operation)
    }

    /// Saves one record (save policy `ifServerRecordUnchanged`).
    public func save(_ record: CKRecord, completionHandler: @escaping @Sendable (CKRecord?, (any Error)?) -> Void) {
        let operation = CKModifyRecordsOperation(recordsToSave: [record], recordIDsToDelete: nil)
        let box = ResultBox<CKRecord>()
        operation.perRecordSaveBlock = { _, result in box.set(result) }
        operation.modifyRecordsResultBlock = { result in box.finish(result, completionHandler) }
        self.start(operation)
    }

    /// Deletes one record.
    public func delete(
        withRecordID recordID: CKRecord.ID,
        completionHandler: @escaping @Sendable (CKRecord.ID?, (any Error)?) -> Void
    ) {
        let operation = CKModifyRecordsOperation(recordsToSave: nil, recordIDsToDelete: [recordID])
        let box = ResultBox<CKRecord.ID>()
        operation.perRecordDeleteBlock = { id, result in box.set(result.map { id }) }
        operation.modifyRecordsResultBlock = { result in box.finish(result, completionHandler) }
        self.start(operation)
    }

    /// Fetches one zone.
    public func fetch(
        withRecordZoneID zoneID: CKRecordZone.ID,
        completionHandler: @escaping @Sendable (CKRecordZone?, (any Error)?) -> Void
    ) {
        let operation = CKFetchRecordZonesOperation(recordZoneIDs: [zoneID])
        let box = ResultBox<CKRecordZone>()
        operation.perRecordZoneResultBlock = { _, result in box.set(result) }
        operation.fetchRecordZonesResultBlock = { result in box.finish(result, completionHandler) }
        self.start(operation)
    }

    /// Fetches every zone of the database.
    public func fetchAllRecordZones(completionHandler: @escaping @Sendable ([CKRecordZone]?, (any Error)?) -> Void) {
        let operation = CKFetchRecordZonesOperation.fetchAllRecordZonesOperation()
        let zones = NIOLockedValueBox<[CKRecordZone]>([])
        let failure = NIOLockedValueBox<(any Error)?>(nil)
        operation.perRecordZoneResultBlock = { _, result in
            switch result {
            case .success(let zone): zones.withLockedValue { $0.append(zone) }
            case .failure(let error): failure.withLockedValue { $0 = $0 ?? error }
            }
        }
        operation.fetchRecordZonesResultBlock = { result in
            if case .failure(let error) = result {
                completionHandler(nil, error)
            } else if let error = failure.withLockedValue({ $0 }) {
                completionHandler(nil, error)
            } else {
                completionHandler(zones.withLockedValue { $0 }, nil)
            }
        }
        self.start(operation)
    }

    /// Creates or updates one zone.
    public func save(_ zone: CKRecordZone, completionHandler: @escaping @Sendable (CKRecordZone?, (any Error)?) -> Void) {
        let operation = CKModifyRecordZonesOperation(recordZonesToSave: [zone], recordZoneIDsToDelete: nil)
        let box = ResultBox<CKRecordZone>()
        operation.perRecordZoneSaveBlock = { _, result in box.set(result) }
        operation.modifyRecordZonesResultBlock = { result in box.finish(result, completionHandler) }
        self.start(operation)
    }

    /// Deletes one zone and its records.
    public func delete(
        withRecordZoneID zoneID: CKRecordZone.ID,
        completionHandler: @escaping @Sendable (CKRecordZone.ID?, (any Error)?) -> Void
    ) {
        let operation = CKModifyRecordZonesOperation(recordZonesToSave: nil, recordZoneIDsToDelete: [zoneID])
        let box = ResultBox<CKRecordZone.ID>()
        operation.perRecordZoneDeleteBlock = { id, result in box.set(result.map { id }) }
        operation.modifyRecordZonesResultBlock = { result in box.finish(result, completionHandler) }
        self.start(operation)
    }
}

extension CKDatabase {
    /// Runs a query; the handler gets the matching records in sort order and a cursor when
    /// more match.
    public func fetch(
        withQuery query: CKQuery,
        inZoneWith zoneID: CKRecordZone.ID? = nil,
        desiredKeys: [CKRecord.FieldKey]? = nil,
        resultsLimit: Int = CKQueryOperation.maximumResults,
        completionHandler:
            @escaping @Sendable (
                Result<
                    (matchResults: [(CKRecord.ID, Result<CKRecord, any Error>)], queryCursor: CKQueryOperation.Cursor?),
                    any Error
                >
            ) -> Void
    ) {
        let operation = CKQueryOperation(query: query)
        operation.zoneID = zoneID
        self.fetchMatches(operation, desiredKeys: desiredKeys, resultsLimit: resultsLimit, completionHandler)
    }

    /// Continues a query from `queryCursor`.
    public func fetch(
        withCursor queryCursor: CKQueryOperation.Cursor,
        desiredKeys: [CKRecord.FieldKey]? = nil,
        resultsLimit: Int = CKQueryOperation.maximumResults,
        completionHandler:
            @escaping @Sendable (
                Result<
                    (matchResults: [(CKRecord.ID, Result<CKRecord, any Error>)], queryCursor: CKQueryOperation.Cursor?),
                    any Error
                >
            ) -> Void
    ) {
        let operation = CKQueryOperation(cursor: queryCursor)
        self.fetchMatches(operation, desiredKeys: desiredKeys, resultsLimit: resultsLimit, completionHandler)
    }

    /// Deprecated in CloudKit (use `fetch(withQuery:…)` or `records(matching:)`): the first
    /// batch of records matching `query`; a record that matched but could not be returned
    /// fails the call with its error.
    public func perform(
        _ query: CKQuery,
        inZoneWith zoneID: CKRecordZone.ID?,
        completionHandler: @escaping @Sendable ([CKRecord]?, (any Error)?) -> Void
    ) {
        self.fetch(withQuery: query, inZoneWith: zoneID) { result in
            do {
                let records = try result.get().matchResults.map { try $0.1.get() }
                completionHandler(records, nil)
            } catch {
                completionHandler(nil, error)
            }
        }
    }

    private func fetchMatches(
        _ operation: CKQueryOperation,
        desiredKeys: [CKRecord.FieldKey]?,
        resultsLimit: Int,
        _ completionHandler:
            @escaping @Sendable (
                Result<
                    (matchResults: [(CKRecord.ID, Result<CKRecord, any Error>)], queryCursor: CKQueryOperation.Cursor?),
                    any Error
                >
            ) -> Void
    ) {
        operation.desiredKeys = desiredKeys
        operation.resultsLimit = resultsLimit
        let matches = NIOLockedValueBox<[(CKRecord.ID, Result<CKRecord, any Error>)]>([])
        operation.recordMatchedBlock = { id, result in matches.withLockedValue { $0.append((id, result)) } }
        operation.queryResultBlock = { result in
            completionHandler(result.map { cursor in (matches.withLockedValue { $0 }, cursor) })
        }
        self.start(operation)
    }
}

/// The one item result of a single-item convenience, reported with the operation's outcome:
/// the item's own error wins over the operation's `partialFailure`.
final class ResultBox<Value: Sendable>: Sendable {
    private let result = NIOLockedValueBox<Result<Value, any Error>?>(nil)

    func set(_ result: Result<Value, any Error>) {
        self.result.withLockedValue { $0 = result }
    }

    func finish(_ overall: Result<Void, any Error>, _ handler: @Sendable (Value?, (any Error)?) -> Void) {
        switch self.result.withLockedValue({ $0 }) {
        case .success(let value)?:
            handler(value, nil)
        case .failure(let error)?:
            handler(nil, error)
        case nil:
            if case .failure(let error) = overall {
                handler(nil, error)
            } else {
                handler(nil, CKError(.internalError, message: "the server sent no result for the item"))
            }
        }
    }
}
