import CirrusStore
import CirrusWire

extension StorageExecutor {
    func modifyRecords(_ request: Wire.ModifyRecordsRequest, _ context: Context) async throws -> OperationCompletion {
        if let refused = Self.tooManyItems(request.recordsToSave.count + request.recordIDsToDelete.count) {
            return refused
        }
        var modification = RecordModification(request)
        modification.recordsToSave = modification.recordsToSave.map(context.owners.inbound)
        modification.recordIDsToDelete = modification.recordIDsToDelete.map(context.owners.inbound)
        let result = try await self.storage.modifyRecords(
            modification,
            in: context.database,
            by: context.caller.userRecordName
        )
        var partialErrors: [Wire.ItemError] = []
        for save in result.saves {
            var save = save
            save.recordID = save.recordID.map(context.owners.outbound)
            switch save.outcome {
            case .record(let record):
                save.outcome = .record(context.owners.outbound(record))
            case .error(let error):
                let error = context.owners.outbound(error)
                save.outcome = .error(error)
                partialErrors.append(Wire.ItemError(item: save.recordID.map { .recordID($0) }, error: error))
            case .none:
                break
            }
            try await context.stream.emit(.modifyRecords(Wire.ModifyRecordsEvent(callback: .perRecordSave(save))))
        }
        for delete in result.deletes {
            var delete = delete
            delete.recordID = delete.recordID.map(context.owners.outbound)
            if let error = delete.error {
                delete.error = context.owners.outbound(error)
                partialErrors.append(Wire.ItemError(item: delete.recordID.map { .recordID($0) }, error: delete.error))
            }
            try await context.stream.emit(.modifyRecords(Wire.ModifyRecordsEvent(callback: .perRecordDelete(delete))))
        }
        return Self.completion(partialErrors: partialErrors, items: "records")
    }

    func fetchRecords(_ request: Wire.FetchRecordsRequest, _ context: Context) async throws -> OperationCompletion {
        if let refused = Self.tooManyItems(request.recordIDs.count) {
            return refused
        }
        let outcomes = try await self.storage.fetchRecords(
            request.recordIDs.map(context.owners.inbound),
            desiredKeys: request.desiredKeysSpecified ? request.desiredKeys : nil,
            in: context.database
        )
        var partialErrors: [Wire.ItemError] = []
        for outcome in outcomes {
            var outcome = outcome
            outcome.recordID = outcome.recordID.map(context.owners.outbound)
            switch outcome.outcome {
            case .record(let record):
                outcome.outcome = .record(context.owners.outbound(record))
            case .error(let error):
                outcome.outcome = .error(error)
                partialErrors.append(Wire.ItemError(item: outcome.recordID.map { .recordID($0) }, error: error))
            case .none:
                break
            }
            try await context.stream.emit(.fetchRecords(Wire.FetchRecordsEvent(callback: .perRecordResult(outcome))))
        }
        return Self.completion(partialErrors: partialErrors, items: "records")
    }
}
