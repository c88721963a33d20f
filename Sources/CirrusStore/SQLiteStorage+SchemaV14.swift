import GRDB

extension SQLiteStorage {
    /// Schema v14: leases on running long-lived operations (see ``LongLivedLease``).
    ///
    /// - `long_lived_operations.lease_node`: the ID of the node running the operation; NULL
    ///   when none holds it (registered before v14, registered without a lease, or released).
    /// - `long_lived_operations.lease_expiry_ns`: when that node's hold ends unless it renews
    ///   it (ns since the epoch); after it, another node may take the operation over.
    ///
    /// One process serves a SQLite data directory, but the journal keeps the same leases as
    /// the PostgreSQL one, so both engines pass the same conformance tests and a restarted
    /// process takes over what its predecessor held.
    static func migrateToV14(_ db: Database) throws {
        try db.execute(
            sql: """
                ALTER TABLE long_lived_operations ADD COLUMN lease_node TEXT;
                ALTER TABLE long_lived_operations ADD COLUMN lease_expiry_ns INTEGER;
                CREATE INDEX long_lived_operations_by_lease ON long_lived_operations(lease_expiry_ns)
                    WHERE completed_ns IS NULL;
                """)
    }
}
