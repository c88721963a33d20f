import CirrusStore
import CirrusWire

extension StorageExecutor {
    /// Changes read per batch when the request leaves `results_limit` at 0, and the most any
    /// batch reads (a larger limit is served in batches of this size, `moreComing` set).
    public static let changesBatchSize = 400

    /// CKFetchRecordZoneChangesOperation: for each zone in request order, its changed records
    /// and deletions after the zone's token, then a token update per further batch (when
    /// fetching all changes) and one `recordZoneFetchResult`. A zone that fails (unknown,
    /// deleted, token expired or not this zone's) gets its error in its result and the
    /// operation ends with `partialFailure`; the other zones are unaffected.
    ///
    /// A fetch reads each zone up to the sequence it had when the zone's first batch was read,
    /// so a record changed while the fetch pages is reported once, by the next fetch, in its
    /// newest state.
    func fetchRecordZoneChanges(_ request: Wire.FetchRecordZoneChangesRequest, _ context: Context) async throws
        -> OperationCompletion
    {
        if let refused = Self.refusedInPublicDatabase("fetching record zone changes", context) { return refused }
        if let refused = Self.tooManyItems(request.zoneConfigurations.count) { return refused }
        var zones: [(outbound: Wire.RecordZoneID, inbound: Wire.RecordZoneID, Wire.ZoneChangesConfiguration)] = []
        var seen = Set<Wire.RecordZoneID>()
        for configuration in request.zoneConfigurations {
            guard let zoneID = configuration.zoneID else {
                return .failure(.invalidArguments, "a zone configuration names no zone")
            }
            let inbound = context.owners.inbound(zoneID)
            guard seen.insert(inbound).inserted else {
                return .failure(.invalidArguments, "zone \(zoneID.zoneName) is configured more than once")
            }
            zones.append((zoneID, inbound, configuration))
        }
        let fetchAll = request.fetchAllChanges ?? true
        // A long-lived fetch continues after a restart in the zone and at the position of its
        // last journaled batch.
        let resumeAt = context.checkpoint?.zone ?? 0
        var partialErrors = context.priorErrors
        for (index, (zoneID, inbound, configuration)) in zones.enumerated() where index >= resumeAt {
            let position = index == resumeAt ? context.checkpoint : nil
            do {
                try await self.fetchChanges(
                    of: zoneID, inbound: inbound, configuration, fetchAll: fetchAll, index: index, from: position,
                    context)
            } catch let failure as ZoneFeedFailure {
                partialErrors.append(Wire.ItemError(item: .zoneID(zoneID), error: failure.error))
                let result = Wire.RecordZoneFetchResult(zoneID: zoneID, outcome: .error(failure.error))
                try await context.emit(
                    [.fetchRecordZoneChanges(Wire.FetchRecordZoneChangesEvent(callback: .recordZoneFetchResult(result)))],
                    checkpoint: LongLivedCheckpoint(zone: index + 1))
            }
        }
        return Self.completion(partialErrors: partialErrors, items: "zones")
    }

    /// Why one zone of a zone-changes fetch failed.
    struct ZoneFeedFailure: Error {
        let error: Wire.OperationError
    }

