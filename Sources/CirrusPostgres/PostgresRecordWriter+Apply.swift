import CirrusStore
import CirrusWire
import Logging
import NIOCore
import PostgresNIO

extension PostgresRecordWriter {
    /// Writes a zone's checked items in request order, each at the zone's next change
    /// sequence; the saved records as stored, by their index in the request.
    ///
    /// Saves go in one statement (an upsert that drops their tombstones), deletions in one
    /// (a delete and a tombstone upsert), whatever their number: a 400-record save is two
    /// statements.
    mutating func apply(_ writes: [Write], in zone: PostgresZoneRow) async throws -> [(Int, Wire.Record)] {
        var seq = zone.changeSeq
        var stored: [(Int, Wire.Record)] = []
        var saved = RecordColumns()
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
            case .delete(_, let name, let existing):
                guard let existing else { continue }
                seq += 1
                deleted.names.append(name)
                deleted.types.append(existing.recordType)
                deleted.seqs.append(seq)
            }
        }
        guard seq > zone.changeSeq else { return stored }
        if !deleted.names.isEmpty { try await writeDeletions(deleted, in: zone) }
        if !saved.names.isEmpty { try await writeSaves(saved, in: zone) }
        touched.append((zone.id, seq))
        return stored
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

    /// The tombstones of the records a zone's items delete, column by column.
    struct TombstoneColumns {
        var names: [String] = []
        var types: [String] = []
        var seqs: [Int64] = []
    }

    private func writeSaves(_ saved: RecordColumns, in zone: PostgresZoneRow) async throws {
        var bindings = PostgresRows.binds(key, zone.id)
        bindings.append(saved.names)
        bindings.append(saved.types)
        bindings.append(saved.tags)
        bindings.append(saved.seqs)
        bindings.append(saved.creators)
        bindings.append(saved.data)
        // A record saved again supersedes its tombstone. The creator of an existing record
        // stays; everything else is the save's. One statement: one round trip.
        try await connection.query(
            PostgresQuery(
                unsafeSQL: """
                    WITH superseded AS (
                        DELETE FROM tombstones
                        WHERE container = $1 AND owner = $2 AND scope = $3 AND zone_id = $4 AND name = ANY($5)
                    )
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

    private func writeDeletions(_ deleted: TombstoneColumns, in zone: PostgresZoneRow) async throws {
        var bindings = PostgresRows.binds(key, zone.id)
        bindings.append(deleted.names)
        bindings.append(deleted.types)
        bindings.append(deleted.seqs)
        bindings.append(RecordCodec.seconds(now))
        try await connection.query(
            PostgresQuery(
                unsafeSQL: """
                    WITH gone AS (
                        DELETE FROM records
                        WHERE container = $1 AND owner = $2 AND scope = $3 AND zone_id = $4 AND name = ANY($5)
                    )
                    INSERT INTO tombstones (container, owner, scope, zone_id, name, record_type, seq, deleted_at)
                    SELECT $1, $2, $3, $4, name, record_type, seq, $8
                    FROM unnest($5::text[], $6::text[], $7::bigint[]) AS deleted (name, record_type, seq)
                    ON CONFLICT (container, owner, scope, zone_id, name) DO UPDATE SET
                        record_type = excluded.record_type, seq = excluded.seq, deleted_at = excluded.deleted_at
                    """,
                binds: bindings), logger: logger)
    }
}
