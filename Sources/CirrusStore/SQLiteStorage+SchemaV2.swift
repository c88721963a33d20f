import CirrusWire
import Foundation
import GRDB

extension SQLiteStorage {
    /// Schema v2: what queries need (CKQueryOperation).
    ///
    /// - `record_fields.kind` (``IndexedKind``): the type of each indexed value,
    ///   list elements apart, plus rows without a value for assets and empty
    ///   lists; an index on (zone, type, key, kind) answers "what does this
    ///   field hold" without loading records.
    /// - `records.created_ns`, `modified_ns` (ns since the epoch) and `modifier`
    ///   (user record name): the system fields a predicate or sort can name,
    ///   indexed per zone and type like `creator`.
    /// - `record_text`: FTS5 over every string of a record (rowid = records.id),
    ///   unicode61 without diacritics, for `self CONTAINS 'words'`.
    /// - `query_cursors` / `query_cursor_rows`: snapshots of query results a
    ///   cursor continues (see `SQLiteStorage+Query.swift`).
    ///
    /// Existing records get their rows re-derived from `records.data`.
    static func migrateToV2(_ db: Database) throws {
        try db.execute(sql: """
            ALTER TABLE record_fields ADD COLUMN kind INTEGER NOT NULL DEFAULT 0;
            ALTER TABLE records ADD COLUMN created_ns INTEGER;
            ALTER TABLE records ADD COLUMN modified_ns INTEGER;
            ALTER TABLE records ADD COLUMN modifier TEXT;
            CREATE VIRTUAL TABLE record_text USING fts5(body, tokenize = 'unicode61 remove_diacritics 2');
            CREATE TRIGGER records_drop_text AFTER DELETE ON records BEGIN
                DELETE FROM record_text WHERE rowid = OLD.id;
            END;
            """)
        // Re-derive every record's index from its stored bytes, in row ID order.
        try db.execute(sql: "DELETE FROM record_fields")
        var last: Int64 = 0
        while true {
            let rows = try Row.fetchAll(
                db, sql: "SELECT id, zone_id, data FROM records WHERE id > ? ORDER BY id LIMIT 500", arguments: [last])
            guard let final = rows.last else { break }
            for row in rows {
                let id: Int64 = row["id"]
                let data: Data = row["data"]
                let record: Wire.Record
                do {
                    record = try Wire.Record(serializedBytes: [UInt8](data))
                } catch {
                    throw StoreError(.corruptData, "stored record \(id) does not decode: \(error)")
                }
                try insertV2Index(db, recordID: id, zoneID: row["zone_id"], record: record)
                let system = StoreRows.systemColumns(of: record)
                try db.execute(
                    sql: "UPDATE records SET created_ns = ?, modified_ns = ?, modifier = ? WHERE id = ?",
                    arguments: [system.created, system.modified, system.modifier, id])
            }
            last = final["id"]
        }
        try db.execute(sql: """
            CREATE INDEX record_fields_by_kind ON record_fields(zone_id, record_type, key, kind);
            CREATE INDEX records_by_type ON records(zone_id, record_type);
            CREATE INDEX records_by_creator ON records(zone_id, record_type, creator);
            CREATE INDEX records_by_created ON records(zone_id, record_type, created_ns);
            CREATE INDEX records_by_modified ON records(zone_id, record_type, modified_ns);
            """)
        // A query snapshot: the ordered record rows a query matched when it
        // began, so later pages neither repeat nor skip records. The cursor a
        // client holds is (id, position); id is 16 random bytes.
        try db.execute(sql: """
            CREATE TABLE query_cursors (
                id BLOB PRIMARY KEY,
                database_id INTEGER NOT NULL REFERENCES databases(id) ON DELETE CASCADE,
                zone_id INTEGER NOT NULL,
                zone_name TEXT NOT NULL,
                query BLOB NOT NULL,
                desired_keys BLOB,
                created_at REAL NOT NULL
            ) WITHOUT ROWID;
            CREATE INDEX query_cursors_by_time ON query_cursors(created_at);
            CREATE TABLE query_cursor_rows (
                cursor_id BLOB NOT NULL REFERENCES query_cursors(id) ON DELETE CASCADE,
                position INTEGER NOT NULL,
                record_id INTEGER NOT NULL,
                name TEXT NOT NULL,
                PRIMARY KEY (cursor_id, position)
            ) WITHOUT ROWID;
            """)
    }

    /// The v2 index of a record: its `record_fields` rows and full-text row,
    /// as schema v2 laid them out (v7 moved the rows to `record_values`).
    private static func insertV2Index(_ db: Database, recordID: Int64, zoneID: Int64, record: Wire.Record) throws {
        for row in RecordCodec.indexRows(of: record) {
            try db.execute(
                sql: """
                    INSERT INTO record_fields (record_id, zone_id, record_type, key, list_index, kind,
                        int_value, real_value, real_value2, text_value, blob_value)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [recordID, zoneID, record.recordType, row.key, row.listIndex, row.kind.rawValue,
                            row.int, row.real, row.real2, row.text, row.blob])
        }
        if let text = RecordCodec.searchableText(of: record) {
            try db.execute(sql: "INSERT INTO record_text (rowid, body) VALUES (?, ?)", arguments: [recordID, text])
        }
    }
}
