import CirrusStore
import CirrusWire

/// Long-lived operations of the shared database, followed again (`Resume`, its journal
/// replay, `fetchLongLivedOperation(withID:)`): the caller's access is checked again then, as
/// at every request, so a participant removed since (or whose share was deleted) reads
/// nothing more of what the operation journaled.
extension StorageExecutor {
    /// Whether `caller` still reaches every shared zone `open` is about: the zones its
    /// request names or, for a request that names none (all zones, database changes), the
    /// zones its journal revealed. Operations of other databases are always theirs to follow.
    public func mayFollow(
        _ open: Wire.Open, caller: ClientIdentity, journaled: () async throws -> [Wire.Event.Payload]
    ) async throws -> Bool {
        guard open.databaseScope == .shared, let request = open.request, Self.runsInSharedDatabase(request) else {
            return true
        }
        let access = try await SharedAccess.load(
            storage, caller: caller.userRecordName, container: open.containerIdentifier, cache: sharedAccess)
        let zoneIDs: [Wire.RecordZoneID]
        if let named = Self.zonesNamed(by: request) {
            zoneIDs = named
        } else {
            zoneIDs = Self.zonesRevealed(in: try await journaled())
        }
        return zoneIDs.allSatisfy { zoneID in
            access.zone(of: zoneID).flatMap { access.permission(in: $0) } != nil
        }
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
