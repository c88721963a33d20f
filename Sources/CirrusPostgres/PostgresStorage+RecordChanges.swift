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
        guard since >= 0, limit > 0, (through ?? since) >= since else {
            throw StoreError(.invalidArguments, "change sequence \(since) or limit \(limit) out of range")
        }
        let name: String
        switch ZoneResolution.zoneName(of: zone, in: key) {
        case .failure(let failure): throw StoreError(.zoneNotFound, failure.message)
        case .success(let resolved): name = resolved
        }
        let logger = self.logger
        return try await snapshot { connection in
            guard let zone = try await PostgresRows.liveZone(connection, key, name, logger) else {
                // The default zone exists before anything was written to it.
                guard name == RecordCodec.defaultZoneName else {
                    throw StoreError(.zoneNotFound, "zone \(name) does not exist")
                }
                guard since == 0 else {
                    throw StoreError(.changeTokenExpired, "change sequence \(since) of zone \(name) expired")
                }
                return RecordChangeBatch(
                    changed: [], deleted: [], lastSeq: 0, moreComing: false, clientChangeToken: [], zoneIncarnation: 0)
            }
            guard since <= zone.changeSeq, since == 0 || max(since, floor) >= zone.prunedSeq else {
                throw StoreError(.changeTokenExpired, "change sequence \(since) of zone \(name) expired")
            }
            // Changes after `head` belong to a later fetch: a record changed while this fetch
            // pages moves past it and is reported once, by the next fetch, at its newest state.
            let head = min(through ?? zone.changeSeq, zone.changeSeq)
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
                        SELECT name, record_type, seq FROM tombstones
                        WHERE container = $1 AND owner = $2 AND scope = $3 AND zone_id = $4 AND seq > $5 AND seq <= $6
                        ORDER BY seq LIMIT $7
                        """,
                    binds: bindings), logger: logger)
            var tombstones: [(name: String, recordType: String, seq: Int64)] = []
            for try await row in tombstoneRows.decode((String, String, Int64).self) { tombstones.append(row) }

            // The two lists merged in sequence order, up to `limit`.
            var changed: [Wire.Record] = []
            var deleted: [RecordTombstone] = []
            var r = 0
            var t = 0
            var lastSeq = since
            while changed.count + deleted.count < limit && (r < records.count || t < tombstones.count) {
                if r < records.count, t == tombstones.count || records[r].changeSeq < tombstones[t].seq {
                    changed.append(RecordCodec.restrict(try records[r].record(), to: desiredKeys))
                    lastSeq = records[r].changeSeq
                    r += 1
                } else {
                    let tombstone = tombstones[t]
                    let recordID = Wire.RecordID(recordName: tombstone.name, zoneID: ZoneResolution.zoneID(zone.name, in: key))
                    deleted.append(RecordTombstone(recordID: recordID, recordType: tombstone.recordType, seq: tombstone.seq))
                    lastSeq = tombstone.seq
                    t += 1
                }
            }
            let moreComing = r < records.count || t < tombstones.count
            return RecordChangeBatch(
                changed: changed, deleted: deleted, lastSeq: moreComing ? lastSeq : head, moreComing: moreComing,
                clientChangeToken: zone.clientChangeToken, zoneIncarnation: zone.id, headSeq: zone.changeSeq,
                prunedSeq: zone.prunedSeq)
        }
    }
}
