import CirrusModel
import Foundation
import NIOConcurrencyHelpers

/// The async API, built on the operations: each call runs one operation on this database and
/// cancelling the calling task cancels it.
extension CKDatabase {
    /// Saves one record (save policy `ifServerRecordUnchanged`) and returns the server's copy.
    ///
    /// - throws: `CKError`, e.g. `serverRecordChanged` with the server's record.
    public func save(_ record: CKRecord) async throws -> CKRecord {
        let (saved, _) = try await self.modifyRecords(saving: [record], deleting: [])
        return try Self.single(saved, record.recordID)
    }

    /// Fetches one record.
    ///
    /// - throws: `CKError` `unknownItem` when it does not exist.
    public func record(for recordID: CKRecord.ID) async throws -> CKRecord {
        let results = try await self.records(for: [recordID])
        return try Self.single(results, recordID)
    }

    /// Fetches records; each ID gets its own result. Throws only when the whole operation fails.
    public func records(
        for ids: [CKRecord.ID],
        desiredKeys: [CKRecord.FieldKey]? = nil
    ) async throws -> [CKRecord.ID: Result<CKRecord, any Error>] {
        let operation = CKFetchRecordsOperation(recordIDs: ids)
        operation.desiredKeys = desiredKeys
        let results = Locked<[CKRecord.ID: Result<CKRecord, any Error>]>([:])
        operation.perRecordResultBlock = { id, result in results.withLock { $0[id] = result } }
        try await self.run(operation, callbacksInPlace: true) { operation.fetchRecordsResultBlock = $0 }
        return results.withLock { $0 }
    }

    /// Runs a query and returns the matching records in sort order, and a cursor when more
    /// records match than were returned (continue with `records(continuingMatchFrom:)`).
    ///
    /// For example:
    /// ```swift
    /// let query = CKQuery(recordType: "Note", predicate: CKPredicate(format: "priority > %d", 5))
    /// let (matches, cursor) = try await database.records(matching: query, resultsLimit: 50)
    /// ```
    ///
    /// - throws: `CKError`, e.g. `invalidArguments` for a predicate that did not parse (before
    ///   anything is sent).
    public func records(
        matching query: CKQuery,
        inZoneWith zoneID: CKRecordZone.ID? = nil,
        desiredKeys: [CKRecord.FieldKey]? = nil,
        resultsLimit: Int = CKQueryOperation.maximumResults
    ) async throws -> (
        matchResults: [(CKRecord.ID, Result<CKRecord, any Error>)],
        queryCursor: CKQueryOperation.Cursor?
    ) {
        let operation = CKQueryOperation(query: query)
        operation.zoneID = zoneID
        return try await self.runQuery(operation, desiredKeys: desiredKeys, resultsLimit: resultsLimit)
    }

    /// Continues a query from `queryCursor`; returns the next matching records and a cursor
    /// when still more match.
    public func records(
        continuingMatchFrom queryCursor: CKQueryOperation.Cursor,
        desiredKeys: [CKRecord.FieldKey]? = nil,
        resultsLimit: Int = CKQueryOperation.maximumResults
    ) async throws -> (
        matchResults: [(CKRecord.ID, Result<CKRecord, any Error>)],
        queryCursor: CKQueryOperation.Cursor?
    ) {
        let operation = CKQueryOperation(cursor: queryCursor)
        return try await self.runQuery(operation, desiredKeys: desiredKeys, resultsLimit: resultsLimit)
    }

    private func runQuery(
        _ operation: CKQueryOperation,
        desiredKeys: [CKRecord.FieldKey]?,
        resultsLimit: Int
    ) async throws -> (
        matchResults: [(CKRecord.ID, Result<CKRecord, any Error>)],
        queryCursor: CKQueryOperation.Cursor?
    ) {
        operation.desiredKeys = desiredKeys
        operation.resultsLimit = resultsLimit
        let matches = NIOLockedValueBox<[(CKRecord.ID, Result<CKRecord, any Error>)]>([])
        let cursor = NIOLockedValueBox<CKQueryOperation.Cursor?>(nil)
        operation.recordMatchedBlock = { id, result in matches.withLockedValue { $0.append((id, result)) } }
        try await self.run(operation, callbacksInPlace: true) { finish in
            operation.queryResultBlock = { result in
                if case .success(let next) = result { cursor.withLockedValue { $0 = next } }
                finish(result.map { _ in () })
            }
        }
        return (matches.withLockedValue { $0 }, cursor.withLockedValue { $0 })
    }

    /// Deletes one record and returns its ID.
    public func deleteRecord(withID recordID: CKRecord.ID) async throws -> CKRecord.ID {
        let (_, deleted) = try await self.modifyRecords(saving: [], deleting: [recordID])
        _ = try Self.single(deleted, recordID)
        return recordID
    }

    /// Saves and deletes records in one operation; each item gets its own result. Throws only
    /// when the whole operation fails (not for per-item failures).
    public func modifyRecords(
        saving recordsToSave: [CKRecord],
        deleting recordIDsToDelete: [CKRecord.ID],
        savePolicy: CKModifyRecordsOperation.RecordSavePolicy = .ifServerRecordUnchanged,
        atomically: Bool = true
    ) async throws -> (
        saveResults: [CKRecord.ID: Result<CKRecord, any Error>],
        deleteResults: [CKRecord.ID: Result<Void, any Error>]
    ) {
        let operation = CKModifyRecordsOperation(recordsToSave: recordsToSave, recordIDsToDelete: recordIDsToDelete)
        operation.savePolicy = savePolicy
        operation.isAtomic = atomically
        // Locks without a lock object of their own (``Locked``): two fewer allocations per call.
        // Sized for every item up front: no growing (and rehashing) as results arrive.
        let saves = Locked([CKRecord.ID: Result<CKRecord, any Error>](minimumCapacity: recordsToSave.count))
        let deletes = Locked([CKRecord.ID: Result<Void, any Error>](minimumCapacity: recordIDsToDelete.count))
        operation.perRecordSaveBlock = { id, result in saves.withLock { $0[id] = result } }
        operation.perRecordDeleteBlock = { id, result in deletes.withLock { $0[id] = result } }
        try await self.run(operation, callbacksInPlace: true) { operation.modifyRecordsResultBlock = $0 }
        return (saves.withLock { $0 }, deletes.withLock { $0 })
    }

