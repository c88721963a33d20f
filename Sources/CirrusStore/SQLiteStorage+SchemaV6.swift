import Foundation
import GRDB

extension SQLiteStorage {
    /// Schema v6: keyset query cursors (see `SQLiteStorage+Query.swift`).
    ///
    /// - `query_cursors` / `query_cursor_rows` (snapshots of every match, v2)
    ///   go: a cursor is now a sealed position and the store keeps nothing
    ///   per cursor. Cursors issued before the upgrade are refused as unknown.
    /// - `store_secrets`: named random keys; `query-cursor` seals query cursors.
    /// - `query_preimages`: a record's version as it was before a change
    ///   (`replaced_seq` = the sequence of the update or delete, `old_seq` =
    ///   the version's own), kept while the zone may have live cursors
    ///   (`cirrus_query_cursor_live`, see ``QueryCursorZones``) and pruned
    ///   after a cursor lifetime (`kept_at`, seconds since the epoch).
    ///   Triggers keep it: an update moving a record to a new change sequence,
    ///   and a record delete (one that leaves a tombstone; a zone delete
    ///   keeps nothing, its cursors fail with `zoneNotFound`).
    static func migrateToV6(_ db: Database) throws {
        try db.execute(sql: """
            DROP TABLE query_cursor_rows;
            DROP TABLE query_cursors;
            CREATE TABLE store_secrets (
                name TEXT PRIMARY KEY,
                value BLOB NOT NULL
            ) WITHOUT ROWID;
            CREATE TABLE query_preimages (
                zone_id INTEGER NOT NULL,
                name TEXT NOT NULL,
                record_type TEXT NOT NULL,
                record_id INTEGER NOT NULL,
                old_seq INTEGER NOT NULL,
                replaced_seq INTEGER NOT NULL,
                created_ns INTEGER,
                modified_ns INTEGER,
                data BLOB NOT NULL,
                kept_at REAL NOT NULL
            );
            CREATE INDEX query_preimages_by_seq ON query_preimages(zone_id, replaced_seq);
            CREATE INDEX query_preimages_by_time ON query_preimages(kept_at);
            CREATE TRIGGER records_keep_preimage_on_update AFTER UPDATE OF change_seq ON records
            WHEN NEW.change_seq <> OLD.change_seq AND cirrus_query_cursor_live(OLD.zone_id) IS NOT NULL
            BEGIN
                INSERT INTO query_preimages
                VALUES (OLD.zone_id, OLD.name, OLD.record_type, OLD.id, OLD.change_seq, NEW.change_seq,
                        OLD.created_ns, OLD.modified_ns, OLD.data, cirrus_query_cursor_live(OLD.zone_id));
            END;
            CREATE TRIGGER records_keep_preimage_on_delete AFTER DELETE ON records
            WHEN cirrus_query_cursor_live(OLD.zone_id) IS NOT NULL
            BEGIN
                INSERT INTO query_preimages
                SELECT OLD.zone_id, OLD.name, OLD.record_type, OLD.id, OLD.change_seq, t.seq,
                       OLD.created_ns, OLD.modified_ns, OLD.data, cirrus_query_cursor_live(OLD.zone_id)
                FROM tombstones t WHERE t.zone_id = OLD.zone_id AND t.name = OLD.name;
            END;
            """)
        try db.execute(
            sql: "INSERT INTO store_secrets (name, value) VALUES ('query-cursor', ?)",
            arguments: [Data(QueryCursor.randomSecret())])
    }
}
