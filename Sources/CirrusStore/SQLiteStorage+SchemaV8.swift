import GRDB

extension SQLiteStorage {
    /// Schema v8: the user directory (``UserStorage``).
    ///
    /// - `users`: one row per user record name. `name_components` is a
    ///   serialized `Wire.UserNameComponents` (NULL: not set); `disabled_at`
    ///   is set while an administrator has the user disabled (the partial
    ///   index is what a server polls to close their connections).
    /// - `user_lookup`: email addresses (kind 1) and phone numbers (kind 2),
    ///   normalized; a value belongs to one user at most. `source` says who
    ///   vouched for it: 1 a client certificate, 2 an administrator.
    /// - `user_discoverability`: per container, the user's answer to the
    ///   `userDiscoverability` permission (2 denied, 3 granted, as
    ///   CKContainer.ApplicationPermissionStatus).
    /// - `bearer_tokens`: credentials a client presents in `Hello` instead of a
    ///   certificate. Only the SHA-256 of a token is kept; `id` is its public
    ///   part (what `cirrusd tokens list` shows and `revoke` takes).
    static func migrateToV8(_ db: Database) throws {
        try db.execute(sql: """
            CREATE TABLE users (
                name TEXT PRIMARY KEY,
                name_components BLOB,
                created_at REAL NOT NULL,
                last_seen_at REAL,
                disabled_at REAL
            ) WITHOUT ROWID;
            CREATE INDEX users_disabled ON users(name) WHERE disabled_at IS NOT NULL;
            CREATE TABLE user_lookup (
                kind INTEGER NOT NULL,
                value TEXT NOT NULL,
                user TEXT NOT NULL REFERENCES users(name) ON DELETE CASCADE,
                source INTEGER NOT NULL,
                PRIMARY KEY (kind, value)
            ) WITHOUT ROWID;
            CREATE INDEX user_lookup_by_user ON user_lookup(user);
            CREATE TABLE user_discoverability (
                container TEXT NOT NULL,
                user TEXT NOT NULL REFERENCES users(name) ON DELETE CASCADE,
                status INTEGER NOT NULL,
                PRIMARY KEY (container, user)
            ) WITHOUT ROWID;
            CREATE TABLE bearer_tokens (
                id TEXT PRIMARY KEY,
                hash BLOB NOT NULL,
                user TEXT NOT NULL REFERENCES users(name) ON DELETE CASCADE,
                label TEXT NOT NULL,
                created_at REAL NOT NULL,
                expires_at REAL,
                revoked_at REAL
            ) WITHOUT ROWID;
            CREATE INDEX bearer_tokens_by_user ON bearer_tokens(user);
            """)
    }
}
