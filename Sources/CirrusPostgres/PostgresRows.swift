import CirrusStore
import CirrusWire
import Foundation
import Logging
import NIOCore
import PostgresNIO

/// A stored zone row (live or a tombstone).
struct PostgresZoneRow: Sendable {
    var id: Int64
    var name: String
    var encryptionScope: Int32
    var changeSeq: Int64
    var prunedSeq: Int64
    var clientChangeToken: [UInt8]

    static let columns = "id, name, encryption_scope, change_seq, pruned_seq, client_change_token"
    typealias Columns = (Int64, String, Int32, Int64, Int64, Data?)

    init(_ columns: Columns) {
        (id, name, encryptionScope, changeSeq, prunedSeq) = (columns.0, columns.1, columns.2, columns.3, columns.4)
        clientChangeToken = columns.5.map { [UInt8]($0) } ?? []
    }
}

/// A stored record row.
struct PostgresRecordRow: Sendable, StoredRecordSummary {
    var name: String
    var recordType: String
    var changeTag: String
    var changeSeq: Int64
    var creator: String
    var data: ByteBuffer

    static let columns = "name, record_type, change_tag, change_seq, creator, data"
    typealias Columns = (String, String, String, Int64, String, ByteBuffer)

    init(_ columns: Columns) {
        (name, recordType, changeTag, changeSeq, creator, data) = columns
    }

    /// The record as stored (all fields, asset contents left out).
    func record() throws(StoreError) -> Wire.Record {
        do {
            return try Wire.Record(serializedBytes: Array(buffer: data))
        } catch {
            throw StoreError(.corruptData, "stored record \(name) does not decode: \(error)")
        }
    }
}

/// The reads and writes of the rows every part of the engine shares, each inside one
/// database (container, owner, scope).
enum PostgresRows {
    /// Creates the database with its default zone if it does not exist yet, then locks its
    /// row until the transaction ends: writers of one database take turns, so every change
    /// sequence they bump is gap-free and in commit order.
    ///
    /// One statement when the database exists (a database row is never deleted): the lock
    /// is taken first, and only a database not found is created.
    static func lockDatabase(_ connection: PostgresConnection, _ key: DatabaseKey, _ logger: Logger) async throws {
        let scope = key.scope.rawValue
        if try await lockRow(connection, key, logger) { return }
        let inserted = try await connection.query(
            """
            INSERT INTO databases (container, owner, scope) VALUES (\(key.container), \(key.owner), \(scope))
            ON CONFLICT DO NOTHING RETURNING 1
            """, logger: logger)
        var created = false
        for try await _ in inserted.decode(Int32.self) { created = true }
        if created {
            try await connection.query(
                """
                INSERT INTO zones (container, owner, scope, name, db_seq)
                VALUES (\(key.container), \(key.owner), \(scope), \(RecordCodec.defaultZoneName), 0)
                """, logger: logger)
        }
        // Created by this transaction (its new row is its own until the commit) or, when
        // another one created it first, waited for and committed by now.
        guard try await lockRow(connection, key, logger) else {
            throw StoreError(.storageFailure, "database \(key) has no row to lock")
        }
    }

    /// Locks the database's row; false when it has none.
    private static func lockRow(_ connection: PostgresConnection, _ key: DatabaseKey, _ logger: Logger) async throws -> Bool {
        let rows = try await connection.query(
            """
            SELECT 1 FROM databases WHERE container = \(key.container) AND owner = \(key.owner)
                AND scope = \(key.scope.rawValue)
            FOR UPDATE
            """, logger: logger)
        var found = false
        for try await _ in rows.decode(Int32.self) { found = true }
        return found
    }

    /// Increments and returns the database change sequence (its row is locked already).
    static func bumpDatabaseSeq(_ connection: PostgresConnection, _ key: DatabaseKey, _ logger: Logger) async throws
        -> Int64
    {
        let rows = try await connection.query(
            """
            UPDATE databases SET change_seq = change_seq + 1
            WHERE container = \(key.container) AND owner = \(key.owner) AND scope = \(key.scope.rawValue)
            RETURNING change_seq
            """, logger: logger)
        for try await seq in rows.decode(Int64.self) { return seq }
        throw StoreError(.storageFailure, "database \(key) has no row to count its changes in")
    }

    // MARK: Zones

