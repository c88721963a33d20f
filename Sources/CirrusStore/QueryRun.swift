import CirrusWire
import Foundation
import GRDB

/// A record a query may return, at `position` in the query's order: a row
/// unchanged since the cursor's change sequence (`id` set), or a record that
/// changed since, placed by its version of then (`id` nil: loaded by name).
struct QueryCandidate: Sendable {
    var position: QueryKeyset.Position
    var id: Int64?
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

    /// Up to `limit` matching records from `next()` in order, the position of
    /// the last of them, and whether another match follows. A candidate that
    /// is gone, was replaced by another record under its row ID, or no longer
    /// matches is skipped; a returned record is as stored now.
    mutating func page(
        limit: Int, next: () throws -> QueryCandidate?
    ) throws -> (records: [Wire.Record], last: QueryKeyset.Position?, more: Bool) {
        let db = self.db
        let evaluator = QueryEvaluator(zoneName: zoneName, databaseOwner: key.owner) { rowID, search in
            try db.int64(
                sql: "SELECT rowid FROM record_text WHERE record_text MATCH ? AND rowid = ?",
                arguments: [search.matchExpression, rowID]) != nil
        }
        var records: [Wire.Record] = []
        var last: QueryKeyset.Position?
        while let candidate = try next() {
            let row: Row?
            // The record's columns, then its zone and name.
            let selection = "SELECT \(RecordRow.columns), zone_id, name FROM records"
            if let id = candidate.id {
                row = try db.row(sql: "\(selection) WHERE id = ?", arguments: [id])
            } else {
                row = try db.row(sql: "\(selection) WHERE zone_id = ? AND name = ?", arguments: [zoneID, candidate.position.name])
            }
            guard let row else { continue }
            examined += 1
            let stored = RecordRow(row: row)
            let storedZoneID: Int64 = row[RecordRow.columnCount]
            let storedName: String = row[RecordRow.columnCount + 1]
            guard storedZoneID == zoneID, storedName == candidate.position.name, stored.recordType == query.recordType
            else { continue }
            let record = try stored.record()
            guard try evaluator.matches(query.predicate, record, rowID: stored.id) else { continue }
            if records.count == limit { return (records, last, true) }
            var result = RecordCodec.restrict(record, to: desiredKeys)
            RecordCodec.fillAssets(&result, from: try StoreRows.assetContents(db, for: result))
            records.append(result)
            last = candidate.position
        }
        return (records, last, false)
    }
}
