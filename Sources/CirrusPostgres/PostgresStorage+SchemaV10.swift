import CirrusStore
import Logging
import PostgresNIO

extension PostgresStorage {
    /// Schema v10: what full-text search finds records by (``PostgresTextRows``).
    ///
    /// - record_words: one row per word of a record's searchable text, folded (case and
    ///   diacritics removed) by the tokenization the SQLite engine's queries share
    ///   (`QueryText`), keyed by the record's key and deleted with it; the index lists a
    ///   zone's records holding a word.
    ///
    /// Records stored before get their words from the migration (``PostgresTextRows/backfill(_:_:)``).
    static let recordWordsMigration: [String] = [
        """
        CREATE TABLE record_words (
            container text COLLATE "C" NOT NULL,
            owner text COLLATE "C" NOT NULL,
            scope integer NOT NULL,
            zone_id bigint NOT NULL,
            record_name text COLLATE "C" NOT NULL,
            word text COLLATE "C" NOT NULL,
            PRIMARY KEY (container, owner, scope, zone_id, record_name, word),
            FOREIGN KEY (container, owner, scope, zone_id, record_name) REFERENCES records ON DELETE CASCADE
        )
        """,
        "CREATE INDEX record_words_by_word ON record_words (container, owner, scope, zone_id, word)",
    ]

    /// The version ``recordWordsMigration`` brings the schema to: its place in ``migrations``
    /// (v10, after the shares of v8 and the assets of v9).
    static let recordWordsVersion = (migrations.firstIndex(of: recordWordsMigration) ?? -1) + 1
}
