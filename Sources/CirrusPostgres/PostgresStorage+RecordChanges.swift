public import CirrusStore
public import CirrusWire
import Logging
import PostgresNIO

extension PostgresStorage {
    /// Records changed and deleted in `zone` after change sequence `since` and at or before
    /// `through` (nil = the zone's current sequence), oldest first, at most `limit` changes,
    /// read in one snapshot; `floor` as ``RecordStorage`` describes. The tokens mean what the
    /// SQLite engine's do: `lastSeq` is the zone's sequence when no more are coming.
    ///
    /// - throws: ``StoreError`` `.invalidArguments` for a negative `since`, a limit below 1 or
    ///   `through` before `since`; `.zoneNotFound`; `.changeTokenExpired` when tombstones
    ///   after `since` were pruned or `since` is past the zone's sequence.
    public func recordChanges(
        in zone: Wire.RecordZoneID, of database: DatabaseKey, since: Int64, floor: Int64, through: Int64?, limit: Int,
        desiredKeys: [String]?
    ) async throws -> RecordChangeBatch {
        let key = try database.validated()
        try ChangeFeedArguments.check(since: since, through: through, limit: limit)
        let name = try ChangeFeedArguments.zoneName(of: zone, in: key)
        let logger = self.logger
        return try await snapshot { connection in
            guard let zone = try await PostgresRows.liveZone(connection, key, name, logger) else {
                return try ChangeFeedArguments.changesOfAbsentZone(name, since: since)
            }
            let head = try ChangeFeedArguments.head(
                since: since, floor: floor, through: through, zoneName: name, changeSeq: zone.changeSeq,
                prunedSeq: zone.prunedSeq)
            var bindings = PostgresRows.binds(key, zone.id)
            bindings.append(since)
            bindings.append(head)
            bindings.append(Int64(limit) + 1)
            let recordRows = try await connection.query(
                PostgresQuery(
                    unsafeSQL: """
                        SELECT \(PostgresRecordRow.columns) FROM records
                        WHERE container = $1 AND owner = $2 AND scope = $3 AND zone_id = $4
                            AND change_seq > $5 AND change_seq <= $6
                        ORDER BY change_seq LIMIT $7
                        """,
                    binds: bindings), logger: logger)
            var records: [PostgresRecordRow] = []
            for try await columns in recordRows.decode(PostgresRecordRow.Columns.self) {
                records.append(PostgresRecordRow(columns))
            }
            let tombstoneRows = try await connection.query(
                PostgresQuery(
                    unsafeSQL: """
                        SELECT name, record_type, seq, shared_by FROM tombstones
                        WHERE container = $1 AND owner = $2 AND scope = $3 AND zone_id = $4 AND seq > $5 AND seq <= $6
                        ORDER BY seq LIMIT $7
                        """,
                    binds: bindings), logger: logger)
            var tombstones: [(name: String, recordType: String, seq: Int64, sharedBy: [String]?)] = []
            for try await row in tombstoneRows.decode((String, String, Int64, [String]?).self) { tombstones.append(row) }

            var changed: [Wire.Record] = []
            var deleted: [RecordTombstone] = []
            let page = try ChangeFeedArguments.merge(
                records, seq: \.changeSeq, tombstones, seq: \.seq, since: since, head: head, limit: limit,
                changed: { changed.append(RecordCodec.restrict(try $0.record(), to: desiredKeys)) },
                deleted: { tombstone in
                    let recordID = Wire.RecordID(recordName: tombstone.name, zoneID: ZoneResolution.zoneID(zone.name, in: key))
                    deleted.append(
                        RecordTombstone(
                            recordID: recordID, recordType: tombstone.recordType, seq: tombstone.seq,
                            sharedBy: tombstone.sharedBy ?? []))
                })
            try await PostgresAssetRows.fill(&changed, connection, logger)
            return RecordChangeBatch(
                changed: changed, deleted: deleted, lastSeq: page.lastSeq, moreComing: page.moreComing,
                clientChangeToken: zone.clientChangeToken, zoneIncarnation: zone.id, headSeq: zone.changeSeq,
                prunedSeq: zone.prunedSeq)
        }
    }
}
