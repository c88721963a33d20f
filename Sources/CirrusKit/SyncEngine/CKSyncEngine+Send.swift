import CirrusModel
import Foundation
import NIOConcurrencyHelpers

/// Sending: zone changes first, then the delegate's batches of record changes, each as one
/// long-lived modify operation named in the state before it starts.
extension CKSyncEngine {
    /// Per-item errors that may pass: the change stays pending and is sent again.
    static let transientCodes: Set<CKError.Code> = [
        .networkFailure, .networkUnavailable, .serviceUnavailable, .requestRateLimited, .zoneBusy,
        .serverResponseLost, .accountTemporarilyUnavailable, .operationCancelled, .batchRequestFailed,
    ]

    static func isTransient(_ error: CKError) -> Bool { Self.transientCodes.contains(error.code) }

    /// One send; runs inside the gate.
    func send(_ options: SendChangesOptions, reason: SyncReason) async throws {
        try await self.checkAccount()
        try await self.resumeInFlightSend()
        let context = SendChangesContext(reason: reason, options: options)
        let hasWork = self.state.read { contents in
            contents.hasPendingUntrackedChanges
                || contents.pendingDatabaseChanges.contains { options.scope.contains($0) }
                || contents.pendingRecordZoneChanges.contains { options.scope.contains($0) }
        }
        guard hasWork else { return }
        await self.emit(.willSendChanges(.init(context: context)))
        var barren = 0
        while true {
            try await self.sendDatabaseChanges(context)
            // From here, a change the app adds again may have been read before its new value.
            self.state.beginBatch()
            guard let delegate = self.delegate, let batch = await delegate.nextRecordZoneChangeBatch(context, syncEngine: self) else {
                break
            }
            if !batch.skippedSaves.isEmpty {
                self.state.remove(pendingRecordZoneChanges: batch.skippedSaves.map { .saveRecord($0) })
            }
            if batch.recordsToSave.isEmpty && batch.recordIDsToDelete.isEmpty {
                if batch.skippedSaves.isEmpty { break }
                continue
            }
            let progressed = try await self.sendBatch(batch, context: context)
            // A delegate that keeps handing over changes that never succeed: stop, retry later.
            barren = progressed ? 0 : barren + 1
            if barren >= 3 {
                throw CKError(.internalError, message: "three batches in a row failed entirely; the send stops here")
            }
        }
        self.state.hasPendingUntrackedChanges = false
        await self.emitStateUpdate()
        await self.emit(.didSendChanges(.init(context: context)))
    }

    /// Sends the pending zone changes in scope, 400 at a time.
    private func sendDatabaseChanges(_ context: SendChangesContext) async throws {
        let pending = self.state.pendingDatabaseChanges.filter { context.options.scope.contains($0) }
        guard !pending.isEmpty else { return }
        for start in stride(from: 0, to: pending.count, by: RecordZoneChangeBatch.maximumItemCount) {
            let chunk = pending[start..<min(start + RecordZoneChangeBatch.maximumItemCount, pending.count)]
            var zones: [CKRecordZone] = []
            var deletions: [CKRecordZone.ID] = []
            for change in chunk {
                switch change {
                case .saveZone(let zone): zones.append(zone)
                case .deleteZone(let id): deletions.append(id)
                }
            }
            let operation = CKModifyRecordZonesOperation(recordZonesToSave: zones, recordZoneIDsToDelete: deletions)
            operation.group = context.options.operationGroup
            let saves = NIOLockedValueBox<[CKRecordZone.ID: Result<CKRecordZone, any Error>]>([:])
            let deletes = NIOLockedValueBox<[CKRecordZone.ID: Result<Void, any Error>]>([:])
            operation.perRecordZoneSaveBlock = { id, result in saves.withLockedValue { $0[id] = result } }
            operation.perRecordZoneDeleteBlock = { id, result in deletes.withLockedValue { $0[id] = result } }
            var whole: CKError?
            do {
                try await self.run(operation) { operation.modifyRecordZonesResultBlock = $0 }
            } catch {
                whole = CKError.wrapping(error)
            }
            var saved: [CKRecordZone] = []
            var failedSaves: [Event.SentDatabaseChanges.FailedZoneSave] = []
            var deleted: [CKRecordZone.ID] = []
            var failedDeletes: [CKRecordZone.ID: CKError] = [:]
            var done: [PendingDatabaseChange] = []
            let failure = { (result: Result<Void, any Error>?) -> CKError? in
                switch result {
                case .success: nil
                case .failure(let error): CKError.wrapping(error)
                case nil: whole ?? CKError(.internalError, message: "the server sent no result for the zone")
                }
            }
            for zone in zones {
                let result = saves.withLockedValue { $0[zone.zoneID] }
                if case .success(let server) = result {
                    saved.append(server)
                    done.append(.saveZone(zone))
                } else if let error = failure(result.map { $0.map { _ in () } }) {
                    failedSaves.append(.init(zone: zone, error: error))
                    if !Self.isTransient(error) { done.append(.saveZone(zone)) }
                }
            }
            for id in deletions {
                if let error = failure(deletes.withLockedValue({ $0[id] })) {
                    failedDeletes[id] = error
                    if !Self.isTransient(error) { done.append(.deleteZone(id)) }
                } else {
                    deleted.append(id)
                    done.append(.deleteZone(id))
                    self.state.update { contents in
                        contents.zoneTokens[id] = nil
                        contents.zonesNeedingFetch.removeAll { $0 == id }
                    }
                }
            }
            self.state.remove(pendingDatabaseChanges: done)
            await self.emit(.sentDatabaseChanges(.init(
                savedZones: saved, failedZoneSaves: failedSaves, deletedZoneIDs: deleted, failedZoneDeletes: failedDeletes)))
            await self.emitStateUpdate()
            if let whole, Self.isTransient(whole) { throw whole }
        }
    }

