import CirrusStore
import CirrusWire

extension StorageExecutor {
    nonisolated(nonsending) func modifyRecords(
        _ request: Wire.ModifyRecordsRequest, _ context: Context
    ) async throws -> OperationCompletion {
        if let run = context.run {
            return try await self.modifyRecords(request, context, journaledBy: run)
        }
        if let refused = Self.tooManyItems(request.recordsToSave.count + request.recordIDsToDelete.count) {
            return refused
        }
        var modification = await self.storingAssets(Self.modification(request), caller: context.caller)
        modification.recordsToSave = modification.recordsToSave.map(context.owners.inbound)
        modification.recordIDsToDelete = modification.recordIDsToDelete.map(context.owners.inbound)
        let result = try await self.storage.modifyRecords(
            modification,
            in: context.database,
            by: context.caller.userRecordName
        )
        // Consumed: the result's records are mapped in place, not copied.
        var payloads: [OperationStream.Payload] = []
        payloads.reserveCapacity(request.failuresOnly ? 0 : result.saves.count + result.deletes.count)
        var partialErrors: [Wire.ItemError] = []
        Self.modifyItems(
            consume result, context.owners, failuresOnly: request.failuresOnly,
            sent: request.omitFieldsAsSent ? request.recordsToSave[...] : nil,
            save: { save in
                // Each event goes straight to what is sent: no event is copied to be looked at.
                if case .error(let error)? = save.outcome {
                    partialErrors.append(Wire.ItemError(item: save.recordID.map { .recordID($0) }, error: error))
                } else if let encoded = save.directPayload {
                    payloads.append(.encoded(encoded))
                    return
                }
                payloads.append(.message(.modifyRecords(Wire.ModifyRecordsEvent(callback: .perRecordSave(save)))))
            },
            delete: { delete in
                if let error = delete.error {
                    partialErrors.append(Wire.ItemError(item: delete.recordID.map { .recordID($0) }, error: error))
                }
                payloads.append(.message(.modifyRecords(Wire.ModifyRecordsEvent(callback: .perRecordDelete(delete)))))
            })
        try await context.stream.emit(payloads: payloads)
        return Self.completion(partialErrors: partialErrors, items: "records")
    }

    /// A long-lived modify: any number of items, in chunks of at most ``maximumItems``, each
    /// chunk's writes and the events reporting them in one transaction. `isAtomic` holds per
    /// chunk (and, within it, per zone), and a record named twice is only caught within one
    /// chunk. After a restart it continues with the first item its journal does not report.
    private func modifyRecords(
        _ request: Wire.ModifyRecordsRequest, _ context: Context, journaledBy run: LongLivedRun
    ) async throws -> OperationCompletion {
        let modification = await self.storingAssets(Self.modification(request), caller: context.caller)
        let saves = modification.recordsToSave.map(context.owners.inbound)
        let deletes = modification.recordIDsToDelete.map(context.owners.inbound)
        let total = saves.count + deletes.count
        // One event per item: without a checkpoint the journal's length says as much.
        var done = min(context.checkpoint?.items ?? Int(clamping: run.lastSeq), total)
        var partialErrors = context.priorErrors
        let owners = context.owners
        let failuresOnly = request.failuresOnly
        repeat {
            try Task.checkCancellation()
            let end = min(done + Self.maximumItems, total)
            var chunk = modification
            chunk.recordsToSave = Array(saves[min(done, saves.count)..<min(end, saves.count)])
            chunk.refusals = [:]
            for (index, refusal) in modification.refusals where index >= done && index < end {
                chunk.refusals[index - done] = refusal
            }
            chunk.recordIDsToDelete = Array(deletes[max(done - saves.count, 0)..<max(end - saves.count, 0)])
            chunk.fieldEncodings = run.fieldEncodings.slice(min(done, saves.count)..<min(end, saves.count))
            let sent = request.omitFieldsAsSent
                ? request.recordsToSave[min(done, saves.count)..<min(end, saves.count)] : nil
            let events = try await run.modifyRecords(
                chunk, in: context.database,
                events: { Self.modifyEvents($0, owners, failuresOnly: failuresOnly, sent: sent) },
                checkpoint: LongLivedCheckpoint(items: end))
            partialErrors += events.compactMap { $0.payload.flatMap(LongLivedCheckpoint.itemError) }
            done = end
        } while done < total
        return Self.completion(partialErrors: partialErrors, items: "records")
    }

    /// The modification a wire request asks for (absent `is_atomic` = true), IDs as the
    /// client names them.
    static func modification(_ request: Wire.ModifyRecordsRequest) -> RecordModification {
        RecordModification(
            saving: request.recordsToSave,
            deleting: request.recordIDsToDelete,
            savePolicy: request.savePolicy,
            isAtomic: request.isAtomic ?? true,
            clientChangeToken: request.clientChangeToken
        )
    }

