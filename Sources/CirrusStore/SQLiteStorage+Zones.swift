public import CirrusWire
import Foundation
import GRDB

extension SQLiteStorage {
    public func modifyZones(
        saving zones: [Wire.RecordZone], deleting zoneIDs: [Wire.RecordZoneID], in database: DatabaseKey
    ) async throws -> ZoneModificationResult {
        let key = try database.validated()
        try checkItemCount(zones.count + zoneIDs.count)
        if zones.isEmpty && zoneIDs.isEmpty { return ZoneModificationResult() }
        let now = RecordCodec.seconds(clock())
        let timestamp = clock()
        let cache = subscriptionCache
        return try await writeNotifying(weight: zones.count + zoneIDs.count, in: key.container) { db in
            let databaseID = try StoreRows.ensureDatabase(db, key)
            var result = ZoneModificationResult()
            var changes: [ZoneChange] = []
            for zone in zones {
                let saved = try Self.saveZone(zone, db: db, databaseID: databaseID, key: key, changes: &changes)
                result.saves.append(ZoneSaveOutcome(id: zone.zoneID, result: saved))
            }
            for zoneID in zoneIDs {
                let failure = try Self.deleteZone(zoneID, db: db, databaseID: databaseID, key: key, now: now)
                result.deletes.append(ZoneDeletion(id: zoneID, failure: failure))
                if failure == nil {
                    changes.append(ZoneChange(zoneName: zoneID.zoneName, wasDeleted: true))
                }
            }
            var notifications = NotificationWriter(db: db, key: key, now: timestamp)
            try notifications.fire(
                try cache.subscriptions(db, databaseID: databaseID), databaseID: databaseID, records: [], zones: changes)
            return Notified(result, notifications.notified)
        }
    }

    private static func saveZone(
        _ zone: Wire.RecordZone, db: Database, databaseID: Int64, key: DatabaseKey, changes: inout [ZoneChange]
    ) throws -> ItemResult<Wire.RecordZone> {
        let name: String
        switch ZoneResolution.nameToSave(zone, in: key) {
        case .failure(let failure): return .failure(failure)
        case .success(let resolved): name = resolved
        }
        if let existing = try StoreRows.liveZone(db, databaseID, name) {
            return .success(try Self.zone(existing, in: key, db))
        }
        if let refusal = ZoneResolution.customZoneRefusal(name, in: key) { return .failure(refusal) }
        // A tombstone of an earlier zone with this name stays until pruned: the database feed
        // reports that zone deleted, then this one created, so a device drops the old records.
        let seq = try StoreRows.bumpDatabaseSeq(db, databaseID)
        let scope: Wire.ZoneEncryptionScope = zone.encryptionScope == .perZone ? .perZone : .perRecord
        try db.run(
            sql: "INSERT INTO zones (database_id, name, encryption_scope, db_seq) VALUES (?, ?, ?, ?)",
            arguments: [databaseID, name, scope.rawValue, seq])
        guard let saved = try StoreRows.liveZone(db, databaseID, name) else {
            throw StoreError(.storageFailure, "zone \(name) vanished after insert")
        }
        changes.append(ZoneChange(zoneName: name, wasDeleted: false))
        return .success(ZoneResolution.zone(saved, in: key))
    }

    private static func deleteZone(
        _ zoneID: Wire.RecordZoneID, db: Database, databaseID: Int64, key: DatabaseKey, now: Double
    ) throws -> ItemFailure? {
        let name: String
        switch ZoneResolution.nameToDelete(zoneID, in: key) {
        case .failure(let failure): return failure
        case .success(let resolved): name = resolved
        }
        guard let zone = try StoreRows.liveZone(db, databaseID, name) else {
            return RecordCodec.error(.zoneNotFound, "zone \(name) does not exist")
        }
        // Fields and references go with their records (ON DELETE CASCADE), participants with
        // their shares.
        try db.run(sql: "DELETE FROM records WHERE zone_id = ?", arguments: [zone.id])
        try db.run(sql: "DELETE FROM shares WHERE zone_id = ?", arguments: [zone.id])
        try db.run(sql: "DELETE FROM tombstones WHERE zone_id = ?", arguments: [zone.id])
        try db.run(sql: "DELETE FROM indexed_fields WHERE zone_id = ?", arguments: [zone.id])
        let seq = try StoreRows.bumpDatabaseSeq(db, databaseID)
        try db.run(
            sql: "UPDATE zones SET deleted_at = ?, db_seq = ?, client_change_token = NULL WHERE id = ?",
            arguments: [now, seq, zone.id])
        return nil
    }

    public func fetchZones(_ zoneIDs: [Wire.RecordZoneID], in database: DatabaseKey) async throws -> [ZoneFetchOutcome] {
        let key = try database.validated()
        try checkItemCount(zoneIDs.count)
        let fetch: @Sendable (Database) throws -> [ZoneFetchOutcome] = { db in
            let databaseID = try StoreRows.databaseID(db, key)
            return try zoneIDs.map { zoneID in
                let result: ItemResult<Wire.RecordZone>
                switch ZoneResolution.zoneName(of: zoneID, in: key) {
                case .failure(let failure):
                    result = .failure(failure)
                case .success(let name):
                    if let databaseID, let zone = try StoreRows.liveZone(db, databaseID, name) {
                        result = .success(try Self.zone(zone, in: key, db))
                    } else if name == RecordCodec.defaultZoneName {
                        result = .success(ZoneResolution.defaultZone(in: key))
                    } else {
                        result = .failure(RecordCodec.error(.zoneNotFound, "zone \(name) does not exist"))
                    }
                }
                return ZoneFetchOutcome(id: zoneID, result: result)
            }
        }
        return zoneIDs.count <= Self.inPlaceReadLimit ? try await readInPlaceIfFree(fetch) : try await read(fetch)
    }

    public func fetchAllZones(in database: DatabaseKey) async throws -> [Wire.RecordZone] {
        let key = try database.validated()
        return try await read { db in
            guard let databaseID = try StoreRows.databaseID(db, key) else {
                return [ZoneResolution.defaultZone(in: key)]
            }
            let rows = try StoreRows.liveZones(db, databaseID)
            let defaults = rows.filter { $0.name == RecordCodec.defaultZoneName }
            let custom = rows.filter { $0.name != RecordCodec.defaultZoneName }
            return try (defaults + custom).map { try Self.zone($0, in: key, db) }
        }
    }

    /// The zone of `row` as clients see it, with its zone-wide share when it has one (as
    /// CloudKit's `CKRecordZone.share`: set while the share exists).
    static func zone(_ row: ZoneRow, in key: DatabaseKey, _ db: Database) throws -> Wire.RecordZone {
        var zone = ZoneResolution.zone(row, in: key)
        if let share = try String.fetchOne(
            db, sql: "SELECT name FROM shares WHERE zone_id = ? AND root_name IS NULL", arguments: [row.id])
        {
            zone.share = Wire.Reference(
                recordID: Wire.RecordID(recordName: share, zoneID: ZoneResolution.zoneID(row.name, in: key)), action: .none)
        }
        return zone
    }
}
