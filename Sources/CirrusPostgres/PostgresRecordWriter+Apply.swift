import CirrusStore
import CirrusWire
import Foundation
import Logging
import NIOCore
import PostgresNIO

extension PostgresRecordWriter {
    /// What a zone's writes did: the saved records as stored, by their index in the request,
    /// the records deletions cascaded to, in deletion order, and the changes subscriptions
    /// see, in the order the SQLite engine makes them (a deletion followed by its cascade).
    struct Written {
        var saved: [(Int, Wire.Record)] = []
        var cascaded: [Wire.RecordID] = []
        /// The name of the deleted record each of `cascaded` was deleted with.
        var cascadedFrom: [String] = []
        var changes: [RecordChange] = []
    }

    /// Writes a zone's checked items in request order, each at the zone's next change
    /// sequence, then deletes the records the deletions cascade to.
    ///
    /// Saves go in one statement (an upsert that drops their tombstones), deletions in one
    /// (a delete and a tombstone upsert), whatever their number, the last of them also moving
    /// the zone along the database's change feed: a 400-record save is one statement (two
    /// when its records hold `deleteSelf` references, or replace records that did). The
    /// changes are collected for `subscriptions` (none when it is empty).
    func apply(
        _ writes: [Write], in zone: PostgresZoneRow, clientChangeToken: Data?, matching subscriptions: SubscriptionSet
    ) async throws -> Written {
        var seq = zone.changeSeq
        var stored: [(Int, Wire.Record)] = []
        var saved = RecordColumns()
        var references = ReferenceColumns()
        var replacedSources: [String] = []
        var index = PostgresIndexRows.Columns()
        var assets = PostgresAssetRows.Columns()
        // The versions the writes replace, with the sequence each is replaced at.
        var replaced: (names: [String], seqs: [Int64]) = ([], [])
        var deleted = TombstoneColumns()
        // A deletion's change is followed by those of its cascade (nil: a save's change).
        var changes: [(change: RecordChange, deletedName: String?)] = []
        // A shared zone's changes may fire its participants' subscriptions too.
        var collecting = !subscriptions.isEmpty
        if !collecting { collecting = try await !shares.zoneShares(zone.id, connection, key, logger).isEmpty }
        shares.touched[zone.id] = zone.name
        let modifier = ZoneResolution.storedUserRecordID(user)
        for write in writes {
            switch write {
            case .save(let prepared):
                seq += 1
                var record = prepared.record
                record.recordChangeTag = RecordChangeTag.make(zoneID: zone.id, seq: seq)
                record.creationDate = prepared.serverRecord?.creationDate ?? now
                record.modificationDate = now
                let creator = prepared.existing?.creator ?? user
                record.creatorUserRecordID = ZoneResolution.storedUserRecordID(creator)
                record.lastModifiedUserRecordID = modifier
                saved.names.append(record.recordID?.recordName ?? "")
                saved.types.append(record.recordType)
                saved.tags.append(record.recordChangeTag)
                saved.seqs.append(seq)
                saved.creators.append(creator)
                saved.data.append(ByteBuffer(bytes: record.serializedBytes()))
                saved.created.append(RecordCodec.nanoseconds(record.creationDate ?? now))
                saved.modified.append(RecordCodec.nanoseconds(now))
                saved.modifiers.append(modifier.recordName)
                stored.append((prepared.index, record))
                let name = record.recordID?.recordName ?? ""
                if prepared.existing != nil {
                    replacedSources.append(name)
                    replaced.names.append(name)
                    replaced.seqs.append(seq)
                }
                index.append(record, name: name)
                assets.append(
                    name, checksums: prepared.checksums, arriving: prepared.assets,
                    replaced: prepared.existing == nil ? nil : prepared.serverRecord)
                for target in RecordCodec.deleteSelfTargets(of: record, zoneName: zone.name) {
                    references.sources.append(name)
                    references.targetZones.append(target.zone)
                    references.targetNames.append(target.name)
                }
                if collecting {
                    let change = RecordChange(
                        zoneName: zone.name, recordType: record.recordType, recordName: name,
                        old: prepared.serverRecord, new: record)
                    changes.append((change, nil))
                }
            case .delete(_, let name, let existing):
                guard let existing else { continue }
                seq += 1
                deleted.names.append(name)
                deleted.types.append(existing.recordType)
                deleted.seqs.append(seq)
                deleted.sharedBy.append(
                    try await sharesHolding(existing, named: name, zoneID: zone.id).joined(separator: "\n"))
                replaced.names.append(name)
                replaced.seqs.append(seq)
                if collecting {
                    let old = subscriptions.needsPreviousState(of: existing.recordType) ? try existing.record() : nil
                    let change = RecordChange(
                        zoneName: zone.name, recordType: existing.recordType, recordName: name, old: old, new: nil)
                    changes.append((change, name))
                }
            }
        }
        guard seq > zone.changeSeq else { return Written(saved: stored) }
        // The zone moves to its last change sequence and to the database's next one in the
        // zone's last statement.
        let move = ZoneMove(changeSeq: seq, clientChangeToken: clientChangeToken)
        if !replaced.names.isEmpty { try await keepVersions(replaced.names, replacedAt: replaced.seqs, in: zone.id) }
        if !deleted.names.isEmpty { try await writeDeletions(deleted, in: zone, moving: saved.names.isEmpty ? move : nil) }
        if !saved.names.isEmpty { try await writeSaves(saved, indexing: index, replacing: replacedSources, in: zone, moving: move) }
        if !replacedSources.isEmpty || !references.sources.isEmpty {
            try await writeReferences(references, replacing: replacedSources, in: zone)
        }
        if !assets.isEmpty {
            try await PostgresAssetRows.write(assets, zoneID: zone.id, database: key, connection, logger)
        }
        var written = Written(saved: stored)
        var cascades: [String: [RecordChange]] = [:]
        for name in deleted.names {
            let cascade = try await cascade(from: name, in: zone.name, matching: subscriptions)
            written.cascaded += cascade.map { $0.recordID }
            written.cascadedFrom += cascade.map { _ in name }
            let reported = cascade.filter { collecting || $0.inSharedZone }
            if !reported.isEmpty { cascades[name] = reported.map { $0.change } }
        }
        for (change, deletedName) in changes {
            written.changes.append(change)
            if let deletedName { written.changes += cascades[deletedName] ?? [] }
        }
        return written
    }

