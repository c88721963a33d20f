extension PostgresStorage {
    /// v11: leases on running long-lived operations (LongLivedLease), as SQLite's schema v14
    /// keeps them. lease_node is the ID of the node running the operation, NULL when none
    /// holds it (registered before v11 or without a lease, or released); lease_expiry_ns when
    /// its hold ends unless renewed (nanoseconds since 1970). The index lists the running
    /// operations by expiry, for the nodes' sweeps for operations to take over.
    ///
    /// Its own step, after v8–v10 (other branches add those at the same time).
    static let migrationV11: [String] = [
        """
        ALTER TABLE long_lived_operations ADD COLUMN lease_node text COLLATE "C",
            ADD COLUMN lease_expiry_ns bigint
        """,
        """
        CREATE INDEX long_lived_operations_by_lease ON long_lived_operations (lease_expiry_ns)
            WHERE complete IS NULL
        """,
    ]
}
