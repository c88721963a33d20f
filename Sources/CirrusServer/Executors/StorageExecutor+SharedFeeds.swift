import CirrusStore
import CirrusWire

/// Queries and change feeds of the shared database (see ``SharedAccess``): each checks the
/// caller's access when it runs, including when it continues from a cursor or a change token
/// made while the caller still had access.
extension StorageExecutor {
    /// A shared query's cursor: the owner and zone, then the store's cursor (sealed for the
    /// owner's database, so changing the owner or zone makes it unusable).
    static func sharedCursor(_ zone: SharedAccess.Zone, _ cursor: [UInt8]) -> [UInt8] {
        Array(zone.owner.utf8) + [0] + Array(zone.name.utf8) + [0] + cursor
    }

    static func openSharedCursor(_ bytes: [UInt8]) -> (SharedAccess.Zone, [UInt8])? {
        guard let first = bytes.firstIndex(of: 0), let second = bytes[(first + 1)...].firstIndex(of: 0) else { return nil }
        let owner = String(decoding: bytes[..<first], as: UTF8.self)
        let name = String(decoding: bytes[(first + 1)..<second], as: UTF8.self)
        return (SharedAccess.Zone(owner: owner, name: name), Array(bytes[(second + 1)...]))
    }

    func sharedQuery(_ request: Wire.QueryRequest, _ access: SharedAccess, _ context: Context) async throws
        -> OperationCompletion
    {
        if let checkpoint = context.checkpoint, checkpoint.isFinished {
            return .success(.query(Wire.QueryResult(cursor: checkpoint.cursor.map { Wire.QueryCursor(opaque: $0) })))
        }
        let limit = request.resultsLimit == 0 ? Self.defaultQueryResults : min(Int(request.resultsLimit), Self.maximumItems)
        let zone: SharedAccess.Zone
        let page: QueryPage
        switch request.start {
        case .query(let query):
            guard let named = access.zone(of: request.zoneID), access.permission(in: named) != nil else {
                return OperationCompletion(error: Self.noZone(request.zoneID ?? Wire.RecordZoneID(zoneName: "_defaultZone")))
            }
            zone = named
            page = try await storage.queryRecords(
                context.owners.inbound(query), in: Wire.RecordZoneID(zoneName: zone.name, ownerName: zone.owner),
                of: access.database(of: zone), desiredKeys: request.desiredKeysSpecified ? request.desiredKeys : nil,
                limit: limit)
        case .cursor(let cursor):
            let unknown = OperationCompletion.failure(.invalidArguments, "the query cursor is unknown or expired")
            guard let (named, inner) = Self.openSharedCursor(cursor.opaque), access.permission(in: named) != nil else {
                return unknown
            }
            zone = named
            do {
                page = try await storage.continueQuery(
                    inner, in: access.database(of: zone),
                    desiredKeys: request.desiredKeysSpecified ? .replaced(request.desiredKeys) : .sameAsQuery, limit: limit)
            } catch let error as StoreError where error.code == .invalidArguments {
                return unknown
            }
        case .none:
            return .failure(.invalidArguments, "a query request needs a query or a cursor")
        }
        let records = access.records(in: zone, storage: storage)
        var events: [Wire.Event.Payload] = []
        for (record, shared) in zip(page.records, try await records.shared(page.records)) where shared {
            let record = context.owners.outbound(record)
            let outcome = Wire.RecordOutcome(recordID: record.recordID, outcome: .record(record))
            events.append(.query(Wire.QueryEvent(callback: .recordMatched(outcome))))
        }
        let cursor = page.cursor.map { Self.sharedCursor(zone, $0) }
        try await context.emit(events, checkpoint: LongLivedCheckpoint(cursor: cursor, finished: true))
        return .success(.query(Wire.QueryResult(cursor: cursor.map { Wire.QueryCursor(opaque: $0) })))
    }