    /// Deletes every record holding a `deleteSelf` reference to the deleted record `name`
    /// of zone `zoneName`, transitively, each at its zone's next change sequence with a
    /// tombstone, depth first and a target's sources in the order they were saved (as the
    /// SQLite engine does); returns them in deletion order, each with its change as
    /// `subscriptions` see it. A record already gone (a cycle) is skipped.
    private func cascade(
        from name: String, in zoneName: String, matching subscriptions: SubscriptionSet
    ) async throws -> [(recordID: Wire.RecordID, change: RecordChange, inSharedZone: Bool)] {
        // A cascaded record's change is one to report when some subscription may hear of it:
        // the database's, or one of its zone's participants' (`inSharedZone`).
        var cascaded: [(recordID: Wire.RecordID, change: RecordChange, inSharedZone: Bool)] = []
        var pending: [(zone: String, name: String)] = [(zoneName, name)]
        while let target = pending.popLast() {
            let sources = try await connection.query(
                PostgresQuery(
                    unsafeSQL: """
                        SELECT c.source_zone_id, z.name, c.source_name FROM cascade_references c
                        JOIN zones z ON z.container = c.container AND z.owner = c.owner AND z.scope = c.scope
                            AND z.id = c.source_zone_id
                        WHERE c.container = $1 AND c.owner = $2 AND c.scope = $3 AND c.target_zone = $4
                            AND c.target_name = $5
                        ORDER BY c.id
                        """,
                    binds: PostgresRows.binds(key, target.zone, target.name)), logger: logger)
            var found: [(zoneID: Int64, zoneName: String, name: String)] = []
            for try await source in sources.decode((Int64, String, String).self) { found.append(source) }
            for source in found {
                guard let row = try await deleteCascaded(source.name, in: source.zoneID) else { continue }
                shares.touched[source.zoneID] = source.zoneName
                let inSharedZone = try await !shares.zoneShares(source.zoneID, connection, key, logger).isEmpty
                let old = subscriptions.needsPreviousState(of: row.recordType) ? try row.record() : nil
                cascaded.append(
                    (
                        Wire.RecordID(recordName: source.name, zoneID: ZoneResolution.zoneID(source.zoneName, in: key)),
                        RecordChange(
                            zoneName: source.zoneName, recordType: row.recordType, recordName: source.name, old: old,
                            new: nil),
                        inSharedZone
                    ))
                pending.append((source.zoneName, source.name))
            }
        }
        return cascaded
    }

