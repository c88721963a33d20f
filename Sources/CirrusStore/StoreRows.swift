import CirrusWire
import Foundation
import GRDB

/// A live zone row.
struct ZoneRow: Sendable {
    var id: Int64
    var name: String
    var encryptionScope: Int32
    var changeSeq: Int64
    var prunedSeq: Int64
    var clientChangeToken: [UInt8]

    /// The columns ``init(row:)`` reads, in its order (by position, as ``RecordRow`` does:
    /// GRDB's search by name lowercases every name looked up, and the zone lookup of every
    /// fetch and write spent more than the record's own lookup on it).
    static let columns = "id, name, encryption_scope, change_seq, pruned_seq, client_change_token"

    init(row: Row) {
        id = row[0]
        name = row[1]
        encryptionScope = row[2]
        changeSeq = row[3]
        prunedSeq = row[4]
        clientChangeToken = (row[5] as Data?).map { [UInt8]($0) } ?? []
    }

    /// The same columns from a ``RawStatement``'s row.
    init(raw row: RawRow) {
        id = row.int64(0)
        name = row.string(1)
        encryptionScope = row.int32(2)
        changeSeq = row.int64(3)
        prunedSeq = row.int64(4)
        clientChangeToken = row.bytes(5)
    }
}

/// A stored record row.
struct RecordRow: Sendable, StoredRecordSummary {
    var id: Int64
    var recordType: String
    var changeTag: String
    var changeSeq: Int64
    var creator: String
    /// The record as stored: a serialized `Wire.Record`.
    var data: [UInt8]

    /// The columns ``init(row:)`` reads, in its order: a statement selects them first
    /// (`SELECT \(RecordRow.columns), name FROM records …`). Reading by position spares GRDB's
    /// case-insensitive search of the row's column names for every value of every row.
    static let columns = "id, record_type, change_tag, change_seq, creator, data"
    /// The number of ``columns``: the position of the first column selected after them.
    static let columnCount = 6

    init(row: Row) {
        id = row[0]
        recordType = row[1]
        changeTag = row[2]
        changeSeq = row[3]
        creator = row[4]
        data = [UInt8](row[5] as Data)
    }

    /// The same columns from a ``RawStatement``'s row.
    init(raw row: RawRow) {
        id = row.int64(0)
        recordType = row.string(1)
        changeTag = row.string(2)
        changeSeq = row.int64(3)
        creator = row.string(4)
        data = row.bytes(5)
    }

    func record() throws -> Wire.Record {
        try Self.record(data, id: id)
    }

    /// Stored record bytes (`records.data` of row `id`), decoded.
    ///
    /// - throws: ``StoreError`` `.corruptData` when they do not decode.
    static func record(_ data: [UInt8], id: Int64) throws -> Wire.Record {
        do {
            return try Wire.Record(serializedBytes: data)
        } catch {
            throw StoreError(.corruptData, "stored record \(id) does not decode: \(error)")
        }
    }
}

/// SQL of the store, one function per statement, all on the given connection.
enum StoreRows {
    // MARK: Databases

    // The lookups every fetch and write makes go through SQLite's C API (``RawStatement``).
    static func databaseID(_ db: Database, _ key: DatabaseKey) throws -> Int64? {
        let lookup = try RawStatement(db, sql: "SELECT id FROM databases WHERE container = ? AND scope = ? AND owner = ?")
        lookup.bind(1, key.container)
        lookup.bind(2, Int64(key.scope.rawValue))
        lookup.bind(3, key.owner)
        return try lookup.int64()
    }

    /// The database's row ID, creating the database with its default zone.
    static func ensureDatabase(_ db: Database, _ key: DatabaseKey) throws -> Int64 {
        if let id = try databaseID(db, key) { return id }
        try db.run(
            sql: "INSERT INTO databases (container, scope, owner) VALUES (?, ?, ?)",
            arguments: [key.container, key.scope.rawValue, key.owner])
        let id = db.lastInsertedRowID
        try db.run(
            sql: "INSERT INTO zones (database_id, name, db_seq) VALUES (?, ?, 0)",
            arguments: [id, RecordCodec.defaultZoneName])
        return id
    }

    /// Increments and returns the database change sequence.
    /// (Through ``RawStatement``: every commit that saved records runs it once per zone.)
    static func bumpDatabaseSeq(_ db: Database, _ databaseID: Int64) throws -> Int64 {
        try db.int64(
            sql: "UPDATE databases SET change_seq = change_seq + 1 WHERE id = ? RETURNING change_seq", integer: databaseID)
            ?? 0
    }

    // MARK: Zones

