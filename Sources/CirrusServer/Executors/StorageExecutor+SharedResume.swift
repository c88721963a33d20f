import CirrusStore
import CirrusWire

/// Long-lived operations of the shared database, followed again (`Resume`, its journal
/// replay, `fetchLongLivedOperation(withID:)`): the caller's access is checked again then, as
/// at every request, and per share, so a participant removed since from the share an
/// operation is about (or whose share was deleted) reads nothing more of what it journaled,
/// even while another share still shows them the zone.
extension StorageExecutor {
    /// Whether `caller` may still follow `open`: they still reach every shared zone its
    /// request names (or, naming none, that its journal revealed), and every record its
    /// journal revealed — its content, or its deletion — is still in a share they have.
    /// Operations of other databases are always theirs to follow.
    public func mayFollow(
        _ open: Wire.Open, caller: ClientIdentity, journaled: () async throws -> [Wire.Event.Payload]
    ) async throws -> Bool {
        guard open.databaseScope == .shared, let request = open.request, Self.runsInSharedDatabase(request) else {
            return true
        }
        let access = try await SharedAccess.load(
            storage, caller: caller.userRecordName, container: open.containerIdentifier, cache: sharedAccess)
        let events = try await journaled()
        let zoneIDs = Self.zonesNamed(by: request) ?? Self.zonesRevealed(in: events)
        guard zoneIDs.allSatisfy({ access.zone(of: $0).flatMap { access.permission(in: $0) } != nil }) else {
            return false
        }
        return try await stillShared(Self.recordsRevealed(in: events), access)
    }

    /// What events revealed of records, by zone: their content (with the parent chain they
    /// had then), or only that they were deleted.
    struct RevealedRecords {
        var records: [Wire.Record] = []
        var deletions: [Wire.RecordID] = []
    }

    static func recordsRevealed(in events: [Wire.Event.Payload]) -> [Wire.RecordZoneID: RevealedRecords] {
        var revealed: [Wire.RecordZoneID: RevealedRecords] = [:]
        func content(_ outcome: Wire.RecordOutcome.Outcome?) {
            if case .record(let record)? = outcome {
                revealed[record.recordID?.zoneID ?? Wire.RecordZoneID(), default: RevealedRecords()].records.append(record)
            }
        }
        func deletion(_ recordID: Wire.RecordID?) {
            guard let recordID else { return }
            revealed[recordID.zoneID ?? Wire.RecordZoneID(), default: RevealedRecords()].deletions.append(recordID)
        }
        for payload in events {
            switch payload {
            case .fetchRecords(let event):
                if case .perRecordResult(let outcome)? = event.callback { content(outcome.outcome) }
            case .query(let event):
                if case .recordMatched(let outcome)? = event.callback { content(outcome.outcome) }
            case .modifyRecords(let event):
                switch event.callback {
                case .perRecordSave(let save)?:
                    if case .record(let record)? = save.outcome { content(.record(record)) }
                case .perRecordDelete(let delete)? where delete.error == nil:
                    deletion(delete.recordID)
                default:
                    break
                }
            case .fetchRecordZoneChanges(let event):
                switch event.callback {
                case .recordWasChanged(let outcome)?: content(outcome.outcome)
                case .recordWithIDWasDeleted(let deleted)?: deletion(deleted.recordID)
                default: break
                }
            default:
                break
            }
        }
        return revealed
    }

    /// Whether every record `revealed` is in a share the caller has now: a record whose
    /// content was revealed by its parent chain as revealed (the parents above it as stored);
    /// a deleted one as stored if it exists again, else by the shares its tombstone names.
    func stillShared(_ revealed: [Wire.RecordZoneID: RevealedRecords], _ access: SharedAccess) async throws -> Bool {
        for (zoneID, items) in revealed {
            guard let zone = access.zone(of: zoneID), access.permission(in: zone) != nil else { return false }
            let shared = access.records(in: zone, storage: storage)
            if shared.isZoneWide { continue }
            guard try await shared.shared(items.records).allSatisfy({ $0 }) else { return false }
            let deleted = items.deletions.map(\.recordName)
            guard !deleted.isEmpty else { continue }
            let stored = try await shared.records(named: deleted)
            guard try await shared.shared(Array(stored.values)).allSatisfy({ $0 }) else { return false }
            let gone = deleted.filter { stored[$0] == nil }
            guard !gone.isEmpty else { continue }
            let sharedBy = try await storage.sharesOfDeletedRecords(
                gone, inZone: zone.name, of: zone.owner, in: access.container)
            guard gone.allSatisfy({ !shared.shareNames.isDisjoint(with: sharedBy[$0] ?? []) }) else { return false }
        }
        return true
    }

    /// The zones a shared-database request names; nil for a request that names none.
    static func zonesNamed(by request: Wire.Open.Request) -> [Wire.RecordZoneID]? {
        switch request {
        case .fetchRecordZones(let request):
            return request.fetchAllRecordZones ? nil : request.recordZoneIDs
        case .fetchRecords(let request):
            return request.recordIDs.map { $0.zoneID ?? Wire.RecordZoneID() }
        case .modifyRecords(let request):
            return request.recordsToSave.map { $0.recordID?.zoneID ?? Wire.RecordZoneID() }
                + request.recordIDsToDelete.map { $0.zoneID ?? Wire.RecordZoneID() }
        case .fetchRecordZoneChanges(let request):
            return request.zoneConfigurations.map { $0.zoneID ?? Wire.RecordZoneID() }
        case .query(let request):
            switch request.start {
            case .cursor(let cursor):
                guard let (zone, _) = openSharedCursor(cursor.opaque) else { return [] }
                return [Wire.RecordZoneID(zoneName: zone.name, ownerName: zone.owner)]
            case .query, .none:
                return [request.zoneID ?? Wire.RecordZoneID()]
            }
        case .fetchDatabaseChanges:
            return nil
        default:
            return []
        }
    }

    /// The zones whose content `events` revealed (a zone reported deleted reveals nothing).
    static func zonesRevealed(in events: [Wire.Event.Payload]) -> [Wire.RecordZoneID] {
        events.compactMap { payload -> Wire.RecordZoneID? in
            switch payload {
            case .fetchDatabaseChanges(let event):
                if case .recordZoneWithIDChanged(let zoneID)? = event.callback { return zoneID }
            case .fetchRecordZones(let event):
                if case .perRecordZoneResult(let outcome)? = event.callback, case .zone(let zone)? = outcome.outcome {
                    return zone.zoneID ?? outcome.zoneID
                }
            default:
                break
            }
            return nil
        }
    }
}
