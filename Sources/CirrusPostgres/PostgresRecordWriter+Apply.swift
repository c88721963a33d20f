import CirrusStore
import CirrusWire
import Logging
import NIOCore
import PostgresNIO

extension PostgresRecordWriter {
    /// Writes a zone's checked items in request order, each at the zone's next change
    /// sequence; the saved records as stored, by their index in the request.
    ///
    /// Saves go in one upsert, deletions in one delete and one tombstone upsert, whatever
    /// their number: a 400-record save is four statements.
    mutating func apply(_ writes: [Write], in zone: PostgresZoneRow) async throws -> [(Int, Wire.Record)] {
        let first = lastSeq(of: zone.id) ?? zone.changeSeq
        var seq = first
        var stored: [(Int, Wire.Record)] = []
        var saved = RecordColumns()
        var references = ReferenceColumns()
        var replacedSources: [String] = []
        var deleted = TombstoneColumns()
        let modifier = ZoneResolution.userRecordID(user)
        for write in writes {
            switch write {
            case .save(let prepared):
                seq += 1
                var record = prepared.record
                record.recordChangeTag = String(zone.id, radix: 36) + "-" + String(seq, radix: 36)
                record.creationDate = prepared.serverRecord?.creationDate ?? now
                record.modificationDate = now
                let creator = prepared.existing?.creator ?? user
                record.creatorUserRecordID = ZoneResolution.userRecordID(creator)
                record.lastModifiedUserRecordID = modifier
                saved.names.append(record.recordID?.recordName ?? "")
                saved.types.append(record.recordType)
                saved.tags.append(record.recordChangeTag)
                saved.seqs.append(seq)
                saved.creators.append(creator)
                saved.data.append(ByteBuffer(bytes: record.serializedBytes()))
                stored.append((prepared.index, record))
                let name = record.recordID?.recordName ?? ""
                if prepared.existing != nil { replacedSources.append(name) }
                for target in RecordCodec.deleteSelfTargets(of: record, zoneName: zone.name) {
                    references.sources.append(name)
                    references.targetZones.append(target.zone)
                    references.targetNames.append(target.name)
                }
            case .delete(_, let name, let existing):
                guard let existing else { continue }
                seq += 1
                deleted.names.append(name)
                deleted.types.append(existing.recordType)
                deleted.seqs.append(seq)
            }
        }
        guard seq > first else { return stored }
        if !deleted.names.isEmpty { try await writeDeletions(deleted, in: zone.id) }
        if !saved.names.isEmpty { try await writeSaves(saved, in: zone) }
        if !replacedSources.isEmpty || !references.sources.isEmpty {
            try await writeReferences(references, replacing: replacedSources, in: zone)
        }
        advance(zone.id, to: seq)
        for name in deleted.names { try await cascade(from: name, in: zone.name) }
        return stored
    }

    /// The last change sequence this write handed out in a zone, nil when none yet.
    func lastSeq(of zoneID: Int64) -> Int64? {
        touched.first { $0.zoneID == zoneID }?.changeSeq
    }

    private mutating func advance(_ zoneID: Int64, to seq: Int64) {
        if let index = touched.firstIndex(where: { $0.zoneID == zoneID }) {
            touched[index].changeSeq = seq
        } else {
            touched.append((zoneID, seq))
        }
    }