    /// The events reporting a modification, saves then deletes, in request order, as the
    /// client names things; with `failuresOnly`, only those of the items that failed.
    ///
    /// `sent` (the request's records, in the order of `result.saves`, when it asked for
    /// `omit_fields_as_sent`): a saved record whose fields go out exactly as that record sent
    /// them goes out without them, marked `fields_as_sent`.
    ///
    /// Saved records are moved out of `result` and mapped in place: passed a result no one
    /// else holds, no record is copied.
    static func modifyEvents(
        _ result: consuming RecordModificationResult, _ owners: ZoneOwnerMapping, failuresOnly: Bool,
        sent: ArraySlice<Wire.Record>? = nil
    ) -> [Wire.Event.Payload] {
        var events: [Wire.Event.Payload] = []
        events.reserveCapacity(failuresOnly ? 0 : result.saves.count + result.deletes.count)
        Self.modifyItems(
            consume result, owners, failuresOnly: failuresOnly, sent: sent,
            save: { events.append(.modifyRecords(Wire.ModifyRecordsEvent(callback: .perRecordSave($0)))) },
            delete: { events.append(.modifyRecords(Wire.ModifyRecordsEvent(callback: .perRecordDelete($0)))) })
        return events
    }

    /// The per-item events of ``modifyEvents(_:_:failuresOnly:sent:)``, each handed to `save` or
    /// `delete` in that order as it is made (for a caller that turns them into something else at
    /// once).
    static func modifyItems(
        _ result: consuming RecordModificationResult, _ owners: ZoneOwnerMapping, failuresOnly: Bool,
        sent: ArraySlice<Wire.Record>?,
        save: (consuming Wire.ModifyRecordsPerRecordSave) -> Void,
        delete: (consuming Wire.ModifyRecordsPerRecordDelete) -> Void
    ) {
        for index in result.saves.indices {
            if failuresOnly, case .success = result.saves[index].result { continue }
            // A closure, not `owners.outbound` itself: a method reference captures a copy of
            // `owners` (a retain of each of its strings) per call.
            let recordID = result.saves[index].id.map { owners.outbound($0) }
            // Moved out, leaving a shared empty record: the saved record's storage is then held
            // once, and mapping it writes in place.
            var taken: Result<Wire.Record, ItemFailure> = .success(Self.movedOut)
            swap(&taken, &result.saves[index].result)
            let outcome: Wire.ModifyRecordsPerRecordSave.Outcome
            var fieldsAsSent = false
            switch taken {
            case .success(var outbound):
                // Drops `taken`'s hold on the record: `outbound` is now its only holder.
                taken = .success(Self.movedOut)
                owners.mapOutbound(&outbound)
                if let sent, index < sent.count, Self.hasFieldsAsSent(outbound, sent[sent.startIndex + index]) {
                    outbound.fields = []
                    fieldsAsSent = true
                }
                outcome = .record(outbound)
            case .failure(let failure):
                outcome = .error(owners.outbound(failure))
            }
            // Made in the call, so it moves into `save`: an event built in a variable was copied.
            save(Wire.ModifyRecordsPerRecordSave(recordID: recordID, outcome: outcome, fieldsAsSent: fieldsAsSent))
        }
        for item in result.deletes where !failuresOnly || item.failure != nil {
            delete(
                Wire.ModifyRecordsPerRecordDelete(
                    recordID: owners.outbound(item.id), error: item.failure.map { owners.outbound($0) }))
        }
    }

    /// What ``modifyEvents(_:_:failuresOnly:sent:)`` leaves in a result in place of a record it
    /// took out: one value shared by all, so taking a record out allocates nothing.
    private static let movedOut = Wire.Record()

    /// Whether `saved` (as it goes out) is the record `sent` named, under the very ID and with
    /// the very fields it sent (so the client finds them by the ID it reads).
    private static func hasFieldsAsSent(_ saved: Wire.Record, _ sent: Wire.Record) -> Bool {
        saved.recordID == sent.recordID && saved.fields == sent.fields
    }

    func fetchRecords(_ request: Wire.FetchRecordsRequest, _ context: Context) async throws -> OperationCompletion {
        if let refused = Self.tooManyItems(request.recordIDs.count) {
            return refused
        }
        if let checkpoint = context.checkpoint, checkpoint.isFinished {
            return Self.completion(partialErrors: context.priorErrors, items: "records")
        }
        let outcomes = try await self.storage.fetchRecords(
            request.recordIDs.map(context.owners.inbound),
            desiredKeys: request.desiredKeysSpecified ? request.desiredKeys : nil,
            in: context.database
        )
        let events = outcomes.map { fetched -> Wire.Event.Payload in
            let outcome: Wire.RecordOutcome.Outcome =
                switch fetched.result {
                case .success(let record): .record(context.owners.outbound(record))
                case .failure(let failure): .error(context.owners.outbound(failure))
                }
            let event = Wire.RecordOutcome(recordID: context.owners.outbound(fetched.id), outcome: outcome)
            return .fetchRecords(Wire.FetchRecordsEvent(callback: .perRecordResult(event)))
        }
        try await context.emit(events, checkpoint: LongLivedCheckpoint(items: events.count, finished: true))
        return Self.completion(partialErrors: events.compactMap(LongLivedCheckpoint.itemError), items: "records")
    }
}
