extension PostgresStorage {
    /// v9: asset contents and the records that refer to them (AssetReferenceStorage), as
    /// SQLite's schema v1 keeps them, and the contents the asset file store committed lately.
    ///
    /// - assets: one row per content the server knows, by SHA-256, with its size; `content`
    ///   holds the bytes of content a record brought inline, and is empty for content that is
    ///   a file of the asset store (the directory every node shares). Content is global, as
    ///   on SQLite: the same bytes saved in two databases are one row.
    /// - asset_references: one row per record and content it names, deleted with the record;
    ///   a content no record names can go.
    /// - asset_commits: when a node's asset file store last committed a content for a save
    ///   still to come (seconds since 1970): no node's collection removes it before the grace
    ///   has passed.
    static let assetsMigration: [String] = [
        """
        CREATE TABLE assets (
            sha256 bytea PRIMARY KEY,
            size bigint NOT NULL,
            content bytea NOT NULL
        )
        """,
        """
        CREATE TABLE asset_references (
            container text COLLATE "C" NOT NULL,
            owner text COLLATE "C" NOT NULL,
            scope integer NOT NULL,
            zone_id bigint NOT NULL,
            record_name text COLLATE "C" NOT NULL,
            sha256 bytea NOT NULL,
            PRIMARY KEY (container, owner, scope, zone_id, record_name, sha256),
            FOREIGN KEY (container, owner, scope, zone_id, record_name) REFERENCES records ON DELETE CASCADE
        )
        """,
        "CREATE INDEX asset_references_by_sha ON asset_references (sha256)",
        """
        CREATE TABLE asset_commits (
            sha256 bytea PRIMARY KEY,
            committed_at double precision NOT NULL
        )
        """,
        "CREATE INDEX asset_commits_by_time ON asset_commits (committed_at)",
    ]
}
