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
            let outcome = self.outbound(save.id, save.result, context: context)
            events.append(.modifyRecordZones(Wire.ModifyRecordZonesEvent(callback: .perRecordZoneSave(outcome))))
        }
        for delete in result.deletes {
            let deleted = Wire.RecordZoneDeleted(
                zoneID: context.owners.outbound(delete.id), error: delete.failure.map(context.owners.outbound))
            events.append(.modifyRecordZones(Wire.ModifyRecordZonesEvent(callback: .perRecordZoneDelete(deleted))))
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
        let outcomes: [(zoneID: Wire.RecordZoneID?, result: Result<Wire.RecordZone, ItemFailure>)]
        if request.fetchAllRecordZones {
            outcomes = try await self.storage.fetchAllZones(in: context.database).map { ($0.zoneID, .success($0)) }
        } else {
            if let refused = Self.tooManyItems(request.recordZoneIDs.count) {
                return refused
            }
            outcomes = try await self.storage.fetchZones(
                request.recordZoneIDs.map(context.owners.inbound),
                in: context.database
            ).map { ($0.id, $0.result) }
        }
        let events = outcomes.map { outcome -> Wire.Event.Payload in
            .fetchRecordZones(Wire.FetchRecordZonesEvent(
                callback: .perRecordZoneResult(self.outbound(outcome.zoneID, outcome.result, context: context))))
        }
        try await context.emit(events, checkpoint: LongLivedCheckpoint(items: events.count, finished: true))
        return Self.completion(partialErrors: events.compactMap(LongLivedCheckpoint.itemError), items: "zones")
    }

    /// A zone saved or fetched (or why not) as the client sees it.
    private func outbound(
        _ zoneID: Wire.RecordZoneID?, _ result: Result<Wire.RecordZone, ItemFailure>, context: Context
    ) -> Wire.RecordZoneOutcome {
        let outcome: Wire.RecordZoneOutcome.Outcome =
            switch result {
            case .success(let zone): .zone(context.owners.outbound(zone))
            case .failure(let failure): .error(context.owners.outbound(failure))
            }
        return Wire.RecordZoneOutcome(zoneID: zoneID.map(context.owners.outbound), outcome: outcome)
    }
}