    func fetchChanges(
        of zoneID: Wire.RecordZoneID,
        inbound: Wire.RecordZoneID,
        _ configuration: Wire.ZoneChangesConfiguration,
        fetchAll: Bool,
        index: Int,
        from position: LongLivedCheckpoint?,
        _ context: Context
    ) async throws {
        let feed = ChangeTokenSealer.Feed.zone(inbound.zoneName)
        var since: Int64 = 0
        var floor: Int64?
        var incarnation: Int64?
        var through: Int64?
        if let position, let resumedSince = position.since {
            since = resumedSince
            floor = position.floor
            incarnation = position.incarnation
            through = position.through
        } else if let token = configuration.previousServerChangeToken {
            do {
                let position = try self.tokens.open(token, feed, in: context.database)
                since = position.seq
                floor = position.floor
                incarnation = position.incarnation
            } catch {
                throw ZoneFeedFailure(error: Wire.OperationError(code: .invalidArguments, message: error.message))
            }
        }
        let desiredKeys = configuration.desiredKeysSpecified ? configuration.desiredKeys : nil
        // Records go out as the store keeps them where nothing of them changes but their IDs'
        // owners, renamed in the bytes: every key, no participant's filter, no journal (which
        // keeps decoded events), and an owner to rename (not the public database's "").
        let renaming =
            desiredKeys == nil && context.sharedRecords == nil && context.run == nil
            ? context.owners.serializedRecordRenaming : nil
        while true {
            // Fewer at a time when many streams share the connection (memory per connection).
            let limit = context.stream.batchLimit(Self.batchSize(configuration.resultsLimit))
            let batch: StoredRecordChangeBatch
            do {
                if renaming != nil {
                    batch = try await self.storage.storedRecordChanges(
                        in: inbound, of: context.database, since: since, floor: floor ?? 0, through: through,
                        limit: limit)
                } else {
                    batch = try await self.storage.recordChanges(
                        in: inbound, of: context.database, since: since, floor: floor ?? 0, through: through,
                        limit: limit, desiredKeys: desiredKeys
                    ).mapChanged(StoredRecord.decoded)
                }
            } catch let error as StoreError where [.zoneNotFound, .changeTokenExpired].contains(error.code) {
                throw ZoneFeedFailure(error: error.operationError)
            }
            if since > 0, let incarnation, incarnation != batch.zoneIncarnation {
                throw ZoneFeedFailure(
                    error: Wire.OperationError(
                        code: .changeTokenExpired,
                        message: "zone \(zoneID.zoneName) was deleted and created again after this change token"))
            }
            through = through ?? batch.headSeq
            // A fetch from the beginning holds none of the records whose tombstones were
            // already pruned: its positions stay valid down to that point.
            floor = floor ?? batch.prunedSeq
            incarnation = batch.zoneIncarnation
            var events: [OperationStream.Payload] = []
            events.reserveCapacity(batch.changed.count + batch.deleted.count + 1)
            func changed(_ record: Wire.Record) -> OperationStream.Payload {
                let record = context.owners.outbound(record)
                let outcome = Wire.RecordOutcome(recordID: record.recordID, outcome: .record(record))
                return .message(
                    .fetchRecordZoneChanges(Wire.FetchRecordZoneChangesEvent(callback: .recordWasChanged(outcome))))
            }
            if let sharedRecords = context.sharedRecords {
                // A participant's batch is filtered at once: parents read once for all its records.
                let records = try batch.changed.map { try $0.decoded() }
                let shared = try await sharedRecords.shared(records)
                for (position, record) in records.enumerated() where shared[position] {
                    events.append(changed(record))
                }
            } else {
                for record in batch.changed {
                    if case .serialized(let stored) = record, let renaming,
                        let payload = stored.recordWasChangedPayload(renaming)
                    {
                        events.append(.encoded(payload))
                    } else {
                        events.append(changed(try record.decoded()))
                    }
                }
            }
            // A participant hears only of deletions of records that were in a share they reach.
            for tombstone in batch.deleted
            where context.sharedRecords.map({ !$0.shareNames.isDisjoint(with: tombstone.sharedBy) }) ?? true {
                let deleted = Wire.RecordDeleted(
                    recordID: context.owners.outbound(tombstone.recordID), recordType: tombstone.recordType)
                events.append(
                    .message(
                        .fetchRecordZoneChanges(
                            Wire.FetchRecordZoneChangesEvent(callback: .recordWithIDWasDeleted(deleted)))))
            }
            let token = self.tokens.seal(
                feed, in: context.database, incarnation: batch.zoneIncarnation, seq: batch.lastSeq, floor: floor ?? 0)
            since = batch.lastSeq
            if batch.moreComing && fetchAll {
                let update = Wire.RecordZoneChangeTokensUpdated(
                    zoneID: zoneID, serverChangeToken: token, clientChangeToken: batch.clientChangeToken)
                events.append(
                    .message(
                        .fetchRecordZoneChanges(
                            Wire.FetchRecordZoneChangesEvent(callback: .recordZoneChangeTokensUpdated(update)))))
                try await context.emit(
                    events,
                    checkpoint: LongLivedCheckpoint(
                        zone: index, since: since, floor: floor, through: through, incarnation: incarnation))
                continue
            }
            let success = Wire.RecordZoneFetchSuccess(
                serverChangeToken: token, clientChangeToken: batch.clientChangeToken, moreComing: batch.moreComing)
            let result = Wire.RecordZoneFetchResult(zoneID: zoneID, outcome: .success(success))
            events.append(
                .message(
                    .fetchRecordZoneChanges(Wire.FetchRecordZoneChangesEvent(callback: .recordZoneFetchResult(result)))))
            try await context.emit(events, checkpoint: LongLivedCheckpoint(zone: index + 1))
            return
        }
    }

