extension PostgresStorage {
    /// v12: a long-lived operation's client cancelled it (requestLongLivedCancellation), as
    /// SQLite's schema v15 keeps it. cancel_requested is set on the row of a running operation
    /// by the node the client cancels it on; the node running it hears of it through a NOTIFY
    /// (PostgresLongLivedSignals), or at its next heartbeat, and completes it as cancelled, and
    /// a node that takes it over finds the mark.
    ///
    /// Its own step, after v11 (other branches add versions at the same time).
    static let migrationV12: [String] = [
        "ALTER TABLE long_lived_operations ADD COLUMN cancel_requested boolean NOT NULL DEFAULT false"
    ]
}
