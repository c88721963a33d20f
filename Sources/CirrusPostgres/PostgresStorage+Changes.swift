public import CirrusStore
public import CirrusWire
import PostgresNIO

extension PostgresStorage {
    /// The advisory lock key of ``pruneTombstones(deletedBefore:)`` ("prune" in ASCII).
    static let pruneLockKey: Int64 = 0x70_72_75_6E_65

    /// Zones created, changed or deleted after database change sequence `since` and at or
    /// before `through` (nil = the database's current sequence); `floor` as for
    /// ``RecordStorage/recordChanges(in:of:since:floor:through:limit:desiredKeys:)``. Read in
    /// one snapshot.
    ///
    /// - throws: ``StoreError`` `.invalidArguments` for a negative `since`, a limit below 1 or
    ///   `through` before `since`; `.changeTokenExpired` when zone tombstones after `since`
    ///   were pruned or `since` is past the database's sequence.
    public func zoneChanges(
        in database: DatabaseKey, since: Int64, floor: Int64, through: Int64?, limit: Int
    ) async throws -> ZoneChangeBatch {
        let key = try database.validated()
        try ChangeFeedArguments.check(since: since, through: through, limit: limit)
        let logger = self.logger
        return try await snapshot { connection in
            let heads = try await connection.query(
                """
                SELECT change_seq, pruned_seq FROM databases
                WHERE container = \(key.container) AND owner = \(key.owner) AND scope = \(key.scope.rawValue)
                """, logger: logger)
            var head: (changeSeq: Int64, prunedSeq: Int64)?
            for try await row in heads.decode((Int64, Int64).self) { head = row }
            guard let (changeSeq, prunedSeq) = head else {
                if since == 0 { return ZoneChangeBatch(entries: [], lastSeq: 0, moreComing: false) }
                throw StoreError(.changeTokenExpired, "database change sequence \(since) expired")
            }
            guard since <= changeSeq, since == 0 || max(since, floor) >= prunedSeq else {
                throw StoreError(.changeTokenExpired, "database change sequence \(since) expired")
            }
            let last = min(through ?? changeSeq, changeSeq)
            let rows = try await connection.query(
                """
                SELECT name, db_seq, deleted_at IS NOT NULL FROM zones
                WHERE container = \(key.container) AND owner = \(key.owner) AND scope = \(key.scope.rawValue)
                    AND db_seq > \(since) AND db_seq <= \(last)
                ORDER BY db_seq LIMIT \(limit + 1)
                """, logger: logger)
            var zones: [(name: String, seq: Int64, deleted: Bool)] = []
            for try await row in rows.decode((String, Int64, Bool).self) { zones.append(row) }
            let moreComing = zones.count > limit
            var batch = ZoneChangeBatch(
                entries: [], lastSeq: last, moreComing: moreComing, headSeq: changeSeq, prunedSeq: prunedSeq)
            for zone in zones.prefix(limit) {
                batch.entries.append(
                    ZoneFeedEntry(zoneID: ZoneResolution.zoneID(zone.name, in: key), wasDeleted: zone.deleted))
                if moreComing { batch.lastSeq = zone.seq }
            }
            return batch
        }
    }

    /// Drops the record tombstones of records and the zone tombstones of zones deleted before
    /// `cutoff`; change sequences older than the newest dropped tombstone (of a zone, of the
    /// database) then expire.
    ///
    /// - throws: ``StoreError``.
    public func pruneTombstones(deletedBefore cutoff: Wire.Timestamp) async throws {
        let cutoff = RecordCodec.seconds(cutoff)
        let logger = self.logger
        try await transaction { connection in
            // Two nodes pruning at once would lock the same database rows in different orders.
            try await connection.query("SELECT pg_advisory_xact_lock(\(Self.pruneLockKey))", logger: logger)
            // A writer locks its database's row, then its zones' rows: the databases pruned
            // are locked first too (in key order), so a prune and a writer never wait on each
            // other's rows in opposite orders.
            try await connection.query(
                """
                SELECT 1 FROM databases WHERE (container, owner, scope) IN (
                    SELECT container, owner, scope FROM tombstones WHERE deleted_at < \(cutoff)
                    UNION SELECT container, owner, scope FROM zones WHERE deleted_at < \(cutoff)
                )
                ORDER BY container, owner, scope FOR UPDATE
                """, logger: logger)
            try await connection.query(
                """
                UPDATE zones z SET pruned_seq = greatest(z.pruned_seq, t.seq)
                FROM (
                    SELECT container, owner, scope, zone_id, max(seq) AS seq FROM tombstones
                    WHERE deleted_at < \(cutoff) GROUP BY container, owner, scope, zone_id
                ) t
                WHERE z.container = t.container AND z.owner = t.owner AND z.scope = t.scope AND z.id = t.zone_id
                """, logger: logger)
            try await connection.query("DELETE FROM tombstones WHERE deleted_at < \(cutoff)", logger: logger)
            try await connection.query(
                """
                UPDATE databases d SET pruned_seq = greatest(d.pruned_seq, z.seq)
                FROM (
                    SELECT container, owner, scope, max(db_seq) AS seq FROM zones
                    WHERE deleted_at < \(cutoff) GROUP BY container, owner, scope
                ) z
                WHERE d.container = z.container AND d.owner = z.owner AND d.scope = z.scope
                """, logger: logger)
            try await connection.query("DELETE FROM zones WHERE deleted_at < \(cutoff)", logger: logger)
        }
    }
}
