import CirrusWire
import Foundation
import GRDB
import Synchronization

/// The zones that may have live query cursors, so that a change to one of
/// their records keeps the record's version from before the change (its
/// *pre-image*, table `query_preimages`, schema v6) for the cursors that
/// began before it.
///
/// Triggers on `records` ask `cirrus_query_cursor_live(zone_id)` (registered
/// on every connection) inside the writing transaction; it answers the
/// current time while the zone is live, NULL otherwise. A zone becomes live
/// on the writer queue (``SQLiteStorage/makeQueryZoneLive(_:)``) before a first
/// page reads it, so every write after that page's snapshot keeps pre-images.
/// Nothing here is written by a read: it is memory, and after a restart every
/// zone is live for one cursor lifetime (cursors sealed before the restart
/// stay valid that long).
final class QueryCursorZones: Sendable {
    private struct State {
        /// Per zone: until when it keeps pre-images, and the generation that made it live.
        var zones: [Int64: (until: Double, generation: UInt64)] = [:]
        var everyZoneUntil: Double = 0
        var generation: UInt64 = 0
    }

    private let state = Mutex(State())
    private let clock: @Sendable () -> Wire.Timestamp

    init(clock: @escaping @Sendable () -> Wire.Timestamp) {
        self.clock = clock
    }

    var now: Double { RecordCodec.seconds(clock()) }

    /// Counts the zones made live so far: read before a snapshot begins.
    var generation: UInt64 { state.withLock { $0.generation } }

    /// Whether writes to `zone` keep pre-images until at least `time`, by a
    /// registration of `generation` or before (nil: any).
    func covers(_ zone: Int64, until time: Double, madeBy generation: UInt64? = nil) -> Bool {
        state.withLock { state in
            if state.everyZoneUntil >= time { return true }
            guard let entry = state.zones[zone], entry.until >= time else { return false }
            return generation.map { entry.generation <= $0 } ?? true
        }
    }

    /// Keeps pre-images of `zone` until `time`; call only on the writer queue.
    func keep(_ zone: Int64, until time: Double) {
        let now = self.now
        state.withLock { state in
            state.generation += 1
            // A zone live without a break keeps the generation that first made it live.
            let previous = state.zones[zone].flatMap { $0.until > now ? $0 : nil }
            state.zones[zone] = (max(previous?.until ?? 0, time), previous?.generation ?? state.generation)
            // Forget zones whose cursors are all gone.
            if state.zones.count > 1_024 { state.zones = state.zones.filter { $0.value.until > now } }
        }
    }

    /// Keeps pre-images of every zone until `time` (a store reopened with cursors outstanding).
    func keepEveryZone(until time: Double) {
        state.withLock { $0.everyZoneUntil = max($0.everyZoneUntil, time) }
    }

    /// `cirrus_query_cursor_live(zone_id)`: the time now while `zone_id`
    /// keeps pre-images, else NULL.
    var sqlFunction: DatabaseFunction {
        DatabaseFunction("cirrus_query_cursor_live", argumentCount: 1, pure: false) { [self] arguments in
            guard let zone = Int64.fromDatabaseValue(arguments[0]) else { return nil }
            // The clock is read only for a zone that may be live.
            let until = state.withLock { state -> Double? in
                let until = max(state.zones[zone]?.until ?? 0, state.everyZoneUntil)
                return until > 0 ? until : nil
            }
            guard let until else { return nil }
            let now = self.now
            return until >= now ? now : nil
        }
    }
}

extension SQLiteStorage {
    /// Makes `zone` keep pre-images for two cursor lifetimes from now: on
    /// the writer queue, between write transactions, so every write that
    /// commits after this returns sees the zone live.
    func makeQueryZoneLive(_ zone: Int64) async throws {
        let zones = queryCursorZones
        let until = zones.now + 2 * queryCursorLifetime
        do {
            try await pool.writeWithoutTransaction { _ in zones.keep(zone, until: until) }
        } catch {
            throw StoreError.wrapping(error)
        }
    }
}

/// The records of a zone and type that existed at a cursor's change sequence
/// and changed since, each with its version as of then.
enum QueryPreimages {
    static func changed(
        _ db: Database, zoneID: Int64, since seq: Int64, recordType: String, sorts: [QuerySort]
    ) throws -> [QueryCandidate] {
        let rows = try db.rows(
            sql: """
                SELECT name, record_type, record_id, old_seq, created_ns, modified_ns, data FROM query_preimages
                WHERE zone_id = ? AND replaced_seq > ? ORDER BY replaced_seq
                """,
            arguments: [zoneID, seq])
        let versions = rows.map { row in
            KeptRecordVersion(
                name: row["name"], recordType: row["record_type"], rowID: row["record_id"], oldSeq: row["old_seq"],
                createdNanoseconds: row["created_ns"], modifiedNanoseconds: row["modified_ns"],
                data: [UInt8](row["data"] as Data))
        }
        return try KeptRecordVersion.positions(versions, at: seq, recordType: recordType, sorts: sorts)
            .map { QueryCandidate(position: $0, id: nil) }
    }
}

/// A record version a write replaced while query cursors may still need it (a *pre-image*),
/// as every engine keeps them.
package struct KeptRecordVersion: Sendable {
    package var name: String
    package var recordType: String
    /// The record's row ID (the tie-break of a query without sort descriptors).
    package var rowID: Int64
    /// The change sequence of the version (the record's before the write).
    package var oldSeq: Int64
    package var createdNanoseconds: Int64?
    package var modifiedNanoseconds: Int64?
    /// The serialized `Wire.Record`.
    package var data: [UInt8]

    package init(
        name: String, recordType: String, rowID: Int64, oldSeq: Int64, createdNanoseconds: Int64?,
        modifiedNanoseconds: Int64?, data: [UInt8]
    ) {
        self.name = name
        self.recordType = recordType
        self.rowID = rowID
        self.oldSeq = oldSeq
        self.createdNanoseconds = createdNanoseconds
        self.modifiedNanoseconds = modifiedNanoseconds
        self.data = data
    }

    /// The positions, in the order of `sorts`, of the records of `recordType` that existed
    /// at change sequence `seq` and changed since, from the versions replaced after `seq`
    /// in the order they were replaced: per record name, the first version replaced after
    /// `seq` is the one it had at `seq` — unless that version was itself made after `seq`.
    package static func positions(
        _ versions: [KeptRecordVersion], at seq: Int64, recordType: String, sorts: [QuerySort]
    ) throws(StoreError) -> [QueryKeyset.Position] {
        var seen = Set<String>()
        var positions: [QueryKeyset.Position] = []
        for version in versions {
            guard seen.insert(version.name).inserted else { continue }
            guard version.oldSeq <= seq, version.recordType == recordType else { continue }
            let record: Wire.Record
            do {
                record = try Wire.Record(serializedBytes: version.data)
            } catch {
                throw StoreError(.corruptData, "a kept record version does not decode: \(error)")
            }
            let values = QueryKeyset.values(
                of: record, createdNanoseconds: version.createdNanoseconds,
                modifiedNanoseconds: version.modifiedNanoseconds, sorts)
            positions.append(QueryKeyset.Position(values: values, name: version.name, rowID: version.rowID))
        }
        return positions
    }
}
