public import CirrusWire
import Foundation
import GRDB

extension SQLiteStorage {
    public func recordChanges(
        in zone: Wire.RecordZoneID, of database: DatabaseKey, since: Int64, floor: Int64, through: Int64?, limit: Int,
        desiredKeys: [String]?
    ) async throws -> RecordChangeBatch {
        try await self.changes(in: zone, of: database, since: since, floor: floor, through: through, limit: limit) {
            db, row in
            try StoreRows.load(db, row, desiredKeys: desiredKeys, assetContent: true)
        }
    }

    public func storedRecordChanges(
        in zone: Wire.RecordZoneID, of database: DatabaseKey, since: Int64, floor: Int64, through: Int64?, limit: Int
    ) async throws -> StoredRecordChangeBatch {
        try await self.changes(in: zone, of: database, since: since, floor: floor, through: through, limit: limit) {
            db, row in
            if let serialized = Wire.SerializedRecord(plain: row.data) { return .serialized(serialized) }
            return .decoded(try StoreRows.load(db, row, desiredKeys: nil, assetContent: true))
        }
    }

    /// A batch of the zone's change feed, each changed record as `load` reads its row.
    private func changes<Changed: Sendable & Hashable>(
        in zone: Wire.RecordZoneID, of database: DatabaseKey, since: Int64, floor: Int64, through: Int64?, limit: Int,
        load: @escaping @Sendable (Database, RecordRow) throws -> Changed
    ) async throws -> ChangeBatch<Changed> {
        let key = try database.validated()
        try ChangeFeedArguments.check(since: since, through: through, limit: limit)
        let name = try ChangeFeedArguments.zoneName(of: zone, in: key)
        return try await read { db in
            guard let databaseID = try StoreRows.databaseID(db, key),
                let zone = try StoreRows.liveZone(db, databaseID, name)
            else {
                return try ChangeFeedArguments.changesOfAbsentZone(name, since: since)
            }
            let head = try ChangeFeedArguments.head(
                since: since, floor: floor, through: through, zoneName: name, changeSeq: zone.changeSeq,
                prunedSeq: zone.prunedSeq)
            let fetchLimit = limit + 1
            let records = try db.rows(
                sql: """
                    SELECT \(RecordRow.columns) FROM records WHERE zone_id = ? AND change_seq > ? AND change_seq <= ?
                    ORDER BY change_seq LIMIT ?
                    """,
                arguments: [zone.id, since, head, fetchLimit]
            ).map(RecordRow.init)
            let tombstones = try db.rows(
                sql:
                    "SELECT name, record_type, seq, shared_by FROM tombstones WHERE zone_id = ? AND seq > ? AND seq <= ? ORDER BY seq LIMIT ?",
                arguments: [zone.id, since, head, fetchLimit])
            var changed: [Changed] = []
            var deleted: [RecordTombstone] = []
            let page = try ChangeFeedArguments.merge(
                records, seq: \.changeSeq, tombstones, seq: { $0["seq"] }, since: since, head: head, limit: limit,
                changed: { changed.append(try load(db, $0)) },
                deleted: { tombstone in
                    let recordID = Wire.RecordID(
                        recordName: tombstone["name"], zoneID: ZoneResolution.zoneID(zone.name, in: key))
                    let sharedBy: String? = tombstone["shared_by"]
                    deleted.append(
                        RecordTombstone(
                            recordID: recordID, recordType: tombstone["record_type"], seq: tombstone["seq"],
                            sharedBy: sharedBy.map { $0.split(separator: "\n").map(String.init) } ?? []))
                })
            return ChangeBatch(
                changed: changed, deleted: deleted, lastSeq: page.lastSeq, moreComing: page.moreComing,
                clientChangeToken: zone.clientChangeToken, zoneIncarnation: zone.id, headSeq: zone.changeSeq,
                prunedSeq: zone.prunedSeq)
        }
    }

    public func zoneChanges(
        in database: DatabaseKey, since: Int64, floor: Int64, through: Int64?, limit: Int
    ) async throws -> ZoneChangeBatch {
        let key = try database.validated()
        try ChangeFeedArguments.check(since: since, through: through, limit: limit)
        return try await read { db in
            guard
                let row = try db.row(
                    sql: "SELECT id, change_seq, pruned_seq FROM databases WHERE container = ? AND scope = ? AND owner = ?",
                    arguments: [key.container, key.scope.rawValue, key.owner])
            else {
                if since == 0 { return ZoneChangeBatch(entries: [], lastSeq: 0, moreComing: false) }
                throw StoreError(.changeTokenExpired, "database change sequence \(since) expired")
            }
            let databaseID: Int64 = row["id"]
            let changeSeq: Int64 = row["change_seq"]
            let prunedSeq: Int64 = row["pruned_seq"]
            guard since <= changeSeq, since == 0 || max(since, floor) >= prunedSeq else {
                throw StoreError(.changeTokenExpired, "database change sequence \(since) expired")
            }
            let head = min(through ?? changeSeq, changeSeq)
            let rows = try db.rows(
                sql: """
                    SELECT name, db_seq, deleted_at FROM zones
                    WHERE database_id = ? AND db_seq > ? AND db_seq <= ? ORDER BY db_seq LIMIT ?
                    """,
                arguments: [databaseID, since, head, limit + 1])
            let moreComing = rows.count > limit
            var batch = ZoneChangeBatch(
                entries: [], lastSeq: head, moreComing: moreComing, headSeq: changeSeq, prunedSeq: prunedSeq)
            for zone in rows.prefix(limit) {
                let zoneID = ZoneResolution.zoneID(zone["name"], in: key)
                batch.entries.append(ZoneFeedEntry(zoneID: zoneID, wasDeleted: (zone["deleted_at"] as Double?) != nil))
                if moreComing { batch.lastSeq = zone["db_seq"] }
            }
            return batch
        }
    }

    public func pruneTombstones(deletedBefore cutoff: Wire.Timestamp) async throws {
        let cutoff = RecordCodec.seconds(cutoff)
        try await write(weight: 1) { db in
            try db.run(
                sql: """
                    UPDATE zones SET pruned_seq = max(pruned_seq,
                        (SELECT max(seq) FROM tombstones t WHERE t.zone_id = zones.id AND t.deleted_at < ?1))
                    WHERE id IN (SELECT zone_id FROM tombstones WHERE deleted_at < ?1)
                    """,
                arguments: [cutoff])
            try db.run(sql: "DELETE FROM tombstones WHERE deleted_at < ?", arguments: [cutoff])
            try db.run(
                sql: """
                    UPDATE databases SET pruned_seq = max(pruned_seq,
                        (SELECT max(db_seq) FROM zones z WHERE z.database_id = databases.id AND z.deleted_at < ?1))
                    WHERE id IN (SELECT database_id FROM zones WHERE deleted_at < ?1)
                    """,
                arguments: [cutoff])
            try db.run(sql: "DELETE FROM zones WHERE deleted_at < ?", arguments: [cutoff])
        }
    }
}
