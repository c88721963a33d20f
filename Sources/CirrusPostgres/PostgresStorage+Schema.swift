import CirrusStore
import Logging
import PostgresNIO

extension PostgresStorage {
    /// The schema version this build creates and understands.
    public static var schemaVersion: Int { migrations.count }

    /// The advisory lock key every node takes while it migrates ("cirrus" in ASCII).
    static let migrationLockKey: Int64 = 0x63_69_72_72_75_73

    /// One list of statements per version, applied in order; never edit a shipped one.
    ///
    /// The key of every table of a database's data starts with (container, owner, scope), so
    /// the data can be distributed by (container, owner) later without a redesign; the user
    /// directory and tokens (v4) belong to the server and are keyed by user, the server secret
    /// (v5) to every node; a user's notification feed (v6) is keyed by (container, user). Names
    /// compare and sort byte-wise (`COLLATE "C"`), as SQLite does, whatever the database's
    /// locale.
    static let migrations: [[String]] = [
        // v1: databases and zones.
        [
            // One row per (container, scope, owner). change_seq is the database change
            // sequence over its zones; zone tombstones at or below pruned_seq are gone. A
            // writer locks its database's row first, so change sequences are gap-free and
            // follow commit order.
            """
            CREATE TABLE databases (
                container text COLLATE "C" NOT NULL,
                owner text COLLATE "C" NOT NULL,
                scope integer NOT NULL,
                change_seq bigint NOT NULL DEFAULT 0,
                pruned_seq bigint NOT NULL DEFAULT 0,
                PRIMARY KEY (container, owner, scope)
            )
            """,
            // A zone; a deleted zone stays as a tombstone (deleted_at set) for the database
            // change feed. id is never reused, so it also names the zone's incarnation.
            """
            CREATE TABLE zones (
                container text COLLATE "C" NOT NULL,
                owner text COLLATE "C" NOT NULL,
                scope integer NOT NULL,
                id bigint GENERATED ALWAYS AS IDENTITY,
                name text COLLATE "C" NOT NULL,
                encryption_scope integer NOT NULL DEFAULT 0,
                change_seq bigint NOT NULL DEFAULT 0,
                pruned_seq bigint NOT NULL DEFAULT 0,
                client_change_token bytea,
                db_seq bigint NOT NULL,
                deleted_at double precision,
                PRIMARY KEY (container, owner, scope, id),
                FOREIGN KEY (container, owner, scope) REFERENCES databases
            )
            """,
            "CREATE UNIQUE INDEX zones_by_name ON zones (container, owner, scope, name) WHERE deleted_at IS NULL",
            "CREATE INDEX zones_by_db_seq ON zones (container, owner, scope, db_seq)",
        ],
        // v2: records and their tombstones. A zone's change_seq counts the changes of its
        // records; each live record carries the sequence of its last save, each tombstone
        // that of its deletion, so the zone's change feed reads both in sequence order. A
        // record's or tombstone's zone is a zone row (zone_id), live or deleted: deleting a
        // zone deletes its records and tombstones, pruning the zone's row anything left.
        [
            """
            CREATE TABLE records (
                container text COLLATE "C" NOT NULL,
                owner text COLLATE "C" NOT NULL,
                scope integer NOT NULL,
                zone_id bigint NOT NULL,
                name text COLLATE "C" NOT NULL,
                record_type text COLLATE "C" NOT NULL,
                change_tag text COLLATE "C" NOT NULL,
                change_seq bigint NOT NULL,
                creator text COLLATE "C" NOT NULL,
                data bytea NOT NULL,
                PRIMARY KEY (container, owner, scope, zone_id, name),
                FOREIGN KEY (container, owner, scope, zone_id) REFERENCES zones ON DELETE CASCADE
            )
            """,
            "CREATE INDEX records_by_change_seq ON records (container, owner, scope, zone_id, change_seq)",
            """
            CREATE TABLE tombstones (
                container text COLLATE "C" NOT NULL,
                owner text COLLATE "C" NOT NULL,
                scope integer NOT NULL,
                zone_id bigint NOT NULL,
                name text COLLATE "C" NOT NULL,
                record_type text COLLATE "C" NOT NULL,
                seq bigint NOT NULL,
                deleted_at double precision NOT NULL,
                PRIMARY KEY (container, owner, scope, zone_id, name),
                FOREIGN KEY (container, owner, scope, zone_id) REFERENCES zones ON DELETE CASCADE
            )
            """,
            "CREATE INDEX tombstones_by_seq ON tombstones (container, owner, scope, zone_id, seq)",
            "CREATE INDEX tombstones_by_deleted_at ON tombstones (deleted_at)",
        ],
        // v3: deleteSelf references. One row per record (the source) and record it
        // references with `deleteSelf` (the target, named by zone name and record name, as a
        // reference does): deleting a target deletes its sources, transitively. A source's
        // rows go with its record row (a save replaces them); id orders a target's sources
        // by when they were saved.
        [
            """
            CREATE TABLE cascade_references (
                container text COLLATE "C" NOT NULL,
                owner text COLLATE "C" NOT NULL,
                scope integer NOT NULL,
                id bigint GENERATED ALWAYS AS IDENTITY,
                source_zone_id bigint NOT NULL,
                source_name text COLLATE "C" NOT NULL,
                target_zone text COLLATE "C" NOT NULL,
                target_name text COLLATE "C" NOT NULL,
                PRIMARY KEY (container, owner, scope, source_zone_id, source_name, target_zone, target_name),
                FOREIGN KEY (container, owner, scope, source_zone_id, source_name) REFERENCES records ON DELETE CASCADE
            )
            """,
            """
            CREATE INDEX cascade_references_by_target
                ON cascade_references (container, owner, scope, target_zone, target_name, id)
            """,
        ],
        // v4: the user directory and bearer tokens (UserStorage, TokenStorage), as SQLite's
        // schema v8 keeps them. Users, their lookup values and their tokens belong to the
        // server, not to a container: they are keyed by the user (a lookup value by itself,
        // so it has one owner at most); a user's discoverability belongs to a container and
        // is keyed by it first. Times are seconds since 1970; disabled_at is set while an
        // administrator has the user disabled; name_components is a serialized
        // Wire.UserNameComponents. A lookup's kind is 1 email, 2 phone; its source 1 a client
        // certificate, 2 an administrator; a discoverability status 2 denied, 3 granted.
        // Only a token's SHA-256 is kept; id is its public part.
        [
            """
            CREATE TABLE users (
                name text COLLATE "C" PRIMARY KEY,
                name_components bytea,
                created_at double precision NOT NULL,
                last_seen_at double precision,
                disabled_at double precision
            )
            """,
            "CREATE INDEX users_disabled ON users (name) WHERE disabled_at IS NOT NULL",
            """
            CREATE TABLE user_lookup (
                kind integer NOT NULL,
                value text COLLATE "C" NOT NULL,
                user_name text COLLATE "C" NOT NULL REFERENCES users ON DELETE CASCADE,
                source integer NOT NULL,
                PRIMARY KEY (kind, value)
            )
            """,
            "CREATE INDEX user_lookup_by_user ON user_lookup (user_name)",
            """
            CREATE TABLE user_discoverability (
                container text COLLATE "C" NOT NULL,
                user_name text COLLATE "C" NOT NULL REFERENCES users ON DELETE CASCADE,
                status integer NOT NULL,
                PRIMARY KEY (container, user_name)
            )
            """,
            """
            CREATE TABLE bearer_tokens (
                id text COLLATE "C" PRIMARY KEY,
                hash bytea NOT NULL,
                user_name text COLLATE "C" NOT NULL REFERENCES users ON DELETE CASCADE,
                label text NOT NULL,
                created_at double precision NOT NULL,
                expires_at double precision,
                revoked_at double precision
            )
            """,
            "CREATE INDEX bearer_tokens_by_user ON bearer_tokens (user_name, created_at, id)",
            "CREATE INDEX bearer_tokens_by_created_at ON bearer_tokens (created_at, id)",
        ],
        // v5: the journal of long-lived operations (OperationJournal), as SQLite's schema v3
        // keeps it, and the server secret. An operation's ID is the client's: unique per
        // owner whatever the container (the journal's key, LongLivedOperationKey, names no
        // container), so (owner, operation_id) is unique besides the key, which starts with
        // (container, owner) like every table of a container's data. open is the original
        // Wire.Open; last_seq the seq of the last journaled event; checkpoint what the executor
        // continues from after a restart; complete the final Wire.Complete, set with
        // completed_ns when the operation finished. Times are nanoseconds since 1970. An
        // event row is one serialized Wire.Event; it goes with its operation's row. The
        // server secret (one row) seals change tokens and cursors: every node reads the same.
        [
            """
            CREATE TABLE long_lived_operations (
                container text COLLATE "C" NOT NULL,
                owner text COLLATE "C" NOT NULL,
                operation_id text COLLATE "C" NOT NULL,
                open bytea NOT NULL,
                last_seq bigint NOT NULL DEFAULT 0,
                created_ns bigint NOT NULL,
                completed_ns bigint,
                checkpoint bytea,
                complete bytea,
                PRIMARY KEY (container, owner, operation_id),
                UNIQUE (owner, operation_id)
            )
            """,
            "CREATE INDEX long_lived_operations_by_completion ON long_lived_operations (completed_ns)",
            """
            CREATE INDEX long_lived_operations_unfinished ON long_lived_operations (created_ns, operation_id)
                WHERE complete IS NULL
            """,
            """
            CREATE TABLE long_lived_events (
                container text COLLATE "C" NOT NULL,
                owner text COLLATE "C" NOT NULL,
                operation_id text COLLATE "C" NOT NULL,
                seq bigint NOT NULL,
                event bytea NOT NULL,
                PRIMARY KEY (container, owner, operation_id, seq),
                FOREIGN KEY (container, owner, operation_id) REFERENCES long_lived_operations ON DELETE CASCADE
            )
            """,
            """
            CREATE TABLE server_secret (
                id integer PRIMARY KEY CHECK (id = 1),
                secret bytea NOT NULL
            )
            """,
        ],
        // v6: subscriptions and the notification feeds they fill (SubscriptionStorage), as
        // SQLite's schema v4, v7 and v9 keep them.
        //
        // - subscriptions: one row per (database, subscriber, subscription ID), keyed by its
        //   database first. In a private database the subscriber is the owner; in the public
        //   one any user. kind is 1 query, 2 zone, 3 database; record_type and zone_name copy
        //   what the body (a serialized Wire.Subscription) says; position orders a database's
        //   subscriptions by when they were first saved (the order they fire in).
        // - databases.subscriptions_generation: replaced, from subscription_generations (a
        //   sequence never hands a value out twice, even to a transaction that rolled back), by
        //   every transaction that changes the database's subscriptions. A writer reads it in
        //   its own transaction and reuses the subscriptions it compiled while it stays the
        //   same, whichever node changed them.
        // - notification_feeds: per (container, user) the sequence of the last notification
        //   (head_seq), how far old ones were pruned (pruned_seq) and the badge count. A
        //   writer moves head_seq under the row's lock, so a feed's sequences are gap-free
        //   and in commit order across nodes.
        // - notifications: the feed, one serialized Wire.PushNotification per (container,
        //   user, seq), with the scope of the database it came from, its ID (copied out of the
        //   body, to mark it read) and whether it was. Times are ns since the epoch.
        [
            "ALTER TABLE databases ADD COLUMN subscriptions_generation bigint NOT NULL DEFAULT 0",
            "CREATE SEQUENCE subscription_generations",
            """
            CREATE TABLE subscriptions (
                container text COLLATE "C" NOT NULL,
                owner text COLLATE "C" NOT NULL,
                scope integer NOT NULL,
                subscriber text COLLATE "C" NOT NULL,
                subscription_id text COLLATE "C" NOT NULL,
                kind integer NOT NULL,
                record_type text COLLATE "C" NOT NULL,
                zone_name text COLLATE "C",
                body bytea NOT NULL,
                created_ns bigint NOT NULL,
                position bigint NOT NULL,
                PRIMARY KEY (container, owner, scope, subscriber, subscription_id),
                FOREIGN KEY (container, owner, scope) REFERENCES databases
            )
            """,
            "CREATE INDEX subscriptions_by_position ON subscriptions (container, owner, scope, position)",
            """
            CREATE TABLE notification_feeds (
                container text COLLATE "C" NOT NULL,
                owner text COLLATE "C" NOT NULL,
                head_seq bigint NOT NULL DEFAULT 0,
                pruned_seq bigint NOT NULL DEFAULT 0,
                badge bigint NOT NULL DEFAULT 0,
                PRIMARY KEY (container, owner)
            )
            """,
            """
            CREATE TABLE notifications (
                container text COLLATE "C" NOT NULL,
                owner text COLLATE "C" NOT NULL,
                seq bigint NOT NULL,
                scope integer NOT NULL,
                created_ns bigint NOT NULL,
                notification_id text COLLATE "C" NOT NULL,
                is_read boolean NOT NULL DEFAULT false,
                body bytea NOT NULL,
                PRIMARY KEY (container, owner, seq)
            )
            """,
            "CREATE INDEX notifications_by_id ON notifications (container, owner, notification_id)",
            "CREATE INDEX notifications_by_time ON notifications (created_ns)",
        ],
        // v7: what queries find records by (PostgresIndexRows), as SQLite's schema v2 and v7
        // keep it.
        //
        // - records.created_ns, modified_ns (nanoseconds since 1970) and modifier (the last
        //   modifier's user record name): the system fields a query compares and sorts by, out
        //   of the record; the indexes list a zone's records of a type by row ID, creation or
        //   modification, so a page in one of these orders reads about a page of rows.
        // - record_values: one row per field value or list element of a record (kind is
        //   IndexedKind: the value's type, lists apart), keyed by the record's key and deleted
        //   with it. A value is in the column of its type (PostgresIndexRows.Columns); the
        //   indexes list a zone's values of one type, key and kind in value order.
        //
        // - records.id: the record's row ID, kept while it exists (a save again keeps it), the
        //   order of a query without sort descriptors.
        // - query_preimages: per record version a write replaced or deleted, at the zone's
        //   change sequence replaced_seq, the version as it was (old_seq, its sort columns
        //   and data), so a query cursor of an earlier sequence places the record as of then.
        //   Every write keeps them; pruneQueryCursors deletes those older than a cursor's
        //   lifetime (kept_at, seconds since 1970).
        //
        // Records stored before are indexed by the migration (backfills).
        [
            """
            ALTER TABLE records ADD COLUMN id bigint GENERATED ALWAYS AS IDENTITY,
                ADD COLUMN created_ns bigint NOT NULL DEFAULT 0,
                ADD COLUMN modified_ns bigint NOT NULL DEFAULT 0,
                ADD COLUMN modifier text COLLATE "C" NOT NULL DEFAULT ''
            """,
            "CREATE INDEX records_by_type ON records (container, owner, scope, zone_id, record_type, id)",
            """
            CREATE INDEX records_by_created ON records (container, owner, scope, zone_id, record_type, created_ns, name)
            """,
            """
            CREATE INDEX records_by_modified ON records (container, owner, scope, zone_id, record_type, modified_ns, name)
            """,
            """
            CREATE TABLE record_values (
                container text COLLATE "C" NOT NULL,
                owner text COLLATE "C" NOT NULL,
                scope integer NOT NULL,
                zone_id bigint NOT NULL,
                record_name text COLLATE "C" NOT NULL,
                key text COLLATE "C" NOT NULL,
                list_index integer NOT NULL,
                kind integer NOT NULL,
                record_type text COLLATE "C" NOT NULL,
                int_value bigint,
                real_value double precision,
                real_value2 double precision,
                bytes_value bytea,
                PRIMARY KEY (container, owner, scope, zone_id, record_name, key, list_index),
                FOREIGN KEY (container, owner, scope, zone_id, record_name) REFERENCES records ON DELETE CASCADE
            )
            """,
            """
            CREATE INDEX record_values_by_int
                ON record_values (container, owner, scope, zone_id, record_type, key, kind, int_value)
            """,
            """
            CREATE INDEX record_values_by_real
                ON record_values (container, owner, scope, zone_id, record_type, key, kind, real_value)
                WHERE real_value IS NOT NULL
            """,
            """
            CREATE TABLE query_preimages (
                container text COLLATE "C" NOT NULL,
                owner text COLLATE "C" NOT NULL,
                scope integer NOT NULL,
                zone_id bigint NOT NULL,
                replaced_seq bigint NOT NULL,
                name text COLLATE "C" NOT NULL,
                record_type text COLLATE "C" NOT NULL,
                record_id bigint NOT NULL,
                old_seq bigint NOT NULL,
                created_ns bigint NOT NULL,
                modified_ns bigint NOT NULL,
                data bytea NOT NULL,
                kept_at double precision NOT NULL,
                PRIMARY KEY (container, owner, scope, zone_id, replaced_seq, name),
                FOREIGN KEY (container, owner, scope, zone_id) REFERENCES zones ON DELETE CASCADE
            )
            """,
            "CREATE INDEX query_preimages_by_kept_at ON query_preimages (kept_at)",
            """
            CREATE INDEX record_values_by_bytes
                ON record_values (container, owner, scope, zone_id, record_type, key, kind, bytes_value)
                WHERE bytes_value IS NOT NULL
            """,
        ],
        // v8: shares and their participants (ShareStorage), as SQLite's schema v10 and v11 keep
        // them.
        //
        // - shares: one row per share record of a zone of a private database, keyed by its
        //   zone like the record, which it goes with: root_name is the root of a hierarchy
        //   share (NULL for the zone-wide share, `cloudkit.zoneshare`), token the secret of its
        //   URL (unique), public_permission a Wire.ShareParticipantPermission; id orders shares
        //   by when they were first saved.
        // - share_participants: one row per participant of a share, the owner included; user_name
        //   is NULL while the invitation names someone the directory does not know; role,
        //   permission and status are Wire's numbers. They go with their share.
        // - tombstones.shared_by: the record names of the shares a deleted record was in (NULL
        //   when none), so a participant's change feed lists only deletions of records shared
        //   with them. No share existed before v8: earlier tombstones were in none.
        //
        // Every change of a share happens under its database's row lock, as a record write does,
        // so nodes accepting, leaving and saving one share at once take turns.
        [
            """
            CREATE TABLE shares (
                container text COLLATE "C" NOT NULL,
                owner text COLLATE "C" NOT NULL,
                scope integer NOT NULL,
                zone_id bigint NOT NULL,
                name text COLLATE "C" NOT NULL,
                id bigint GENERATED ALWAYS AS IDENTITY,
                root_name text COLLATE "C",
                token text COLLATE "C" NOT NULL UNIQUE,
                public_permission integer NOT NULL,
                PRIMARY KEY (container, owner, scope, zone_id, name),
                FOREIGN KEY (container, owner, scope, zone_id) REFERENCES zones ON DELETE CASCADE
            )
            """,
            "CREATE INDEX shares_by_root ON shares (container, owner, scope, zone_id, root_name)",
            """
            CREATE TABLE share_participants (
                container text COLLATE "C" NOT NULL,
                owner text COLLATE "C" NOT NULL,
                scope integer NOT NULL,
                zone_id bigint NOT NULL,
                share_name text COLLATE "C" NOT NULL,
                participant_id text COLLATE "C" NOT NULL,
                user_name text COLLATE "C",
                role integer NOT NULL,
                permission integer NOT NULL,
                status integer NOT NULL,
                PRIMARY KEY (container, owner, scope, zone_id, share_name, participant_id),
                FOREIGN KEY (container, owner, scope, zone_id, share_name) REFERENCES shares ON DELETE CASCADE
            )
            """,
            "CREATE INDEX share_participants_by_user ON share_participants (container, user_name, status)",
            "ALTER TABLE tombstones ADD COLUMN shared_by text[]",
        ],
        // v9: asset contents and the records that refer to them (PostgresStorage+SchemaV9).
        assetsMigration,
        // v10: the words full-text search finds records by (PostgresStorage+SchemaV10.swift).
        recordWordsMigration,
        // v11: leases on running long-lived operations (PostgresStorage+SchemaV11.swift).
        migrationV11,
        // v12: cancellations of long-lived operations (PostgresStorage+SchemaV12.swift).
        migrationV12,
    ]

