import CirrusStore
import CirrusWire

/// The shared database: the zones of other users' shares the caller accepted, read and (with
/// read-write permission) written in their owners' private databases, every request checked
/// against ``SharedAccess`` when it runs. Zone IDs carry the owner's user record name.
///
/// A zone or record the caller may not see gets the error of one that does not exist
/// (`zoneNotFound`, `unknownItem`); a write the caller's permission does not allow gets
/// `permissionFailure`.
extension StorageExecutor {
    /// Whether the shared database runs `request` here (other kinds run as in any database).
    static func runsInSharedDatabase(_ request: Wire.Open.Request) -> Bool {
        switch request {
        case .fetchRecordZones, .fetchRecords, .query, .modifyRecords, .fetchRecordZoneChanges, .fetchDatabaseChanges,
            .modifyRecordZones:
            true
        default:
            false
        }
    }

    func runShared(_ request: Wire.Open.Request, _ context: Context) async throws -> OperationCompletion {
        let access = try await SharedAccess.load(
            storage, caller: context.caller.userRecordName, container: context.database.container, cache: sharedAccess)
        let shared = Context(
            database: context.database, caller: context.caller, owners: shareMapping(for: context.caller),
            stream: context.stream, run: context.run)
        switch request {
        case .fetchRecordZones(let request): return try await sharedFetchZones(request, access, shared)
        case .fetchRecords(let request): return try await sharedFetchRecords(request, access, shared)
        case .query(let request): return try await sharedQuery(request, access, shared)
        case .modifyRecords(let request): return try await sharedModifyRecords(request, access, shared)
        case .fetchRecordZoneChanges(let request): return try await sharedZoneChanges(request, access, shared)
        case .fetchDatabaseChanges(let request): return try await sharedDatabaseChanges(request, access, shared)
        case .modifyRecordZones(let request): return sharedModifyZones(request)
        default: return Self.refusal(of: request)
        }
    }

    /// The context of one shared zone: its owner's database, the caller's view of owners, and
    /// the filter of the records shared with the caller.
    func zoneContext(_ zone: SharedAccess.Zone, _ access: SharedAccess, _ context: Context) -> Context {
        var zoneContext = Context(
            database: access.database(of: zone), caller: context.caller, owners: context.owners, stream: context.stream,
            run: context.run)
        zoneContext.sharedRecords = access.records(in: zone, storage: storage)
        return zoneContext
    }

    static func noZone(_ zoneID: Wire.RecordZoneID?) -> Wire.OperationError {
        Wire.OperationError(code: .zoneNotFound, message: "zone \(zoneID?.zoneName ?? "") does not exist")
    }

    static func noRecord(_ recordID: Wire.RecordID) -> Wire.OperationError {
        Wire.OperationError(code: .unknownItem, message: "record \(recordID.recordName) does not exist")
    }

    // MARK: Zones

    private func sharedFetchZones(
        _ request: Wire.FetchRecordZonesRequest, _ access: SharedAccess, _ context: Context
    ) async throws -> OperationCompletion {
        let wanted: [(Wire.RecordZoneID, SharedAccess.Zone?)]
        if request.fetchAllRecordZones {
            wanted = access.zones.map { (Wire.RecordZoneID(zoneName: $0.name, ownerName: $0.owner), $0) }
        } else {
            if let refused = Self.tooManyItems(request.recordZoneIDs.count) { return refused }
            wanted = request.recordZoneIDs.map { zoneID in
                (zoneID, access.zone(of: zoneID).flatMap { access.permission(in: $0) == nil ? nil : $0 })
            }
        }
        var events: [Wire.Event.Payload] = []
        for (zoneID, zone) in wanted {
            var outcome = Wire.RecordZoneOutcome(zoneID: zoneID)
            if let zone,
                case .success(let found)? = try await storage.fetchZones(
                    [Wire.RecordZoneID(zoneName: zone.name, ownerName: zone.owner)], in: access.database(of: zone)
                ).first?.result
            {
                outcome.outcome = .zone(context.owners.outbound(found))
            } else {
                outcome.outcome = .error(Self.noZone(zoneID))
            }
            events.append(.fetchRecordZones(Wire.FetchRecordZonesEvent(callback: .perRecordZoneResult(outcome))))
        }
        try await context.emit(events, checkpoint: LongLivedCheckpoint(items: events.count, finished: true))
        return Self.completion(partialErrors: events.compactMap(LongLivedCheckpoint.itemError), items: "zones")
    }