    /// Creates or updates a zone and returns it as the server has it.
    public func save(_ zone: CKRecordZone) async throws -> CKRecordZone {
        let (saved, _) = try await self.modifyRecordZones(saving: [zone], deleting: [])
        return try Self.single(saved, zone.zoneID)
    }

    /// Fetches one zone.
    ///
    /// - throws: `CKError` `zoneNotFound` when it does not exist.
    public func recordZone(for zoneID: CKRecordZone.ID) async throws -> CKRecordZone {
        let results = try await self.recordZones(for: [zoneID])
        return try Self.single(results, zoneID)
    }

    /// Fetches zones; each ID gets its own result.
    public func recordZones(for ids: [CKRecordZone.ID]) async throws -> [CKRecordZone.ID: Result<CKRecordZone, any Error>] {
        let operation = CKFetchRecordZonesOperation(recordZoneIDs: ids)
        let results = NIOLockedValueBox<[CKRecordZone.ID: Result<CKRecordZone, any Error>]>([:])
        operation.perRecordZoneResultBlock = { id, result in results.withLockedValue { $0[id] = result } }
        try await self.run(operation, callbacksInPlace: true) { operation.fetchRecordZonesResultBlock = $0 }
        return results.withLockedValue { $0 }
    }

    /// Every zone of the database, in the server's order.
    public func allRecordZones() async throws -> [CKRecordZone] {
        let operation = CKFetchRecordZonesOperation.fetchAllRecordZonesOperation()
        let zones = NIOLockedValueBox<[CKRecordZone]>([])
        let failures = NIOLockedValueBox<[any Error]>([])
        operation.perRecordZoneResultBlock = { _, result in
            switch result {
            case .success(let zone): zones.withLockedValue { $0.append(zone) }
            case .failure(let error): failures.withLockedValue { $0.append(error) }
            }
        }
        try await self.run(operation, callbacksInPlace: true) { operation.fetchRecordZonesResultBlock = $0 }
        if let failure = failures.withLockedValue({ $0.first }) {
            throw failure
        }
        return zones.withLockedValue { $0 }
    }

    /// Deletes a zone (and its records) and returns its ID.
    public func deleteRecordZone(withID zoneID: CKRecordZone.ID) async throws -> CKRecordZone.ID {
        let (_, deleted) = try await self.modifyRecordZones(saving: [], deleting: [zoneID])
        _ = try Self.single(deleted, zoneID)
        return zoneID
    }

    /// Saves and deletes zones in one operation; each item gets its own result.
    public func modifyRecordZones(
        saving recordZonesToSave: [CKRecordZone],
        deleting recordZoneIDsToDelete: [CKRecordZone.ID]
    ) async throws -> (
        saveResults: [CKRecordZone.ID: Result<CKRecordZone, any Error>],
        deleteResults: [CKRecordZone.ID: Result<Void, any Error>]
    ) {
        let operation = CKModifyRecordZonesOperation(
            recordZonesToSave: recordZonesToSave,
            recordZoneIDsToDelete: recordZoneIDsToDelete
        )
        let saves = NIOLockedValueBox<[CKRecordZone.ID: Result<CKRecordZone, any Error>]>([:])
        let deletes = NIOLockedValueBox<[CKRecordZone.ID: Result<Void, any Error>]>([:])
        operation.perRecordZoneSaveBlock = { id, result in saves.withLockedValue { $0[id] = result } }
        operation.perRecordZoneDeleteBlock = { id, result in deletes.withLockedValue { $0[id] = result } }
        try await self.run(operation, callbacksInPlace: true) { operation.modifyRecordZonesResultBlock = $0 }
        return (saves.withLockedValue { $0 }, deletes.withLockedValue { $0 })
    }

    // MARK: - Running operations

    /// Adds `operation` and waits for its result block; `install` hands that block over.
    /// A `partialFailure` is not thrown: the per-item results carry it.
    ///
    /// - parameter callbacksInPlace: the operation's blocks are this call's own and return at
    ///   once (they collect results and resume the caller), so they may run on the connection's
    ///   event loop (``CKOperation/runsCallbacksInPlace()``). Never with app code in a block.
    func run(
        _ operation: CKDatabaseOperation,
        callbacksInPlace: Bool = false,
        install: (@escaping (Result<Void, any Error>) -> Void) -> Void
    ) async throws {
        if callbacksInPlace {
            operation.runsCallbacksInPlace()
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                install { result in
                    if case .failure(let error as CKError) = result, error.code == .partialFailure {
                        continuation.resume()
                    } else {
                        continuation.resume(with: result)
                    }
                }
                self.start(operation)
            }
        } onCancel: {
            operation.cancel()
        }
    }

    /// The one result a single-item call asked for.
    static func single<ID: Hashable, Value>(_ results: [ID: Result<Value, any Error>], _ id: ID) throws -> Value {
        guard let result = results[id] else {
            throw CKError(.internalError, message: "the server sent no result for \(id)")
        }
        return try result.get()
    }
}
