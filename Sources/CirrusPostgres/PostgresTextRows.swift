import CirrusStore
import CirrusWire
import Foundation
import Logging
import NIOCore
import PostgresNIO

/// What full-text search (`self CONTAINS 'words'`) finds a record by on PostgreSQL (schema
/// v10, `record_words`): one row per word of the record's searchable text, ignoring case and
/// diacritics (``QueryText/words(of:)-(Wire.Record)``, the tokenization the SQLite engine's
/// FTS5 index is checked against), not PostgreSQL's own text search, whose stemming and
/// dictionaries would match other records.
///
/// The rows are written with the record's index rows, in the statement that writes them
/// (``PostgresIndexRows/write(_:replacing:zoneID:database:_:_:)``), so in the record's own
/// write transaction, and go with the record (`ON DELETE CASCADE`).
enum PostgresTextRows {
    /// The words of some records of one zone, column by column (bound as arrays).
    struct Columns {
        var names: [String] = []
        var words: [String] = []

        /// Adds the words of `record`, stored under `name`.
        mutating func append(_ record: Wire.Record, name: String) {
            for word in QueryText.words(of: record).sorted() {
                names.append(name)
                words.append(word)
            }
        }
    }

    /// The `WITH` expressions that replace the words of the records named by `$replacing`
    /// with those bound as `$names` and `$words`, in zone `$4` of the database `$1`, `$2`,
    /// `$3` (the placeholders of ``PostgresIndexRows``'s statement). A word a save keeps is
    /// left in place (a row one expression deletes and another inserts would conflict).
    static func replacingExpressions(replacing: String, names: String, words: String) -> String {
        """
        fresh_words AS (
            SELECT * FROM unnest(\(names)::text[], \(words)::text[]) AS w (record_name, word)
        ),
        dropped_words AS (
            DELETE FROM record_words t
            WHERE t.container = $1 AND t.owner = $2 AND t.scope = $3 AND t.zone_id = $4
                AND t.record_name = ANY(\(replacing))
                AND NOT EXISTS (SELECT 1 FROM fresh_words f WHERE f.record_name = t.record_name AND f.word = t.word)
        ),
        added_words AS (
            INSERT INTO record_words (container, owner, scope, zone_id, record_name, word)
            SELECT $1, $2, $3, $4, record_name, word FROM fresh_words
            ON CONFLICT DO NOTHING
        )
        """
    }

    /// The condition on `records r` that its words include `word` (bound as `placeholder`).
    static func holds(_ placeholder: String) -> String {
        """
        EXISTS (SELECT 1 FROM record_words t WHERE t.container = r.container AND t.owner = r.owner \
        AND t.scope = r.scope AND t.zone_id = r.zone_id AND t.record_name = r.name AND t.word = \(placeholder))
        """
    }

    /// Schema v10's backfill: the words of every record stored before, a thousand records per
    /// read, in key order.
    static func backfill(_ connection: PostgresConnection, _ logger: Logger) async throws {
        try await PostgresRows.forEachBatchOfStoredRecords(connection, logger) { batch in
            var containers: [String] = []
            var owners: [String] = []
            var scopes: [Int32] = []
            var zones: [Int64] = []
            var columns = Columns()
            for row in batch {
                let before = columns.names.count
                columns.append(row.record, name: row.name)
                for _ in before..<columns.names.count {
                    containers.append(row.container)
                    owners.append(row.owner)
                    scopes.append(row.scope)
                    zones.append(row.zoneID)
                }
            }
            guard !columns.names.isEmpty else { return }
            var insert = PostgresBindings(capacity: 6)
            insert.append(containers)
            insert.append(owners)
            insert.append(scopes)
            insert.append(zones)
            insert.append(columns.names)
            insert.append(columns.words)
            try await connection.query(
                PostgresQuery(
                    unsafeSQL: """
                        INSERT INTO record_words (container, owner, scope, zone_id, record_name, word)
                        SELECT * FROM unnest($1::text[], $2::text[], $3::integer[], $4::bigint[], $5::text[], $6::text[])
                        """,
                    binds: insert), logger: logger)
        }
    }
}