    /// What a version's migration computes in Swift after its statements, in the same
    /// transaction: values SQL cannot read out of a stored record.
    static let backfills: [Int: @Sendable (PostgresConnection, Logger) async throws -> Void] = [
        7: { try await PostgresIndexRows.backfill($0, $1) },
        recordWordsVersion: { try await PostgresTextRows.backfill($0, $1) },
    ]

    /// Brings the schema to ``schemaVersion`` in one transaction that holds the migration
    /// advisory lock: a node starting while another migrates waits, then finds the work done.
    ///
    /// - parameter target: the version to stop at (tests migrate from an older one).
    static func migrate(
        _ connection: PostgresConnection, logger: Logger, through target: Int = schemaVersion
    ) async throws {
        let applied = try await connection.withTransaction(logger: logger) { connection in
            try await connection.query("SELECT pg_advisory_xact_lock(\(Self.migrationLockKey))", logger: logger)
            try await connection.query(
                """
                CREATE TABLE IF NOT EXISTS cirrus_schema (
                    version integer PRIMARY KEY,
                    applied_at timestamptz NOT NULL DEFAULT now()
                )
                """, logger: logger)
            let rows = try await connection.query("SELECT coalesce(max(version), 0) FROM cirrus_schema", logger: logger)
            var current = 0
            for try await version in rows.decode(Int.self) { current = version }
            guard current <= Self.schemaVersion else {
                throw StoreError(
                    .storageFailure,
                    "the database's schema is version \(current), newer than this cirrusd's \(Self.schemaVersion)")
            }
            for version in stride(from: current + 1, through: min(target, Self.schemaVersion), by: 1) {
                for statement in Self.migrations[version - 1] {
                    try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger)
                }
                if let backfill = Self.backfills[version] { try await backfill(connection, logger) }
                try await connection.query("INSERT INTO cirrus_schema (version) VALUES (\(version))", logger: logger)
            }
            return max(0, min(target, Self.schemaVersion) - current)
        }
        if applied > 0 {
            logger.info("PostgreSQL schema migrated", metadata: ["to": "\(target)", "steps": "\(applied)"])
        }
    }
}