    /// Zones are not created in the shared database; a participant leaves a share by
    /// deleting the share record, not the zone.
    private func sharedModifyZones(_ request: Wire.ModifyRecordZonesRequest) -> OperationCompletion {
        if request.recordZonesToSave.isEmpty && request.recordZoneIDsToDelete.isEmpty { return .success() }
        return .failure(.permissionFailure, "zones are not created or deleted in the shared database")
    }

    // MARK: Records

    private func sharedFetchRecords(
        _ request: Wire.FetchRecordsRequest, _ access: SharedAccess, _ context: Context
    ) async throws -> OperationCompletion {
        if let refused = Self.tooManyItems(request.recordIDs.count) { return refused }
        // One read per zone, not per record.
        var outcomes = [Wire.RecordOutcome.Outcome?](repeating: nil, count: request.recordIDs.count)
        var byZone: [SharedAccess.Zone: [Int]] = [:]
        var zones: [SharedAccess.Zone] = []
        for (index, recordID) in request.recordIDs.enumerated() {
            guard let zone = access.zone(of: recordID.zoneID), access.permission(in: zone) != nil else {
                outcomes[index] = .error(Self.noZone(recordID.zoneID))
                continue
            }
            if byZone[zone] == nil { zones.append(zone) }
            byZone[zone, default: []].append(index)
        }
        for zone in zones {
            let indices = byZone[zone] ?? []
            let records = access.records(in: zone, storage: storage)
            let fetched = try await storage.fetchRecords(
                indices.map { context.owners.inbound(request.recordIDs[$0]) },
                desiredKeys: request.desiredKeysSpecified ? request.desiredKeys : nil, in: access.database(of: zone))
            // The records found are filtered together: a parent among them is not read again,
            // the others a level at a time.
            var foundIndices: [Int] = []
            var foundRecords: [Wire.Record] = []
            for (position, index) in indices.enumerated() {
                outcomes[index] = .error(Self.noRecord(request.recordIDs[index]))
                if position < fetched.count, case .success(let record) = fetched[position].result {
                    foundIndices.append(index)
                    foundRecords.append(record)
                }
            }
            let shared = try await records.shared(foundRecords)
            for position in foundRecords.indices where shared[position] {
                outcomes[foundIndices[position]] = .record(context.owners.outbound(foundRecords[position]))
            }
        }
        let events = zip(request.recordIDs, outcomes).map { recordID, outcome -> Wire.Event.Payload in
            .fetchRecords(Wire.FetchRecordsEvent(callback: .perRecordResult(Wire.RecordOutcome(recordID: recordID, outcome: outcome))))
        }
        try await context.emit(events, checkpoint: LongLivedCheckpoint(items: events.count, finished: true))
        return Self.completion(partialErrors: events.compactMap(LongLivedCheckpoint.itemError), items: "records")
    }