    /// Zone changes in the shared database: each zone as in a private database, read in its
    /// owner's database, with only the records shared with the caller; a zone they may not
    /// see fails as one that does not exist.
    func sharedZoneChanges(
        _ request: Wire.FetchRecordZoneChangesRequest, _ access: SharedAccess, _ context: Context
    ) async throws -> OperationCompletion {
        if let refused = Self.tooManyItems(request.zoneConfigurations.count) { return refused }
        var seen = Set<SharedAccess.Zone>()
        for configuration in request.zoneConfigurations {
            guard let zoneID = configuration.zoneID else {
                return .failure(.invalidArguments, "a zone configuration names no zone")
            }
            if let zone = access.zone(of: zoneID), !seen.insert(zone).inserted {
                return .failure(.invalidArguments, "zone \(zoneID.zoneName) is configured more than once")
            }
        }
        let fetchAll = request.fetchAllChanges ?? true
        let resumeAt = context.checkpoint?.zone ?? 0
        var partialErrors = context.priorErrors
        for (index, configuration) in request.zoneConfigurations.enumerated() where index >= resumeAt {
            let zoneID = configuration.zoneID ?? Wire.RecordZoneID()
            do {
                guard let zone = access.zone(of: zoneID), access.permission(in: zone) != nil else {
                    throw ZoneFeedFailure(error: Self.noZone(zoneID))
                }
                let inbound = Wire.RecordZoneID(zoneName: zone.name, ownerName: zone.owner)
                try await self.fetchChanges(
                    of: zoneID, inbound: inbound, configuration, fetchAll: fetchAll, index: index,
                    from: index == resumeAt ? context.checkpoint : nil, zoneContext(zone, access, context))
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

    /// Database changes in the shared database: the token remembers the zones the caller
    /// reached and their versions; a zone new or changed since is reported changed, one they
    /// no longer reach (removed, share deleted, zone deleted) deleted.
    func sharedDatabaseChanges(
        _ request: Wire.FetchDatabaseChangesRequest, _ access: SharedAccess, _ context: Context
    ) async throws -> OperationCompletion {
        var previous: [ChangeTokenSealer.SharedZoneVersion] = []
        if let token = request.previousServerChangeToken {
            do {
                previous = try self.tokens.openShared(token, in: context.database)
            } catch {
                return .failure(.invalidArguments, error.message)
            }
        }
        var current: [ChangeTokenSealer.SharedZoneVersion] = []
        for zone in access.zones {
            let head: RecordChangeBatch
            do {
                head = try await storage.recordChanges(
                    in: Wire.RecordZoneID(zoneName: zone.name, ownerName: zone.owner), of: access.database(of: zone),
                    since: 0, floor: 0, through: 0, limit: 1, desiredKeys: [])
            } catch let error as StoreError where error.code == .zoneNotFound {
                continue
            }
            current.append(ChangeTokenSealer.SharedZoneVersion(
                owner: zone.owner, zoneName: zone.name, incarnation: head.zoneIncarnation, seq: head.headSeq))
        }
        var events: [Wire.Event.Payload] = []
        func zoneID(_ version: ChangeTokenSealer.SharedZoneVersion) -> Wire.RecordZoneID {
            context.owners.outbound(Wire.RecordZoneID(zoneName: version.zoneName, ownerName: version.owner))
        }
        let before = Dictionary(previous.map { (SharedAccess.Zone(owner: $0.owner, name: $0.zoneName), $0) }, uniquingKeysWith: { a, _ in a })
        let now = Set(current.map { SharedAccess.Zone(owner: $0.owner, name: $0.zoneName) })
        for version in previous where !now.contains(SharedAccess.Zone(owner: version.owner, name: version.zoneName)) {
            events.append(.fetchDatabaseChanges(Wire.FetchDatabaseChangesEvent(callback: .recordZoneWithIDWasDeleted(zoneID(version)))))
        }
        for version in current where before[SharedAccess.Zone(owner: version.owner, name: version.zoneName)] != version {
            events.append(.fetchDatabaseChanges(Wire.FetchDatabaseChangesEvent(callback: .recordZoneWithIDChanged(zoneID(version)))))
        }
        let token = self.tokens.sealShared(current, in: context.database)
        try await context.emit(events, checkpoint: LongLivedCheckpoint(finished: true))
        return .success(.fetchDatabaseChanges(Wire.FetchDatabaseChangesResult(serverChangeToken: token, moreComing: false)))
    }
}