    // The statements of the lookups every fetch and write makes (here and `recordSQL` below),
    // built once, not interpolated at every call, for the statement cache's lookup by text.
    private static let liveZoneSQL =
        "SELECT \(ZoneRow.columns) FROM zones WHERE database_id = ? AND name = ? AND deleted_at IS NULL"
    private static let liveZonesSQL =
        "SELECT \(ZoneRow.columns) FROM zones WHERE database_id = ? AND deleted_at IS NULL ORDER BY name"

    static func liveZone(_ db: Database, _ databaseID: Int64, _ name: String) throws -> ZoneRow? {
        let lookup = try RawStatement(db, sql: liveZoneSQL)
        lookup.bind(1, databaseID)
        lookup.bind(2, name)
        return try lookup.firstRow(ZoneRow.init(raw:))
    }

    static func liveZones(_ db: Database, _ databaseID: Int64) throws -> [ZoneRow] {
        try db.rows(sql: liveZonesSQL, arguments: [databaseID]).map(ZoneRow.init)
    }

    // MARK: Records

    private static let recordSQL = "SELECT \(RecordRow.columns) FROM records WHERE zone_id = ? AND name = ?"

    static func record(_ db: Database, zoneID: Int64, name: String) throws -> RecordRow? {
        let lookup = try RawStatement(db, sql: recordSQL)
        lookup.bind(1, zoneID)
        lookup.bind(2, name)
        return try lookup.firstRow(RecordRow.init(raw:))
    }

    /// Whether the zone holds a record named `name`.
    static func recordExists(_ db: Database, zoneID: Int64, name: String) throws -> Bool {
        try db.int64(sql: "SELECT 1 FROM records WHERE zone_id = ? AND name = ?", arguments: [zoneID, name]) != nil
    }

    /// The stored rows of `names` in a zone, by name, read in one probe per
    /// ``probeSizes``' largest (512) names instead of one per record.
    ///
    /// Each probe is an IN list of one of a few sizes, the names bound and the places left over
    /// NULL (which matches no name): the connection's statement cache then holds at most one
    /// statement per size, not one per count of names a request ever saved, and the rows are
    /// read through ``RawStatement`` (no `StatementArguments` of every name, no GRDB `Row`).
    static func records(_ db: Database, zoneID: Int64, names: [String]) throws -> [String: RecordRow] {
        // One name (a single-record save, the common case): the plain lookup, without
        // building an IN list and its arguments.
        if names.count == 1, let name = names.first {
            return try record(db, zoneID: zoneID, name: name).map { [name: $0] } ?? [:]
        }
        var result: [String: RecordRow] = [:]
        var start = 0
        while start < names.count {
            let count = min(names.count - start, probeSizes[probeSizes.count - 1])
            let size = probeSizes.firstIndex { $0 >= count } ?? probeSizes.count - 1
            // Bindings come cleared (NULL) from the statement cache.
            let probe = try RawStatement(db, sql: probeSQL[size])
            probe.bind(1, zoneID)
            for offset in 0..<count { probe.bind(Int32(offset + 2), names[start + offset]) }
            try probe.forEachRow { row in
                result[row.string(Int32(RecordRow.columnCount))] = RecordRow(raw: row)
            }
            start += count
        }
        return result
    }

    /// The sizes of the IN lists of ``records(_:zoneID:names:)``.
    static let probeSizes = [2, 4, 8, 16, 32, 64, 128, 256, 512]

    /// A probe's SQL per ``probeSizes`` entry.
    private static let probeSQL = probeSizes.map { size in
        let marks = Array(repeating: "?", count: size).joined(separator: ", ")
        return "SELECT \(RecordRow.columns), name FROM records WHERE zone_id = ? AND name IN (\(marks))"
    }

    /// Asset contents by checksum for the assets of `record` that lack content.
    static func assetContents(_ db: Database, for record: Wire.Record) throws -> [[UInt8]: [UInt8]] {
        var result: [[UInt8]: [UInt8]] = [:]
        for checksum in RecordCodec.assetChecksums(in: record) {
            if let content = try db.data(
                // A row whose blob is shorter than its size is a file of the asset store:
                // the record goes out without inline content.
                sql: "SELECT content FROM assets WHERE sha256 = ? AND length(content) = size",
                arguments: [Data(checksum)])
            {
                result[checksum] = [UInt8](content)
            }
        }
        return result
    }

    /// The stored record restricted to `desiredKeys`, optionally with asset content.
    static func load(
        _ db: Database, _ row: RecordRow, desiredKeys: [String]?, assetContent: Bool
    ) throws -> Wire.Record {
        var record = RecordCodec.restrict(try row.record(), to: desiredKeys)
        if assetContent {
            RecordCodec.fillAssets(&record, from: try assetContents(db, for: record))
        }
        return record
    }
}