    /// Deletes the record `name` of a zone, if it is still there, at the zone's next change
    /// sequence (moving the zone along the database's feed) with a tombstone naming the shares
    /// it was in; the deleted row, nil when it was gone.
    func deleteCascaded(_ name: String, in zoneID: Int64) async throws -> PostgresRecordRow? {
        var bindings = PostgresRows.binds(key, zoneID)
        bindings.append(name)
        var deleting = bindings
        deleting.append(RecordCodec.seconds(now))
        // The version deleted is kept at the sequence the next statement moves the zone to
        // (the database's row is locked: nothing moves it in between).
        let removed = try await connection.query(
            PostgresQuery(
                unsafeSQL: """
                    WITH kept AS (
                        INSERT INTO query_preimages (container, owner, scope, zone_id, replaced_seq, name, record_type,
                            record_id, old_seq, created_ns, modified_ns, data, kept_at)
                        SELECT r.container, r.owner, r.scope, r.zone_id, z.change_seq + 1, r.name, r.record_type, r.id,
                            r.change_seq, r.created_ns, r.modified_ns, r.data, $6
                        FROM records r JOIN zones z
                            ON z.container = r.container AND z.owner = r.owner AND z.scope = r.scope AND z.id = r.zone_id
                        WHERE r.container = $1 AND r.owner = $2 AND r.scope = $3 AND r.zone_id = $4 AND r.name = $5
                        ON CONFLICT DO NOTHING
                    )
                    DELETE FROM records
                    WHERE container = $1 AND owner = $2 AND scope = $3 AND zone_id = $4 AND name = $5
                    RETURNING \(PostgresRecordRow.columns)
                    """,
                binds: deleting), logger: logger)
        var deleted: PostgresRecordRow?
        for try await columns in removed.decode(PostgresRecordRow.Columns.self) { deleted = PostgresRecordRow(columns) }
        guard let deleted else { return nil }
        bindings.append(deleted.recordType)
        bindings.append(RecordCodec.seconds(now))
        let sharedBy = try await sharesHolding(deleted, named: name, zoneID: zoneID)
        bindings.append(sharedBy.isEmpty ? nil : sharedBy)
        try await connection.query(
            PostgresQuery(
                unsafeSQL: """
                    WITH bumped AS (
                        UPDATE databases SET change_seq = change_seq + 1
                        WHERE container = $1 AND owner = $2 AND scope = $3
                        RETURNING change_seq
                    ),
                    moved AS (
                        UPDATE zones SET db_seq = bumped.change_seq, change_seq = zones.change_seq + 1
                        FROM bumped
                        WHERE container = $1 AND owner = $2 AND scope = $3 AND id = $4
                        RETURNING zones.change_seq
                    )
                    INSERT INTO tombstones (container, owner, scope, zone_id, name, record_type, seq, deleted_at,
                        shared_by)
                    SELECT $1, $2, $3, $4, $5, $6, moved.change_seq, $7, $8 FROM moved
                    ON CONFLICT (container, owner, scope, zone_id, name) DO UPDATE SET
                        record_type = excluded.record_type, seq = excluded.seq, deleted_at = excluded.deleted_at,
                        shared_by = excluded.shared_by
                    """,
                binds: bindings), logger: logger)
        return deleted
    }