    /// CKFetchDatabaseChangesOperation: zones changed and deleted after the token, a token
    /// update between batches (when fetching all changes), and the final token in the
    /// completion. A token from another database or user is refused with `invalidArguments`,
    /// one older than the retained zone deletions with `changeTokenExpired`.
    func fetchDatabaseChanges(_ request: Wire.FetchDatabaseChangesRequest, _ context: Context) async throws
        -> OperationCompletion
    {
        if let refused = Self.refusedInPublicDatabase("fetching database changes", context) { return refused }
        var since: Int64 = 0
        var floor: Int64?
        var through: Int64?
        if let position = context.checkpoint, let resumedSince = position.since {
            since = resumedSince
            floor = position.floor
            through = position.through
            if position.isFinished {
                let token = self.tokens.seal(
                    .database, in: context.database, incarnation: 0, seq: since, floor: floor ?? 0)
                return .success(
                    .fetchDatabaseChanges(
                        Wire.FetchDatabaseChangesResult(serverChangeToken: token, moreComing: position.moreComing ?? false)))
            }
        } else if let token = request.previousServerChangeToken {
            do {
                let position = try self.tokens.open(token, .database, in: context.database)
                since = position.seq
                floor = position.floor
            } catch {
                return .failure(.invalidArguments, error.message)
            }
        }
        let limit = Self.batchSize(request.resultsLimit)
        let fetchAll = request.fetchAllChanges ?? true
        while true {
            let batch = try await self.storage.zoneChanges(
                in: context.database, since: since, floor: floor ?? 0, through: through, limit: limit)
            through = through ?? batch.headSeq
            floor = floor ?? batch.prunedSeq
            // In feed order: a zone deleted and created again is reported deleted, then changed.
            var events = batch.entries.map { entry -> Wire.Event.Payload in
                let zoneID = context.owners.outbound(entry.zoneID)
                let callback: Wire.FetchDatabaseChangesEvent.Callback =
                    entry.wasDeleted ? .recordZoneWithIDWasDeleted(zoneID) : .recordZoneWithIDChanged(zoneID)
                return .fetchDatabaseChanges(Wire.FetchDatabaseChangesEvent(callback: callback))
            }
            let token = self.tokens.seal(
                .database, in: context.database, incarnation: 0, seq: batch.lastSeq, floor: floor ?? 0)
            since = batch.lastSeq
            if batch.moreComing && fetchAll {
                events.append(.fetchDatabaseChanges(Wire.FetchDatabaseChangesEvent(callback: .changeTokenUpdated(token))))
                try await context.emit(events, checkpoint: LongLivedCheckpoint(since: since, floor: floor, through: through))
                continue
            }
            try await context.emit(
                events,
                checkpoint: LongLivedCheckpoint(
                    since: since, floor: floor, through: through, moreComing: batch.moreComing, finished: true))
            return .success(
                .fetchDatabaseChanges(
                    Wire.FetchDatabaseChangesResult(serverChangeToken: token, moreComing: batch.moreComing)))
        }
    }

    static func batchSize(_ resultsLimit: UInt32) -> Int {
        resultsLimit == 0 ? Self.changesBatchSize : min(Int(resultsLimit), Self.changesBatchSize)
    }

    /// CloudKit has no change feeds in the public database.
    static func refusedInPublicDatabase(_ what: String, _ context: Context) -> OperationCompletion? {
        guard context.database.scope == .public else { return nil }
        return .failure(.invalidArguments, "\(what) is not supported in the public database")
    }
}
