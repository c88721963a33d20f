import CirrusWire
import Foundation
import GRDB

/// What a query finds a record by: its `record_values` rows (schema v7), its
/// full-text row and the system-field columns of `records` (schema v2).
extension StoreRows {
    /// Writes the index of `record`, stored as row `recordID` of zone `zoneID`: the rows of
    /// the fields and the text that `indexed` says the zone's records of its type index
    /// (``FieldIndexing``). The record's earlier index must be gone (``deleteIndex(_:recordID:)``).
    static func insertIndex(
        _ db: Database, recordID: Int64, zoneID: Int64, record: Wire.Record, indexed: FieldIndexing.Indexed
    ) throws {
        if indexed.all || !indexed.keys.isEmpty {
            var rows = RecordCodec.indexRows(of: record)
            if !indexed.all { rows.removeAll { !indexed.keys.contains($0.key) } }
            try insertValues(db, recordID: recordID, zoneID: zoneID, recordType: record.recordType, rows: rows)
        }
        if indexed.text { try insertText(db, recordID: recordID, record: record) }
    }

    /// Writes `rows` into `record_values` for row `recordID`.
    static func insertValues(
        _ db: Database, recordID: Int64, zoneID: Int64, recordType: String, rows: [FieldIndexRow]
    ) throws {
        if rows.isEmpty { return }
        // Bound through SQLite's C API (``RawStatement``): a record writes one row per value.
        let insert = try RawStatement(
            db,
            sql: """
                INSERT INTO record_values (record_id, key, list_index, kind, zone_id, record_type, value, value2)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                """)
        for row in rows {
            insert.bind(1, recordID)
            insert.bind(2, row.key)
            insert.bind(3, row.listIndex)
            insert.bind(4, row.kind.rawValue)
            insert.bind(5, zoneID)
            insert.bind(6, recordType)
            // The one value column that is set (``FieldIndexRow/value``), NULL for none.
            if let int = row.int {
                insert.bind(7, int)
            } else if let real = row.real {
                insert.bind(7, real)
            } else if let text = row.text {
                insert.bind(7, text)
            } else if let blob = row.blob {
                insert.bind(7, blob)
            } else {
                insert.bindNull(7)
            }
            insert.bind(8, row.real2)
            try insert.run()
        }
    }

    /// Writes the full-text row of `record` (row `recordID`), if it has any text.
    static func insertText(_ db: Database, recordID: Int64, record: Wire.Record) throws {
        guard let text = RecordCodec.searchableText(of: record) else { return }
        let insert = try RawStatement(db, sql: "INSERT INTO record_text (rowid, body) VALUES (?, ?)")
        insert.bind(1, recordID)
        insert.bind(2, text)
        try insert.run()
    }

    /// The `records` columns of the system fields a query can name
    /// (`created_ns`, `modified_ns`, `modifier`), from the record itself.
    static func systemColumns(of record: Wire.Record) -> (created: Int64?, modified: Int64?, modifier: String?) {
        (record.creationDate.map(RecordCodec.nanoseconds), record.modificationDate.map(RecordCodec.nanoseconds),
         record.lastModifiedUserRecordID?.recordName)
    }

    /// Removes the value rows and the full-text row of a record that stays
    /// (deleting a record removes both by itself: the `records_drop_index` trigger).
    static func deleteIndex(_ db: Database, recordID: Int64) throws {
        try db.run(sql: "DELETE FROM record_values WHERE record_id = ?", arguments: [recordID])
        try db.run(sql: "DELETE FROM record_text WHERE rowid = ?", arguments: [recordID])
    }
}
