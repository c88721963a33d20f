import CirrusStore
import CirrusWire
import Foundation
import Logging
import NIOCore
import PostgresNIO

extension PostgresRecordWriter {
    /// Writes a zone's checked items in request order, each at the zone's next change
    /// sequence; the saved records as stored, by their index in the request.
    ///
    /// Saves go in one statement (an upsert that drops their tombstones), deletions in one
    /// (a delete and a tombstone upsert), whatever their number, the last of them also moving
    /// the zone along the database's change feed: a 400-record save is one statement.
    func apply(
        _ writes: [Write], in zone: PostgresZoneRow, clientChangeToken: Data?
    ) async throws -> [(Int, Wire.Record)] {
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
        // The zone moves to its last change sequence and to the database's next one in the
        // zone's last statement.
        let move = ZoneMove(changeSeq: seq, clientChangeToken: clientChangeToken)
        if !deleted.names.isEmpty { try await writeDeletions(deleted, in: zone, moving: saved.names.isEmpty ? move : nil) }
        if !saved.names.isEmpty { try await writeSaves(saved, in: zone, moving: move) }
        return stored
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
    }

    /// The tombstones of the records a zone's items delete, column by column.
    struct TombstoneColumns {
        var names: [String] = []
        var types: [String] = []
        var seqs: [Int64] = []
    }

    private func writeSaves(_ saved: RecordColumns, in zone: PostgresZoneRow, moving move: ZoneMove) async throws {
        var bindings = PostgresRows.binds(key, zone.id)
        bindings.append(saved.names)
        bindings.append(saved.types)
        bindings.append(saved.tags)
        bindings.append(saved.seqs)
        bindings.append(saved.creators)
        bindings.append(saved.data)
        let moving = try move.expressions(appendingTo: &bindings)
        // A record saved again supersedes its tombstone. The creator of an existing record
        // stays; everything else is the save's. One statement: one round trip.
        try await connection.query(
            PostgresQuery(
                unsafeSQL: """
                    WITH \(moving)
                    superseded AS (
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

    private func writeDeletions(
        _ deleted: TombstoneColumns, in zone: PostgresZoneRow, moving move: ZoneMove?
    ) async throws {
        var bindings = PostgresRows.binds(key, zone.id)
        bindings.append(deleted.names)
        bindings.append(deleted.types)
        bindings.append(deleted.seqs)
        bindings.append(RecordCodec.seconds(now))
        let moving = try move?.expressions(appendingTo: &bindings) ?? ""
        try await connection.query(
            PostgresQuery(
                unsafeSQL: """
                    WITH \(moving)
                    gone AS (
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