    static func liveZone(
        _ connection: PostgresConnection, _ key: DatabaseKey, _ name: String, _ logger: Logger
    ) async throws -> PostgresZoneRow? {
        let rows = try await connection.query(
            PostgresQuery(
                unsafeSQL: """
                    SELECT \(PostgresZoneRow.columns) FROM zones
                    WHERE container = $1 AND owner = $2 AND scope = $3 AND name = $4 AND deleted_at IS NULL
                    """,
                binds: binds(key, name)), logger: logger)
        for try await columns in rows.decode(PostgresZoneRow.Columns.self) { return PostgresZoneRow(columns) }
        return nil
    }

    /// The live zones of a database, by name.
    static func liveZones(
        _ connection: PostgresConnection, _ key: DatabaseKey, _ logger: Logger
    ) async throws -> [PostgresZoneRow] {
        let rows = try await connection.query(
            PostgresQuery(
                unsafeSQL: """
                    SELECT \(PostgresZoneRow.columns) FROM zones
                    WHERE container = $1 AND owner = $2 AND scope = $3 AND deleted_at IS NULL ORDER BY name
                    """,
                binds: binds(key)), logger: logger)
        var zones: [PostgresZoneRow] = []
        for try await columns in rows.decode(PostgresZoneRow.Columns.self) { zones.append(PostgresZoneRow(columns)) }
        return zones
    }

    /// The bindings $1, $2, $3 of a database key, then `more` as text.
    static func binds(_ key: DatabaseKey, _ more: String...) -> PostgresBindings {
        var bindings = PostgresBindings(capacity: 3 + more.count)
        bindings.append(key.container)
        bindings.append(key.owner)
        bindings.append(key.scope.rawValue)
        for value in more { bindings.append(value) }
        return bindings
    }

    /// The bindings $1, $2, $3 of a database key, then a zone's ID as $4.
    static func binds(_ key: DatabaseKey, _ zoneID: Int64) -> PostgresBindings {
        var bindings = PostgresBindings(capacity: 4)
        bindings.append(key.container)
        bindings.append(key.owner)
        bindings.append(key.scope.rawValue)
        bindings.append(zoneID)
        return bindings
    }

    // MARK: Records

    /// A live zone and those of its records named in `names`, by name, with the database's
    /// subscriptions generation (``PostgresSubscriptionCache``) and whether the zone has a
    /// share, read in one statement (one round trip: a record write runs one per zone it
    /// writes); nil when the zone does not exist.
    static func liveZoneAndRecords(
        _ connection: PostgresConnection, _ key: DatabaseKey, _ zoneName: String, names: [String], _ logger: Logger
    ) async throws -> (
        zone: PostgresZoneRow, records: [String: PostgresRecordRow], subscriptionsGeneration: Int64, isShared: Bool
    )? {
        let rows = try await connection.execute(
            LiveZoneAndRecords(key: key, zoneName: zoneName, names: names), logger: logger)
        var zone: PostgresZoneRow?
        var records: [String: PostgresRecordRow] = [:]
        var generation: Int64 = 0
        var isShared = false
        for try await columns in rows {
            if zone == nil {
                zone = PostgresZoneRow((columns.0, columns.1, columns.2, columns.3, columns.4, columns.5))
                generation = columns.12
                isShared = columns.13
            }
            if let name = columns.6, let type = columns.7, let tag = columns.8, let seq = columns.9,
                let creator = columns.10, let data = columns.11
            {
                records[name] = PostgresRecordRow((name, type, tag, seq, creator, data))
            }
        }
        return zone.map { ($0, records, generation, isShared) }
    }

    /// The record `name` of the zone, if it is stored.
    static func record(
        _ connection: PostgresConnection, _ key: DatabaseKey, zoneID: Int64, name: String, _ logger: Logger
    ) async throws -> PostgresRecordRow? {
        var bindings = binds(key, zoneID)
        bindings.append(name)
        let rows = try await connection.query(
            PostgresQuery(
                unsafeSQL: """
                    SELECT \(PostgresRecordRow.columns) FROM records
                    WHERE container = $1 AND owner = $2 AND scope = $3 AND zone_id = $4 AND name = $5
                    """,
                binds: bindings), logger: logger)
        for try await columns in rows.decode(PostgresRecordRow.Columns.self) { return PostgresRecordRow(columns) }
        return nil
    }

