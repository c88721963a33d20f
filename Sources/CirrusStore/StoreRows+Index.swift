import CirrusWire
import Foundation
import GRDB

/// What a query finds a record by: its `record_fields` rows, its full-text row
/// and the system-field columns of `records` (schema v2).
extension StoreRows {
    /// Writes the index of `record`, stored as row `recordID` of zone `zoneID`.
    /// The record's earlier index must be gone (``deleteIndex(_:recordID:)``).
    static func insertIndex(_ db: Database, recordID: Int64, zoneID: Int64, record: Wire.Record) throws {
        for row in RecordCodec.indexRows(of: record) {
            try db.run(
                sql: """
                    INSERT INTO record_fields (record_id, zone_id, record_type, key, list_index, kind,
                        int_value, real_value, real_value2, text_value, blob_value)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [recordID, zoneID, record.recordType, row.key, row.listIndex, row.kind.rawValue,
                            row.int, row.real, row.real2, row.text, row.blob])
        }
        if let text = RecordCodec.searchableText(of: record) {
            try db.run(sql: "INSERT INTO record_text (rowid, body) VALUES (?, ?)", arguments: [recordID, text])
        }
    }

    /// The `records` columns of the system fields a query can name
    /// (`created_ns`, `modified_ns`, `modifier`), from the record itself.
    static func systemColumns(of record: Wire.Record) -> (created: Int64?, modified: Int64?, modifier: String?) {
        (record.creationDate.map(RecordCodec.nanoseconds), record.modificationDate.map(RecordCodec.nanoseconds),
         record.lastModifiedUserRecordID?.recordName)
    }

    /// Removes the field rows and the full-text row of a record that stays
    /// (deleting a record removes both by itself: cascade and trigger).
    static func deleteIndex(_ db: Database, recordID: Int64) throws {
        try db.run(sql: "DELETE FROM record_fields WHERE record_id = ?", arguments: [recordID])
        try db.run(sql: "DELETE FROM record_text WHERE rowid = ?", arguments: [recordID])
    }
}