    /// Sends one batch; true when the server saved or deleted at least one of its records.
    private func sendBatch(_ batch: RecordZoneChangeBatch, context: SendChangesContext) async throws -> Bool {
        let operation = CKModifyRecordsOperation(recordsToSave: batch.recordsToSave, recordIDsToDelete: batch.recordIDsToDelete)
        operation.savePolicy = .ifServerRecordUnchanged
        operation.isAtomic = batch.atomicByZone
        operation.configuration.isLongLived = true
        operation.group = context.options.operationGroup
        let changes = batch.recordsToSave.map { PendingRecordZoneChange.saveRecord($0.recordID) }
            + batch.recordIDsToDelete.map { PendingRecordZoneChange.deleteRecord($0) }
        // The state names the operation before it can reach the server.
        self.state.beginSend(operationID: operation.operationID, changes: changes)
        await self.emitStateUpdate()
        return try await self.runSend(operation)
    }

    /// Finishes the send a previous run of the engine (or a lost connection) left in flight:
    /// resumes its long-lived operation and reports what the server did with its changes. An
    /// operation the server does not know never ran: its changes are simply still pending.
    private func resumeInFlightSend() async throws {
        guard let inFlight = self.state.read({ $0.inFlightSend }) else { return }
        let operation: CKOperation
        do {
            operation = try await self.database.container.longLivedOperation(for: inFlight.operationID)
        } catch let error as CKError where error.code == .unknownItem {
            self.state.finishSend(done: [])
            await self.emitStateUpdate()
            return
        }
        guard let modify = operation as? CKModifyRecordsOperation else {
            self.state.finishSend(done: [])
            await self.emitStateUpdate()
            return
        }
        _ = try await self.runSend(modify)
    }

    /// Runs a long-lived modify, reports its outcome and updates the state; throws a failure
    /// that may pass once it is reported.
    private func runSend(_ operation: CKModifyRecordsOperation) async throws -> Bool {
        operation.defersCompletionAcknowledgement()
        let saves = NIOLockedValueBox<[CKRecord.ID: Result<CKRecord, any Error>]>([:])
        let deletes = NIOLockedValueBox<[CKRecord.ID: Result<Void, any Error>]>([:])
        operation.perRecordSaveBlock = { id, result in saves.withLockedValue { $0[id] = result } }
        operation.perRecordDeleteBlock = { id, result in deletes.withLockedValue { $0[id] = result } }
        var whole: CKError?
        do {
            try await self.run(operation) { operation.modifyRecordsResultBlock = $0 }
        } catch {
            whole = CKError.wrapping(error)
        }
        let records = operation.recordsToSave ?? []
        let deletions = operation.recordIDsToDelete ?? []
        let saveResults = saves.withLockedValue { $0 }
        let deleteResults = deletes.withLockedValue { $0 }
        if let whole, whole.code != .operationCancelled, Self.isTransient(whole), saveResults.isEmpty, deleteResults.isEmpty {
            // The connection went away for longer than the operation kept resuming: it may
            // still run on the server. Keep it in flight; the next send resumes it.
            throw whole
        }
        if let whole, whole.code == .unknownItem, saveResults.isEmpty, deleteResults.isEmpty {
            // Resuming found no operation on the server (`unknownOperation`: it never ran there,
            // or was forgotten between being found and being resumed): nothing is known of its
            // changes, so they stay pending and go out again; a change that did reach the
            // server comes back as a conflict with the server's record.
            self.state.finishSend(done: [])
            await self.emitStateUpdate()
            return false
        }
        let missing = whole ?? CKError(.internalError, message: "the server sent no result for the record")
        var saved: [CKRecord] = []
        var failedSaves: [Event.SentRecordZoneChanges.FailedRecordSave] = []
        var deleted: [CKRecord.ID] = []
        var failedDeletes: [CKRecord.ID: CKError] = [:]
        var done = Set<PendingRecordZoneChange>()
        for record in records {
            switch saveResults[record.recordID] {
            case .success(let server):
                saved.append(server)
                done.insert(.saveRecord(record.recordID))
            case .failure(let error):
                let error = CKError.wrapping(error)
                failedSaves.append(.init(record: record, error: error))
                if !Self.isTransient(error) { done.insert(.saveRecord(record.recordID)) }
            case nil:
                failedSaves.append(.init(record: record, error: missing))
                if !Self.isTransient(missing) { done.insert(.saveRecord(record.recordID)) }
            }
        }
        for id in deletions {
            switch deleteResults[id] {
            case .success:
                deleted.append(id)
                done.insert(.deleteRecord(id))
            case .failure(let error):
                let error = CKError.wrapping(error)
                failedDeletes[id] = error
                if !Self.isTransient(error) { done.insert(.deleteRecord(id)) }
            case nil:
                failedDeletes[id] = missing
                if !Self.isTransient(missing) { done.insert(.deleteRecord(id)) }
            }
        }
        self.state.finishSend(done: done)
        await self.emit(.sentRecordZoneChanges(.init(
            savedRecords: saved, failedRecordSaves: failedSaves, deletedRecordIDs: deleted, failedRecordDeletes: failedDeletes)))
        await self.emitStateUpdate()
        // Persisted: the server may forget the operation now.
        operation.acknowledgeCompletion()
        if let whole, Self.isTransient(whole) { throw whole }
        let retryable = (failedSaves.map(\.error) + failedDeletes.values).first { Self.isTransient($0) }
        if saved.isEmpty && deleted.isEmpty, let retryable { throw retryable }
        return !saved.isEmpty || !deleted.isEmpty
    }
}
