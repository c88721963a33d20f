import CirrusStore
import CirrusWire
import Foundation
import Logging
import NIOCore
import PostgresNIO

/// What a query finds a record by on PostgreSQL (schema v7): its `record_values` rows and
/// the system-field columns of `records` (`created_ns`, `modified_ns`, `modifier`).
///
/// The rows are the SQLite engine's (``RecordCodec/indexRows(of:)``, one per field value or
/// list element, one without a value for an asset or an empty list), written in the record's
/// own write transaction and keyed by the record's key, so deleting the record deletes them
/// (`ON DELETE CASCADE`) and a save replaces them in the statement that writes them.
enum PostgresIndexRows {
    /// The index rows of some records of one zone, column by column (bound as arrays).
    ///
    /// A value lives in the column of its type: integers and dates (nanoseconds) in
    /// `int_value`; doubles and latitudes in `real_value`, longitudes in `real_value2`;
    /// strings and references (the record name) as their UTF-8 bytes and bytes as they are
    /// in `bytes_value` — compared byte-wise, as SQLite's BINARY collation compares them,
    /// and holding NUL, which PostgreSQL's `text` cannot. `present` says which are set (an
    /// array element cannot be NULL here): 1 int, 2 real, 4 real2, 8 bytes.
    struct Columns {
        var names: [String] = []
        var keys: [String] = []
        var listIndexes: [Int32] = []
        var kinds: [Int32] = []
        var types: [String] = []
        var ints: [Int64] = []
        var reals: [Double] = []
        var reals2: [Double] = []
        var bytes: [ByteBuffer] = []
        var present: [Int32] = []
        /// The words full-text search finds the records by (``PostgresTextRows``), nil when
        /// not written (before schema v10).
        var words: PostgresTextRows.Columns?

        /// Index rows with the records' words, or without them (`indexingWords` false: schema
        /// v7's backfill, before `record_words` exists).
        init(indexingWords: Bool = true) {
            words = indexingWords ? PostgresTextRows.Columns() : nil
        }

        var isEmpty: Bool { names.isEmpty && (words?.names.isEmpty ?? true) }

        /// Adds the rows of `record`, stored under `name`.
        mutating func append(_ record: Wire.Record, name: String) {
            words?.append(record, name: name)
            for row in RecordCodec.indexRows(of: record) {
                var present: Int32 = 0
                names.append(name)
                keys.append(row.key)
                listIndexes.append(Int32(clamping: row.listIndex))
                kinds.append(Int32(truncatingIfNeeded: row.kind.rawValue))
                types.append(record.recordType)
                ints.append(row.int ?? 0)
                if row.int != nil { present |= 1 }
                reals.append(row.real ?? 0)
                if row.real != nil { present |= 2 }
                reals2.append(row.real2 ?? 0)
                if row.real2 != nil { present |= 4 }
                if let text = row.text {
                    bytes.append(ByteBuffer(string: text))
                    present |= 8
                } else if let blob = row.blob {
                    bytes.append(ByteBuffer(bytes: blob))
                    present |= 8
                } else {
                    bytes.append(ByteBuffer())
                }
                self.present.append(present)
            }
        }
    }

    /// Replaces the index rows (and words, ``PostgresTextRows``) of the records `replacing`
    /// (saved again) and writes `columns` in zone `zoneID` of the database bound as $1, $2, $3
    /// in `bindings`, in one statement.
    static func write(
        _ columns: Columns, replacing: [String], zoneID: Int64, database bindings: PostgresBindings,
        _ connection: PostgresConnection, _ logger: Logger
    ) async throws {
        guard !columns.isEmpty || !replacing.isEmpty else { return }
        var bindings = bindings
        bindings.append(zoneID)
        let statement = expressions(columns, replacing: replacing, appendingTo: &bindings)
        try await connection.query(
            PostgresQuery(unsafeSQL: "WITH \(statement.expressions)\n\(statement.insert)", binds: bindings), logger: logger
        )
    }

