public import CirrusStore
public import CirrusWire
import Logging
import PostgresNIO

extension PostgresStorage {
    /// Saves and deletes zones (CKModifyRecordZonesOperation), as ``RecordStorage``
    /// describes: saving an existing zone returns it as it is; the default zone cannot be
    /// deleted; only private databases have custom zones. Zones created and deleted fire the
    /// database's subscriptions in the same transaction.
    ///
    /// - throws: ``StoreError`` `.limitExceeded` with nothing written; `.badDatabase`;
    ///   `.storageFailure`.
    public func modifyZones(
        saving zones: [Wire.RecordZone], deleting zoneIDs: [Wire.RecordZoneID], in database: DatabaseKey
    ) async throws -> ZoneModificationResult {
        let key = try database.validated()
        try checkItemCount(zones.count + zoneIDs.count)
        if zones.isEmpty && zoneIDs.isEmpty { return ZoneModificationResult() }
        let timestamp = clock()
        let now = RecordCodec.seconds(timestamp)
        let logger = self.logger
        let cache = subscriptionCache
        let (result, notified) = try await write(in: key, weight: zones.count + zoneIDs.count) { connection in
            var result = ZoneModificationResult()
            var changes: [ZoneChange] = []
            for zone in zones {
                let saved = try await Self.saveZone(zone, connection, key, logger, changes: &changes)
                result.saves.append(ZoneSaveOutcome(id: zone.zoneID, result: saved))
            }
            for zoneID in zoneIDs {
                let failure = try await Self.deleteZone(zoneID, connection, key, now: now, logger)
                result.deletes.append(ZoneDeletion(id: zoneID, failure: failure))
                if failure == nil { changes.append(ZoneChange(zoneName: zoneID.zoneName, wasDeleted: true)) }
            }
            guard !changes.isEmpty else { return (result, [String: [StoredNotification]]()) }
            let notified = try await PostgresNotificationWriter.fire(
                try await cache.subscriptions(connection, key, logger), in: key, now: timestamp, records: [],
                zones: changes, connection, logger)
            return (result, notified)
        }
        notifications.announce(in: key.container, notified)
        return result
    }

    private static func saveZone(
        _ zone: Wire.RecordZone, _ connection: PostgresConnection, _ key: DatabaseKey, _ logger: Logger,
        changes: inout [ZoneChange]
    ) async throws -> ItemResult<Wire.RecordZone> {
        let name: String
        switch ZoneResolution.nameToSave(zone, in: key) {
        case .failure(let failure): return .failure(failure)
        case .success(let resolved): name = resolved
        }
        if let existing = try await PostgresRows.liveZone(connection, key, name, logger) {
            let zone = ZoneResolution.zone(named: existing.name, encryptionScope: existing.encryptionScope, in: key)
            return .success(
                PostgresShareRows.zone(zone, sharedBy: try await PostgresShareRows.zoneWideShares(connection, key, logger)[name]))
        }
        if let refusal = ZoneResolution.customZoneRefusal(name, in: key) { return .failure(refusal) }
        // A tombstone of an earlier zone with this name stays until pruned: the database feed
        // reports that zone deleted, then this one created, so a device drops the old records.
        let seq = try await PostgresRows.bumpDatabaseSeq(connection, key, logger)
        let scope: Wire.ZoneEncryptionScope = zone.encryptionScope == .perZone ? .perZone : .perRecord
        try await connection.query(
            """
            INSERT INTO zones (container, owner, scope, name, encryption_scope, db_seq)
            VALUES (\(key.container), \(key.owner), \(key.scope.rawValue), \(name), \(scope.rawValue), \(seq))
            """, logger: logger)
        changes.append(ZoneChange(zoneName: name, wasDeleted: false))
        return .success(ZoneResolution.zone(named: name, encryptionScope: scope.rawValue, in: key))
    }

