import GRDB

extension SQLiteStorage {
    /// Schema v4: subscriptions and the notifications they produce (see ``SubscriptionStorage``).
    ///
    /// - `subscriptions`: one row per (database, subscriber, subscription ID). In a private
    ///   database the subscriber is the owner; in the public one any user. `kind` is the
    ///   `Wire.Subscription` kind (1 query, 2 zone, 3 database); `record_type` and `zone_name`
    ///   are copies of what the body says, for reading; `body` is the `Wire.Subscription` with
    ///   zone owners as the store names them; `position` orders a database's subscriptions by
    ///   when they were first saved (the order they fire and are listed in).
    /// - `notification_feeds`: per (container, user) the sequence of the last notification
    ///   (`head_seq`), how far old ones were pruned (`pruned_seq`), and the badge count.
    /// - `notifications`: the feed, one serialized `Wire.PushNotification` per (container,
    ///   user, seq), with the scope of the database it came from. Times are ns since the epoch.
    static func migrateToV4(_ db: Database) throws {
        try db.execute(sql: """
            CREATE TABLE subscriptions (
                database_id INTEGER NOT NULL REFERENCES databases(id),
                owner TEXT NOT NULL,
                subscription_id TEXT NOT NULL,
                kind INTEGER NOT NULL,
                record_type TEXT NOT NULL,
                zone_name TEXT,
                body BLOB NOT NULL,
                created_ns INTEGER NOT NULL,
                position INTEGER NOT NULL,
                PRIMARY KEY (database_id, owner, subscription_id)
            ) WITHOUT ROWID;
            CREATE TABLE notification_feeds (
                container TEXT NOT NULL,
                owner TEXT NOT NULL,
                head_seq INTEGER NOT NULL DEFAULT 0,
                pruned_seq INTEGER NOT NULL DEFAULT 0,
                badge INTEGER NOT NULL DEFAULT 0,
                PRIMARY KEY (container, owner)
            ) WITHOUT ROWID;
            CREATE TABLE notifications (
                container TEXT NOT NULL,
                owner TEXT NOT NULL,
                seq INTEGER NOT NULL,
                scope INTEGER NOT NULL,
                created_ns INTEGER NOT NULL,
                body BLOB NOT NULL,
                PRIMARY KEY (container, owner, seq)
            ) WITHOUT ROWID;
            CREATE INDEX notifications_by_time ON notifications(created_ns);
            """)
    }
}