    /// The statement that replaces the index rows of the records `replacing` and writes
    /// `columns`, in zone $4 of the database $1, $2, $3, its parameters bound after
    /// `bindings`' own: the `WITH` expressions it needs (separated by commas), then the
    /// `INSERT` of the rows — a statement of its own after them, or one more expression of a
    /// statement that writes the records too.
    ///
    /// A row the save keeps is updated in place rather than deleted and inserted again (in one
    /// statement, a row a `WITH` expression deletes and the main statement inserts again would
    /// conflict).
    static func expressions(
        _ columns: Columns, replacing: [String], appendingTo bindings: inout PostgresBindings
    ) -> (expressions: String, insert: String) {
        let base = bindings.count
        func parameter(_ k: Int) -> String { "$\(base + k)" }
        bindings.append(replacing)
        bindings.append(columns.names)
        bindings.append(columns.keys)
        bindings.append(columns.listIndexes)
        bindings.append(columns.kinds)
        bindings.append(columns.types)
        bindings.append(columns.ints)
        bindings.append(columns.reals)
        bindings.append(columns.reals2)
        bindings.append(columns.bytes)
        bindings.append(columns.present)
        var wordExpressions = ""
        if let words = columns.words {
            bindings.append(words.names)
            bindings.append(words.words)
            wordExpressions =
                PostgresTextRows.replacingExpressions(
                    replacing: parameter(1), names: parameter(12), words: parameter(13)) + ",\n"
        }
        let expressions = """
            \(wordExpressions)fresh AS (
                SELECT * FROM unnest(\(parameter(2))::text[], \(parameter(3))::text[], \(parameter(4))::integer[],
                    \(parameter(5))::integer[], \(parameter(6))::text[], \(parameter(7))::bigint[],
                    \(parameter(8))::double precision[], \(parameter(9))::double precision[], \(parameter(10))::bytea[],
                    \(parameter(11))::integer[])
                    AS v (record_name, key, list_index, kind, record_type, i, r, r2, b, present)
            ),
            dropped AS (
                DELETE FROM record_values v
                WHERE v.container = $1 AND v.owner = $2 AND v.scope = $3 AND v.zone_id = $4
                    AND v.record_name = ANY(\(parameter(1)))
                    AND NOT EXISTS (
                        SELECT 1 FROM fresh f WHERE f.record_name = v.record_name AND f.key = v.key
                            AND f.list_index = v.list_index)
            )
            """
        let insert = """
            INSERT INTO record_values (container, owner, scope, zone_id, record_name, key, list_index, kind,
                record_type, int_value, real_value, real_value2, bytes_value)
            SELECT $1, $2, $3, $4, record_name, key, list_index, kind, record_type,
                CASE WHEN present & 1 <> 0 THEN i END, CASE WHEN present & 2 <> 0 THEN r END,
                CASE WHEN present & 4 <> 0 THEN r2 END, CASE WHEN present & 8 <> 0 THEN b END
            FROM fresh
            ON CONFLICT (container, owner, scope, zone_id, record_name, key, list_index) DO UPDATE SET
                kind = excluded.kind, record_type = excluded.record_type, int_value = excluded.int_value,
                real_value = excluded.real_value, real_value2 = excluded.real_value2,
                bytes_value = excluded.bytes_value
            """
        return (expressions, insert)
    }

    /// Schema v7's backfill: the index rows and system-field columns of every record stored
    /// before, a thousand records per read, in key order.
    static func backfill(_ connection: PostgresConnection, _ logger: Logger) async throws {
        try await PostgresRows.forEachBatchOfStoredRecords(connection, logger) { batch in
            // Written per zone, in the order read.
            var start = 0
            while start < batch.count {
                let first = batch[start]
                var end = start
                var columns = Columns(indexingWords: false)
                var system = SystemColumns()
                while end < batch.count, batch[end].sharesZone(with: first) {
                    columns.append(batch[end].record, name: batch[end].name)
                    system.append(batch[end].record, name: batch[end].name)
                    end += 1
                }
                var database = PostgresBindings(capacity: 16)
                database.append(first.container)
                database.append(first.owner)
                database.append(first.scope)
                try await write(columns, replacing: [], zoneID: first.zoneID, database: database, connection, logger)
                try await system.write(zoneID: first.zoneID, database: database, connection, logger)
                start = end
            }
        }
    }

    /// The system-field columns of records stored before schema v7, by name.
    private struct SystemColumns {
        var names: [String] = []
        var created: [Int64] = []
        var modified: [Int64] = []
        var modifiers: [String] = []

        /// Every record this engine stored carries both dates and its last modifier (the
        /// writer sets them); a record without one sorts first by it.
        mutating func append(_ record: Wire.Record, name: String) {
            names.append(name)
            created.append(record.creationDate.map(RecordCodec.nanoseconds) ?? .min)
            modified.append(record.modificationDate.map(RecordCodec.nanoseconds) ?? .min)
            modifiers.append(record.lastModifiedUserRecordID?.recordName ?? "")
        }

        func write(
            zoneID: Int64, database bindings: PostgresBindings, _ connection: PostgresConnection, _ logger: Logger
        ) async throws {
            var bindings = bindings
            bindings.append(zoneID)
            bindings.append(names)
            bindings.append(created)
            bindings.append(modified)
            bindings.append(modifiers)
            try await connection.query(
                PostgresQuery(
                    unsafeSQL: """
                        UPDATE records r SET created_ns = v.created_ns, modified_ns = v.modified_ns, modifier = v.modifier
                        FROM unnest($5::text[], $6::bigint[], $7::bigint[], $8::text[])
                            AS v (name, created_ns, modified_ns, modifier)
                        WHERE r.container = $1 AND r.owner = $2 AND r.scope = $3 AND r.zone_id = $4 AND r.name = v.name
                        """,
                    binds: bindings), logger: logger)
        }
    }
}