    /// Keeps the stored versions of the records `names` of a zone, about to be replaced or
    /// deleted at the change sequences `seqs`, for the query cursors of earlier sequences
    /// (`query_preimages`, ``PostgresStorage/continueQuery(_:in:desiredKeys:limit:)``).
    private func keepVersions(_ names: [String], replacedAt seqs: [Int64], in zoneID: Int64) async throws {
        var bindings = PostgresRows.binds(key, zoneID)
        bindings.append(names)
        bindings.append(seqs)
        bindings.append(RecordCodec.seconds(now))
        try await connection.query(
            PostgresQuery(
                unsafeSQL: """
                    INSERT INTO query_preimages (container, owner, scope, zone_id, replaced_seq, name, record_type,
                        record_id, old_seq, created_ns, modified_ns, data, kept_at)
                    SELECT r.container, r.owner, r.scope, r.zone_id, v.seq, r.name, r.record_type, r.id, r.change_seq,
                        r.created_ns, r.modified_ns, r.data, $7
                    FROM unnest($5::text[], $6::bigint[]) AS v (name, seq)
                    JOIN records r ON r.container = $1 AND r.owner = $2 AND r.scope = $3 AND r.zone_id = $4
                        AND r.name = v.name
                    ON CONFLICT DO NOTHING
                    """,
                binds: bindings), logger: logger)
    }

    /// Replaces the references of the records saved again (`replacing`) with those of the
    /// saves (a target named twice by one record is one row), in one statement.
    private func writeReferences(
        _ references: ReferenceColumns, replacing: [String], in zone: PostgresZoneRow
    ) async throws {
        var bindings = PostgresRows.binds(key, zone.id)
        bindings.append(replacing)
        bindings.append(references.sources)
        bindings.append(references.targetZones)
        bindings.append(references.targetNames)
        // A row the save keeps is neither deleted nor inserted again (ON CONFLICT DO NOTHING):
        // in one statement, a row a WITH expression deletes and the main statement inserts
        // again would conflict.
        try await connection.query(
            PostgresQuery(
                unsafeSQL: """
                    WITH fresh AS (
                        SELECT * FROM unnest($6::text[], $7::text[], $8::text[])
                            AS saved (source_name, target_zone, target_name)
                    ),
                    dropped AS (
                        DELETE FROM cascade_references c
                        WHERE c.container = $1 AND c.owner = $2 AND c.scope = $3 AND c.source_zone_id = $4
                            AND c.source_name = ANY($5)
                            AND NOT EXISTS (
                                SELECT 1 FROM fresh f WHERE f.source_name = c.source_name
                                    AND f.target_zone = c.target_zone AND f.target_name = c.target_name)
                    )
                    INSERT INTO cascade_references (container, owner, scope, source_zone_id, source_name, target_zone,
                        target_name)
                    SELECT $1, $2, $3, $4, source_name, target_zone, target_name FROM fresh
                    ON CONFLICT DO NOTHING
                    """,
                binds: bindings), logger: logger)
    }

    /// Where a written zone moves: its change sequence after the write, and the request's
    /// client change token (nil keeps the zone's).
    struct ZoneMove {
        var changeSeq: Int64
        var clientChangeToken: Data?

        /// The common table expressions that bump the database's change sequence and move
        /// the zone ($4) to it and to `changeSeq`, bound as the next two parameters after
        /// `bindings`' (a statement starting `WITH`, then its own).
        func expressions(appendingTo bindings: inout PostgresBindings) throws -> String {
            bindings.append(changeSeq)
            let seqParameter = bindings.count
            try bindings.append(clientChangeToken)
            return """
                bumped AS (
                    UPDATE databases SET change_seq = change_seq + 1
                    WHERE container = $1 AND owner = $2 AND scope = $3
                    RETURNING change_seq
                ),
                moved AS (
                    UPDATE zones SET db_seq = bumped.change_seq, change_seq = $\(seqParameter),
                        client_change_token = coalesce($\(seqParameter + 1), client_change_token)
                    FROM bumped
                    WHERE container = $1 AND owner = $2 AND scope = $3 AND id = $4
                ),
                """
        }
    }

    /// The rows of the records a zone's items save, column by column (bound as arrays).
    struct RecordColumns {
        var names: [String] = []
        var types: [String] = []
        var tags: [String] = []
        var seqs: [Int64] = []
        var creators: [String] = []
        var data: [ByteBuffer] = []
        /// The system fields a query names (nanoseconds since 1970; a user record name).
        var created: [Int64] = []
        var modified: [Int64] = []
        var modifiers: [String] = []
    }

    /// The `deleteSelf` references of the records a zone's items save, one row each.
    struct ReferenceColumns {
        var sources: [String] = []
        var targetZones: [String] = []
        var targetNames: [String] = []
    }

