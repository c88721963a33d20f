import GRDB

extension SQLiteStorage {
    /// Schema v10: shares (CKShare) and their participants, kept beside the share records so
    /// that a share URL finds its share and a user's shares are found without reading records.
    ///
    /// - `shares`: one row per saved share record: its zone, record name, the root record of a
    ///   hierarchy share (NULL for a zone-wide share), the secret token its URL carries, and
    ///   its public permission (a `Wire.ShareParticipantPermission` raw value).
    /// - `share_participants`: one row per participant of a share, the owner included: the
    ///   server's participant ID, the user (NULL while an invitation names someone the
    ///   directory does not know), role, permission and acceptance status (raw values of the
    ///   wire enums). Rows go with their share.
    static func migrateToV10(_ db: Database) throws {
        try db.execute(sql: """
            CREATE TABLE shares (
                id INTEGER PRIMARY KEY,
                zone_id INTEGER NOT NULL REFERENCES zones(id) ON DELETE CASCADE,
                name TEXT NOT NULL,
                root_name TEXT,
                token TEXT NOT NULL UNIQUE,
                public_permission INTEGER NOT NULL,
                UNIQUE (zone_id, name)
            );
            CREATE INDEX shares_by_root ON shares(zone_id, root_name);
            CREATE TABLE share_participants (
                share_id INTEGER NOT NULL REFERENCES shares(id) ON DELETE CASCADE,
                participant_id TEXT NOT NULL,
                user TEXT,
                role INTEGER NOT NULL,
                permission INTEGER NOT NULL,
                status INTEGER NOT NULL,
                PRIMARY KEY (share_id, participant_id)
            ) WITHOUT ROWID;
            CREATE INDEX share_participants_by_user ON share_participants(user, share_id);
            """)
    }
}