    /// Deletes every record holding a `deleteSelf` reference to the deleted record `name`
    /// of zone `zoneName`, transitively, each at its zone's next change sequence with a
    /// tombstone, depth first and a target's sources in the order they were saved (as the
    /// SQLite engine does). A record already gone (a cycle) is skipped.
    private mutating func cascade(from name: String, in zoneName: String) async throws {
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
                var bindings = PostgresRows.binds(key, source.zoneID)
                bindings.append(source.name)
                let removed = try await connection.query(
                    PostgresQuery(
                        unsafeSQL: """
                            DELETE FROM records
                            WHERE container = $1 AND owner = $2 AND scope = $3 AND zone_id = $4 AND name = $5
                            RETURNING record_type
                            """,
                        binds: bindings), logger: logger)
                var recordType: String?
                for try await type in removed.decode(String.self) { recordType = type }
                guard let recordType else { continue }
                let seq = try await nextSeq(in: source.zoneID)
                var tombstone = TombstoneColumns()
                tombstone.names = [source.name]
                tombstone.types = [recordType]
                tombstone.seqs = [seq]
                try await writeTombstones(tombstone, in: source.zoneID)
                cascaded.append(
                    Wire.RecordID(recordName: source.name, zoneID: ZoneResolution.zoneID(source.zoneName, in: key)))
                pending.append((source.zoneName, source.name))
            }
        }
    }

    /// Hands out a zone's next change sequence.
    private mutating func nextSeq(in zoneID: Int64) async throws -> Int64 {
        var current = lastSeq(of: zoneID)
        if current == nil {
            let rows = try await connection.query(
                PostgresQuery(
                    unsafeSQL: """
                        SELECT change_seq FROM zones WHERE container = $1 AND owner = $2 AND scope = $3 AND id = $4
                        """,
                    binds: PostgresRows.binds(key, zoneID)), logger: logger)
            for try await seq in rows.decode(Int64.self) { current = seq }
        }
        guard let current else { throw StoreError(.storageFailure, "zone \(zoneID) vanished during a write") }
        advance(zoneID, to: current + 1)
        return current + 1
    }

    /// The rows of the records a zone's items save, column by column (bound as arrays).
    struct RecordColumns {
        var names: [String] = []
        var types: [String] = []
        var tags: [String] = []
        var seqs: [Int64] = []
        var creators: [String] = []
        var data: [ByteBuffer] = []
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
    }

    private func writeSaves(_ saved: RecordColumns, in zone: PostgresZoneRow) async throws {
        var bindings = PostgresRows.binds(key, zone.id)
        bindings.append(saved.names)
        // A record saved again supersedes its tombstone.
        try await connection.query(
            PostgresQuery(
                unsafeSQL: """
                    DELETE FROM tombstones
                    WHERE container = $1 AND owner = $2 AND scope = $3 AND zone_id = $4 AND name = ANY($5)
                    """,
                binds: bindings), logger: logger)
        bindings.append(saved.types)
        bindings.append(saved.tags)
        bindings.append(saved.seqs)
        bindings.append(saved.creators)
        bindings.append(saved.data)
        // The creator of an existing record stays; everything else is the save's.
        try await connection.query(
            PostgresQuery(
                unsafeSQL: """
                    INSERT INTO records (container, owner, scope, zone_id, name, record_type, change_tag, change_seq,
                        creator, data)
                    SELECT $1, $2, $3, $4, name, record_type, change_tag, change_seq, creator, data
                    FROM unnest($5::text[], $6::text[], $7::text[], $8::bigint[], $9::text[], $10::bytea[])
                        AS saved (name, record_type, change_tag, change_seq, creator, data)
                    ON CONFLICT (container, owner, scope, zone_id, name) DO UPDATE SET
                        record_type = excluded.record_type, change_tag = excluded.change_tag,
                        change_seq = excluded.change_seq, data = excluded.data
                    """,
                binds: bindings), logger: logger)
    }

    /// Replaces the references of the records saved again (`replacing`) with those of the
    /// saves (a target named twice by one record is one row).
    private func writeReferences(
        _ references: ReferenceColumns, replacing: [String], in zone: PostgresZoneRow
    ) async throws {
        var bindings = PostgresRows.binds(key, zone.id)
        if !replacing.isEmpty {
            bindings.append(replacing)
            try await connection.query(
                PostgresQuery(
                    unsafeSQL: """
                        DELETE FROM cascade_references
                        WHERE container = $1 AND owner = $2 AND scope = $3 AND source_zone_id = $4
                            AND source_name = ANY($5)
                        """,
                    binds: bindings), logger: logger)
            bindings = PostgresRows.binds(key, zone.id)
        }
        guard !references.sources.isEmpty else { return }
        bindings.append(references.sources)
        bindings.append(references.targetZones)
        bindings.append(references.targetNames)
        try await connection.query(
            PostgresQuery(
                unsafeSQL: """
                    INSERT INTO cascade_references (container, owner, scope, source_zone_id, source_name, target_zone,
                        target_name)
                    SELECT $1, $2, $3, $4, source_name, target_zone, target_name
                    FROM unnest($5::text[], $6::text[], $7::text[]) AS saved (source_name, target_zone, target_name)
                    ON CONFLICT DO NOTHING
                    """,
                binds: bindings), logger: logger)
    }

    private func writeDeletions(_ deleted: TombstoneColumns, in zoneID: Int64) async throws {
        var bindings = PostgresRows.binds(key, zoneID)
        bindings.append(deleted.names)
        try await connection.query(
            PostgresQuery(
                unsafeSQL: """
                    DELETE FROM records
                    WHERE container = $1 AND owner = $2 AND scope = $3 AND zone_id = $4 AND name = ANY($5)
                    """,
                binds: bindings), logger: logger)
        try await writeTombstones(deleted, in: zoneID)
    }

    /// Writes (or moves) the tombstones of deleted records.
    private func writeTombstones(_ deleted: TombstoneColumns, in zoneID: Int64) async throws {
        var bindings = PostgresRows.binds(key, zoneID)
        bindings.append(deleted.names)
        bindings.append(deleted.types)
        bindings.append(deleted.seqs)
        bindings.append(RecordCodec.seconds(now))
        try await connection.query(
            PostgresQuery(
                unsafeSQL: """
                    INSERT INTO tombstones (container, owner, scope, zone_id, name, record_type, seq, deleted_at)
                    SELECT $1, $2, $3, $4, name, record_type, seq, $8
                    FROM unnest($5::text[], $6::text[], $7::bigint[]) AS deleted (name, record_type, seq)
                    ON CONFLICT (container, owner, scope, zone_id, name) DO UPDATE SET
                        record_type = excluded.record_type, seq = excluded.seq, deleted_at = excluded.deleted_at
                    """,
                binds: bindings), logger: logger)
    }
}