    /// The tombstones of the records a zone's items delete, column by column.
    struct TombstoneColumns {
        var names: [String] = []
        var types: [String] = []
        var seqs: [Int64] = []
        /// The shares each record was in, one name per line (record names are printable
        /// ASCII); empty for none.
        var sharedBy: [String] = []
    }

    /// Writes the saves' rows and their index rows (``PostgresIndexRows``), replacing those of
    /// the records saved again (`replacing`), and moves the zone: one statement.
    private func writeSaves(
        _ saved: RecordColumns, indexing index: PostgresIndexRows.Columns, replacing: [String], in zone: PostgresZoneRow,
        moving move: ZoneMove
    ) async throws {
        var bindings = PostgresRows.binds(key, zone.id)
        bindings.append(saved.names)
        bindings.append(saved.types)
        bindings.append(saved.tags)
        bindings.append(saved.seqs)
        bindings.append(saved.creators)
        bindings.append(saved.data)
        bindings.append(saved.created)
        bindings.append(saved.modified)
        bindings.append(saved.modifiers)
        let moving = try move.expressions(appendingTo: &bindings)
        let indexing = PostgresIndexRows.expressions(index, replacing: replacing, appendingTo: &bindings)
        // A record saved again supersedes its tombstone. The creator of an existing record
        // stays; everything else is the save's. One statement: one round trip. (The index rows
        // reference the records; the server checks that after the whole statement.)
        try await connection.query(
            PostgresQuery(
                unsafeSQL: """
                    WITH \(moving)
                    \(indexing.expressions),
                    indexed AS (
                        \(indexing.insert)
                    ),
                    superseded AS (
                        DELETE FROM tombstones
                        WHERE container = $1 AND owner = $2 AND scope = $3 AND zone_id = $4 AND name = ANY($5)
                    )
                    INSERT INTO records (container, owner, scope, zone_id, name, record_type, change_tag, change_seq,
                        creator, data, created_ns, modified_ns, modifier)
                    SELECT $1, $2, $3, $4, name, record_type, change_tag, change_seq, creator, data, created_ns,
                        modified_ns, modifier
                    FROM unnest($5::text[], $6::text[], $7::text[], $8::bigint[], $9::text[], $10::bytea[],
                        $11::bigint[], $12::bigint[], $13::text[])
                        AS saved (name, record_type, change_tag, change_seq, creator, data, created_ns, modified_ns,
                            modifier)
                    ON CONFLICT (container, owner, scope, zone_id, name) DO UPDATE SET
                        record_type = excluded.record_type, change_tag = excluded.change_tag,
                        change_seq = excluded.change_seq, data = excluded.data, created_ns = excluded.created_ns,
                        modified_ns = excluded.modified_ns, modifier = excluded.modifier
                    """,
                binds: bindings), logger: logger)
    }

    private func writeDeletions(
        _ deleted: TombstoneColumns, in zone: PostgresZoneRow, moving move: ZoneMove?
    ) async throws {
        var bindings = PostgresRows.binds(key, zone.id)
        bindings.append(deleted.names)
        bindings.append(deleted.types)
        bindings.append(deleted.seqs)
        bindings.append(RecordCodec.seconds(now))
        bindings.append(deleted.sharedBy)
        let moving = try move?.expressions(appendingTo: &bindings) ?? ""
        try await connection.query(
            PostgresQuery(
                unsafeSQL: """
                    WITH \(moving)
                    gone AS (
                        DELETE FROM records
                        WHERE container = $1 AND owner = $2 AND scope = $3 AND zone_id = $4 AND name = ANY($5)
                    )
                    INSERT INTO tombstones (container, owner, scope, zone_id, name, record_type, seq, deleted_at,
                        shared_by)
                    SELECT $1, $2, $3, $4, name, record_type, seq, $8,
                        CASE WHEN shared_by = '' THEN NULL ELSE string_to_array(shared_by, E'\\n') END
                    FROM unnest($5::text[], $6::text[], $7::bigint[], $9::text[]) AS deleted (name, record_type, seq, shared_by)
                    ON CONFLICT (container, owner, scope, zone_id, name) DO UPDATE SET
                        record_type = excluded.record_type, seq = excluded.seq, deleted_at = excluded.deleted_at,
                        shared_by = excluded.shared_by
                    """,
                binds: bindings), logger: logger)
    }
}