    private func sharedModifyRecords(
        _ request: Wire.ModifyRecordsRequest, _ access: SharedAccess, _ context: Context
    ) async throws -> OperationCompletion {
        if let refused = Self.tooManyItems(request.recordsToSave.count + request.recordIDsToDelete.count) { return refused }
        // Every item is checked first; the allowed ones of each owner go to the store together.
        var saveEvents = [Wire.Event.Payload?](repeating: nil, count: request.recordsToSave.count)
        var deleteEvents = [Wire.Event.Payload?](repeating: nil, count: request.recordIDsToDelete.count)
        var byOwner: [String: (saves: [Int], deletes: [Int], refusals: [Int: ItemFailure])] = [:]
        var owners: [String] = []
        // Which records are in the shares the caller may change is checked by the store, in the
        // write's transaction, against the records as stored (``RecordModification/sharedScope``).
        var scopes: [String: [String: Set<String>]] = [:]
        for (index, record) in request.recordsToSave.enumerated() {
            guard let zone = access.zone(of: record.recordID?.zoneID), access.permission(in: zone) != nil else {
                saveEvents[index] = .modifyRecords(Wire.ModifyRecordsEvent(callback: .perRecordSave(
                    Wire.ModifyRecordsPerRecordSave(recordID: record.recordID, outcome: .error(Self.noZone(record.recordID?.zoneID))))))
                continue
            }
            if byOwner[zone.owner] == nil { owners.append(zone.owner) }
            byOwner[zone.owner, default: ([], [], [:])].saves.append(index)
            scopes[zone.owner, default: [:]][zone.name] = access.writableShares(in: zone)
            if let refusal = sharedWriteRefusal(saving: record, zone, access) {
                byOwner[zone.owner]?.refusals[index] = refusal
            }
        }
        for (index, recordID) in request.recordIDsToDelete.enumerated() {
            guard let zone = access.zone(of: recordID.zoneID), let permission = access.permission(in: zone) else {
                deleteEvents[index] = .modifyRecords(Wire.ModifyRecordsEvent(callback: .perRecordDelete(
                    Wire.ModifyRecordsPerRecordDelete(recordID: recordID, error: Self.noZone(recordID.zoneID)))))
                continue
            }
            let records = access.records(in: zone, storage: storage)
            if records.shareNames.contains(recordID.recordName) {
                // A participant deleting the share from their shared database leaves it.
                let left = try await storage.leaveShare(
                    recordID.recordName, inZone: zone.name, of: zone.owner, in: access.container, by: access.caller)
                deleteEvents[index] = .modifyRecords(Wire.ModifyRecordsEvent(callback: .perRecordDelete(
                    Wire.ModifyRecordsPerRecordDelete(recordID: recordID, error: left ? nil : Self.noRecord(recordID)))))
                continue
            }
            guard permission == .readWrite else {
                let message = Self.notYours(recordID.recordName)
                deleteEvents[index] = .modifyRecords(Wire.ModifyRecordsEvent(callback: .perRecordDelete(
                    Wire.ModifyRecordsPerRecordDelete(
                        recordID: recordID, error: Wire.OperationError(code: .permissionFailure, message: message)))))
                continue
            }
            if byOwner[zone.owner] == nil { owners.append(zone.owner) }
            byOwner[zone.owner, default: ([], [], [:])].deletes.append(index)
            scopes[zone.owner, default: [:]][zone.name] = access.writableShares(in: zone)
        }
        for owner in owners {
            guard let items = byOwner[owner] else { continue }
            var modification = RecordModification(
                saving: items.saves.map { context.owners.inbound(request.recordsToSave[$0]) },
                deleting: items.deletes.map { context.owners.inbound(request.recordIDsToDelete[$0]) },
                savePolicy: request.savePolicy, isAtomic: request.isAtomic ?? true,
                clientChangeToken: request.clientChangeToken)
            modification.sharedScope = scopes[owner] ?? [:]
            for (position, index) in items.saves.enumerated() {
                if let refusal = items.refusals[index] { modification.refusals[position] = refusal }
            }
            // Assets as in the private database: uploads resolved for the caller, inline
            // contents written to the asset store (records refused already are left alone).
            modification = await self.storingAssets(modification, caller: context.caller)
            let database = DatabaseKey.private(container: access.container, user: owner)
            let result = try await storage.modifyRecords(modification, in: database, by: access.caller)
            // Every item's event, to put them back in request order; `failures_only` is
            // applied below.
            let events = Self.modifyEvents(consume result, context.owners, failuresOnly: false)
            for (position, index) in items.saves.enumerated() { saveEvents[index] = events[position] }
            for (position, index) in items.deletes.enumerated() { deleteEvents[index] = events[items.saves.count + position] }
        }
        let reported = (saveEvents + deleteEvents).compactMap { $0 }
        let events = request.failuresOnly ? reported.filter { LongLivedCheckpoint.itemError(of: $0) != nil } : reported
        try await context.emit(events, checkpoint: LongLivedCheckpoint(items: reported.count, finished: true))
        return Self.completion(partialErrors: events.compactMap(LongLivedCheckpoint.itemError), items: "records")
    }

    /// The refusal of a write to a record that is not part of a share the caller may change
    /// (the same whether the record exists or not).
    static func notYours(_ name: String) -> String {
        "record \(name) is not part of a share you may change"
    }

    /// Why the caller may not save `record` in `zone` of their shared database (which they may
    /// see), as far as is known without the store: read-only permission, or a share record.
    /// Whether the record is in a share they may change (an existing shared record, a new one
    /// whose parent is shared, any in a zone shared whole) the store checks as it writes.
    private func sharedWriteRefusal(
        saving record: Wire.Record, _ zone: SharedAccess.Zone, _ access: SharedAccess
    ) -> ItemFailure? {
        let name = record.recordID?.recordName ?? ""
        guard access.permission(in: zone) == .readWrite else {
            return ItemFailure(.permissionFailure, "you may read the records of this share, not change them")
        }
        if record.recordType == "cloudkit.share" || access.shares(in: zone).contains(where: { $0.recordName == name }) {
            return ItemFailure(.permissionFailure, "only the owner changes a share")
        }
        return nil
    }
}
