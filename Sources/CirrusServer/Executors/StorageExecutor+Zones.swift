import CirrusStore
import CirrusWire

extension StorageExecutor {
    func modifyRecordZones(_ request: Wire.ModifyRecordZonesRequest, _ context: Context) async throws
        -> OperationCompletion
    {
        if let refused = Self.tooManyItems(request.recordZonesToSave.count + request.recordZoneIDsToDelete.count) {
            return refused
        }
        if let checkpoint = context.checkpoint, checkpoint.isFinished {
            return Self.completion(partialErrors: context.priorErrors, items: "zones")
        }
        let result = try await self.storage.modifyZones(
            saving: request.recordZonesToSave.map(context.owners.inbound),
            deleting: request.recordZoneIDsToDelete.map(context.owners.inbound),
            in: context.database
        )
        var events: [Wire.Event.Payload] = []
        for save in result.saves {
            let outcome = self.outbound(save, context: context)
            events.append(.modifyRecordZones(Wire.ModifyRecordZonesEvent(callback: .perRecordZoneSave(outcome))))
        }
        for delete in result.deletes {
            var delete = delete
            delete.zoneID = delete.zoneID.map(context.owners.outbound)
            events.append(.modifyRecordZones(Wire.ModifyRecordZonesEvent(callback: .perRecordZoneDelete(delete))))
        }
        try await context.emit(events, checkpoint: LongLivedCheckpoint(items: events.count, finished: true))
        return Self.completion(partialErrors: events.compactMap(LongLivedCheckpoint.itemError), items: "zones")
    }

    func fetchRecordZones(_ request: Wire.FetchRecordZonesRequest, _ context: Context) async throws
        -> OperationCompletion
    {
        if let checkpoint = context.checkpoint, checkpoint.isFinished {
            return Self.completion(partialErrors: context.priorErrors, items: "zones")
        }
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
        let events = outcomes.map { outcome -> Wire.Event.Payload in
            .fetchRecordZones(
                Wire.FetchRecordZonesEvent(callback: .perRecordZoneResult(self.outbound(outcome, context: context))))
        }
        try await context.emit(events, checkpoint: LongLivedCheckpoint(items: events.count, finished: true))
        return Self.completion(partialErrors: events.compactMap(LongLivedCheckpoint.itemError), items: "zones")
    }

    private func outbound(_ outcome: Wire.RecordZoneOutcome, context: Context) -> Wire.RecordZoneOutcome {
        var outcome = outcome
        outcome.zoneID = outcome.zoneID.map(context.owners.outbound)
        if case .zone(let zone) = outcome.outcome {
            outcome.outcome = .zone(context.owners.outbound(zone))
        }
        return outcome
    }
}
