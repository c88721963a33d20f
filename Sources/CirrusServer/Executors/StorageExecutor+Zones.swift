import CirrusStore
import CirrusWire

extension StorageExecutor {
    func modifyRecordZones(_ request: Wire.ModifyRecordZonesRequest, _ context: Context) async throws
        -> OperationCompletion
    {
        if let refused = Self.tooManyItems(request.recordZonesToSave.count + request.recordZoneIDsToDelete.count) {
            return refused
        }
        let result = try await self.storage.modifyZones(
            saving: request.recordZonesToSave.map(context.owners.inbound),
            deleting: request.recordZoneIDsToDelete.map(context.owners.inbound),
            in: context.database
        )
        var partialErrors: [Wire.ItemError] = []
        for save in result.saves {
            let outcome = self.outbound(save, context: context, errors: &partialErrors)
            try await context.stream.emit(.modifyRecordZones(Wire.ModifyRecordZonesEvent(callback: .perRecordZoneSave(outcome))))
        }
        for delete in result.deletes {
            var delete = delete
            delete.zoneID = delete.zoneID.map(context.owners.outbound)
            if let error = delete.error {
                partialErrors.append(Wire.ItemError(item: delete.zoneID.map { .zoneID($0) }, error: error))
            }
            try await context.stream.emit(
                .modifyRecordZones(Wire.ModifyRecordZonesEvent(callback: .perRecordZoneDelete(delete)))
            )
        }
        return Self.completion(partialErrors: partialErrors, items: "zones")
    }

    func fetchRecordZones(_ request: Wire.FetchRecordZonesRequest, _ context: Context) async throws
        -> OperationCompletion
    {
        let outcomes: [Wire.RecordZoneOutcome]
        if request.fetchAllRecordZones {
            outcomes = try await self.storage.fetchAllZones(in: context.database).map { zone in
                Wire.RecordZoneOutcome(zoneID: zone.zoneID, outcome: .zone(zone))
            }
        } else {
            if let refused = Self.tooManyItems(request.recordZoneIDs.count) {
                return refused
            }
            outcomes = try await self.storage.fetchZones(
                request.recordZoneIDs.map(context.owners.inbound),
                in: context.database
            )
        }
        var partialErrors: [Wire.ItemError] = []
        for outcome in outcomes {
            let outcome = self.outbound(outcome, context: context, errors: &partialErrors)
            try await context.stream.emit(
                .fetchRecordZones(Wire.FetchRecordZonesEvent(callback: .perRecordZoneResult(outcome)))
            )
        }
        return Self.completion(partialErrors: partialErrors, items: "zones")
    }

    private func outbound(
        _ outcome: Wire.RecordZoneOutcome,
        context: Context,
        errors: inout [Wire.ItemError]
    ) -> Wire.RecordZoneOutcome {
        var outcome = outcome
        outcome.zoneID = outcome.zoneID.map(context.owners.outbound)
        switch outcome.outcome {
        case .zone(let zone):
            outcome.outcome = .zone(context.owners.outbound(zone))
        case .error(let error):
            errors.append(Wire.ItemError(item: outcome.zoneID.map { .zoneID($0) }, error: error))
        case .none:
            break
        }
        return outcome
    }
}