    private static func deleteZone(
        _ zoneID: Wire.RecordZoneID, _ connection: PostgresConnection, _ key: DatabaseKey, now: Double,
        _ logger: Logger
    ) async throws -> ItemFailure? {
        let name: String
        switch ZoneResolution.nameToDelete(zoneID, in: key) {
        case .failure(let failure): return failure
        case .success(let resolved): name = resolved
        }
        guard let zone = try await PostgresRows.liveZone(connection, key, name, logger) else {
            return RecordCodec.error(.zoneNotFound, "zone \(name) does not exist")
        }
        let seq = try await PostgresRows.bumpDatabaseSeq(connection, key, logger)
        try await connection.query(
            """
            UPDATE zones SET deleted_at = \(now), db_seq = \(seq), client_change_token = NULL
            WHERE container = \(key.container) AND owner = \(key.owner) AND scope = \(key.scope.rawValue)
                AND id = \(zone.id)
            """, logger: logger)
        // The zone's records go with it: its tombstone in the database feed tells a device
        // to drop them all, and a zone created again with this name starts empty. Its shares
        // go too, participants with them.
        for table in ["records", "shares", "tombstones"] {
            try await connection.query(
                PostgresQuery(
                    unsafeSQL: "DELETE FROM \(table) WHERE container = $1 AND owner = $2 AND scope = $3 AND zone_id = $4",
                    binds: PostgresRows.binds(key, zone.id)), logger: logger)
        }
        return nil
    }

    /// Fetches zones by ID (CKFetchRecordZonesOperation); `zoneNotFound` per missing one.
    /// A database nothing was written to yet has its default zone.
    ///
    /// - throws: ``StoreError``.
    public func fetchZones(_ zoneIDs: [Wire.RecordZoneID], in database: DatabaseKey) async throws -> [ZoneFetchOutcome] {
        let key = try database.validated()
        try checkItemCount(zoneIDs.count)
        let logger = self.logger
        return try await snapshot { connection in
            let shared = try await PostgresShareRows.zoneWideShares(connection, key, logger)
            var outcomes: [ZoneFetchOutcome] = []
            for zoneID in zoneIDs {
                let result: ItemResult<Wire.RecordZone>
                switch ZoneResolution.zoneName(of: zoneID, in: key) {
                case .failure(let failure):
                    result = .failure(failure)
                case .success(let name):
                    if let zone = try await PostgresRows.liveZone(connection, key, name, logger) {
                        let fetched = ZoneResolution.zone(named: zone.name, encryptionScope: zone.encryptionScope, in: key)
                        result = .success(PostgresShareRows.zone(fetched, sharedBy: shared[zone.name]))
                    } else if name == RecordCodec.defaultZoneName {
                        result = .success(ZoneResolution.defaultZone(in: key))
                    } else {
                        result = .failure(RecordCodec.error(.zoneNotFound, "zone \(name) does not exist"))
                    }
                }
                outcomes.append(ZoneFetchOutcome(id: zoneID, result: result))
            }
            return outcomes
        }
    }

    /// Every zone of the database, the default zone first (fetchAllRecordZonesOperation()).
    ///
    /// - throws: ``StoreError``.
    public func fetchAllZones(in database: DatabaseKey) async throws -> [Wire.RecordZone] {
        let key = try database.validated()
        let logger = self.logger
        return try await snapshot { connection in
            let rows = try await PostgresRows.liveZones(connection, key, logger)
            guard !rows.isEmpty else { return [ZoneResolution.defaultZone(in: key)] }
            let shared = try await PostgresShareRows.zoneWideShares(connection, key, logger)
            let defaults = rows.filter { $0.name == RecordCodec.defaultZoneName }
            let custom = rows.filter { $0.name != RecordCodec.defaultZoneName }
            return (defaults + custom).map {
                PostgresShareRows.zone(
                    ZoneResolution.zone(named: $0.name, encryptionScope: $0.encryptionScope, in: key), sharedBy: shared[$0.name])
            }
        }
    }
}