    /// Which of `names` are records of the zone.
    static func existingNames(
        _ connection: PostgresConnection, _ key: DatabaseKey, zoneID: Int64, names: [String], _ logger: Logger
    ) async throws -> Set<String> {
        guard !names.isEmpty else { return [] }
        var bindings = binds(key, zoneID)
        bindings.append(names)
        let rows = try await connection.query(
            PostgresQuery(
                unsafeSQL: """
                    SELECT name FROM records
                    WHERE container = $1 AND owner = $2 AND scope = $3 AND zone_id = $4 AND name = ANY($5)
                    """,
                binds: bindings), logger: logger)
        var result = Set<String>()
        for try await name in rows.decode(String.self) { result.insert(name) }
        return result
    }
}

/// A stored record as a migration's backfill reads it: where it is, its name, and the record.
struct StoredRecordRow {
    var container: String
    var owner: String
    var scope: Int32
    var zoneID: Int64
    var name: String
    var record: Wire.Record

    /// Whether `other` is a record of the same zone.
    func sharesZone(with other: StoredRecordRow) -> Bool {
        container == other.container && owner == other.owner && scope == other.scope && zoneID == other.zoneID
    }
}

extension PostgresRows {
    /// Calls `body` with every stored record, a thousand per read, in key order (so the records
    /// of one zone come together): what a migration's backfill derives its rows from.
    ///
    /// - throws: ``StoreError`` `.corruptData` for a stored record that does not decode.
    static func forEachBatchOfStoredRecords(
        _ connection: PostgresConnection, _ logger: Logger, _ body: ([StoredRecordRow]) async throws -> Void
    ) async throws {
        typealias Row = (String, String, Int32, Int64, String, ByteBuffer)
        var after: Row?
        while true {
            var bindings = PostgresBindings(capacity: 5)
            var condition = ""
            if let after {
                bindings.append(after.0)
                bindings.append(after.1)
                bindings.append(after.2)
                bindings.append(after.3)
                bindings.append(after.4)
                condition = "WHERE (container, owner, scope, zone_id, name) > ($1, $2, $3, $4, $5)"
            }
            let rows = try await connection.query(
                PostgresQuery(
                    unsafeSQL: """
                        SELECT container, owner, scope, zone_id, name, data FROM records \(condition)
                        ORDER BY container, owner, scope, zone_id, name LIMIT 1000
                        """,
                    binds: bindings), logger: logger)
            var read: [Row] = []
            for try await row in rows.decode(Row.self) { read.append(row) }
            guard let last = read.last else { return }
            after = last
            var batch: [StoredRecordRow] = []
            batch.reserveCapacity(read.count)
            for row in read {
                let record: Wire.Record
                do {
                    record = try Wire.Record(serializedBytes: Array(buffer: row.5))
                } catch {
                    throw StoreError(.corruptData, "stored record \(row.4) does not decode: \(error)")
                }
                batch.append(
                    StoredRecordRow(container: row.0, owner: row.1, scope: row.2, zoneID: row.3, name: row.4, record: record))
            }
            try await body(batch)
        }
    }
}

/// The read of a zone and some of its records every write and fetch starts with, prepared
/// once per connection: the server plans it once (about half a millisecond a time here)
/// rather than at every call.
struct LiveZoneAndRecords: PostgresPreparedStatement {
    typealias Row = (
        Int64, String, Int32, Int64, Int64, Data?, String?, String?, String?, Int64?, String?, ByteBuffer?, Int64, Bool
    )

    static let sql = """
        SELECT z.id, z.name, z.encryption_scope, z.change_seq, z.pruned_seq, z.client_change_token,
            r.name, r.record_type, r.change_tag, r.change_seq, r.creator, r.data, d.subscriptions_generation,
            EXISTS (
                SELECT 1 FROM shares s WHERE s.container = z.container AND s.owner = z.owner
                    AND s.scope = z.scope AND s.zone_id = z.id
            )
        FROM zones z JOIN databases d
            ON d.container = z.container AND d.owner = z.owner AND d.scope = z.scope
        LEFT JOIN records r
            ON r.container = z.container AND r.owner = z.owner AND r.scope = z.scope AND r.zone_id = z.id
            AND r.name = ANY($5)
        WHERE z.container = $1 AND z.owner = $2 AND z.scope = $3 AND z.name = $4 AND z.deleted_at IS NULL
        """

    var key: DatabaseKey
    var zoneName: String
    var names: [String]

    func makeBindings() throws -> PostgresBindings {
        var bindings = PostgresRows.binds(key, zoneName)
        bindings.append(names)
        return bindings
    }

    func decodeRow(_ row: PostgresRow) throws -> Row {
        try row.decode(Row.self)
    }
}
