import CirrusWire
import Foundation
import GRDB

/// A record a query may return: its row and name when the candidates were
/// listed, at `position` in their order.
struct QueryCandidate: Sendable {
    var position: Int
    var id: Int64
    var name: String
}

/// Loads candidates in order and keeps those that match, one page at a time.
struct QueryRun {
    let db: Database
    let query: CompiledQuery
    let zoneID: Int64
    let zoneName: String
    let key: DatabaseKey
    let desiredKeys: [String]?
    /// Stored records loaded and checked so far.
    private(set) var examined = 0

    init(db: Database, query: CompiledQuery, zoneID: Int64, zoneName: String, key: DatabaseKey, desiredKeys: [String]?) {
        self.db = db
        self.query = query
        self.zoneID = zoneID
        self.zoneName = zoneName
        self.key = key
        self.desiredKeys = desiredKeys
    }

    /// Up to `limit` matching records from `next()` in order, and the position
    /// of the first match after them (nil = none). A candidate that is gone,
    /// was replaced by another record under its row ID, or no longer matches
    /// is skipped; a returned record is as stored now.
    mutating func page(limit: Int, next: () throws -> QueryCandidate?) throws -> (records: [Wire.Record], next: Int?) {
        let db = self.db
        let evaluator = QueryEvaluator(zoneName: zoneName, databaseOwner: key.owner) { rowID, search in
            try db.int64(
                sql: "SELECT rowid FROM record_text WHERE record_text MATCH ? AND rowid = ?",
                arguments: [search.matchExpression, rowID]) != nil
        }
        var records: [Wire.Record] = []
        while let candidate = try next() {
            guard let row = try db.row(sql: "SELECT * FROM records WHERE id = ?", arguments: [candidate.id]) else { continue }
            examined += 1
            guard row["zone_id"] == zoneID, row["name"] == candidate.name, row["record_type"] == query.recordType else {
                continue
            }
            let record = try RecordRow(row: row).record()
            guard try evaluator.matches(query.predicate, record, rowID: candidate.id) else { continue }
            if records.count == limit { return (records, candidate.position) }
            var result = RecordCodec.restrict(record, to: desiredKeys)
            RecordCodec.fillAssets(&result, from: try StoreRows.assetContents(db, for: result))
            records.append(result)
        }
        return (records, nil)
    }
}

/// What a client holds to continue a query: a snapshot's random ID and the
/// position to go on from. Version byte, 16 ID bytes, 8 position bytes (big-endian).
struct QueryCursorToken: Sendable, Hashable {
    static let version: UInt8 = 1
    static let idLength = 16

    var id: [UInt8]
    var position: Int

    init(id: [UInt8], position: Int) {
        self.id = id
        self.position = position
    }

    /// Nil unless `bytes` is a token of this version.
    init?(_ bytes: [UInt8]) {
        guard bytes.count == 1 + Self.idLength + 8, bytes[0] == Self.version else { return nil }
        id = Array(bytes[1...Self.idLength])
        var position: UInt64 = 0
        for byte in bytes[(1 + Self.idLength)...] { position = position << 8 | UInt64(byte) }
        guard position <= UInt64(Int32.max) else { return nil }
        self.position = Int(position)
    }

    var bytes: [UInt8] {
        let position = UInt64(self.position)
        return [Self.version] + id + (0..<8).reversed().map { UInt8(truncatingIfNeeded: position >> ($0 * 8)) }
    }

    static func randomID() -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        return (0..<idLength).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
    }
}
