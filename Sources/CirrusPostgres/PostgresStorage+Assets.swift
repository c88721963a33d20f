public import CirrusStore
public import CirrusWire
import Logging
import NIOCore
import PostgresNIO

extension PostgresStorage: AssetReferenceStorage {
    /// The class of the advisory locks that order a content's commits and its drop ("as").
    static let assetLockClass: Int32 = 0x61_73

    /// The advisory lock of content `sha256` (its first four bytes: two contents that share
    /// them only take turns).
    static func assetLock(_ sha256: [UInt8]) -> Int32 {
        var key: UInt32 = 0
        for byte in sha256.prefix(4) { key = key << 8 | UInt32(byte) }
        return Int32(bitPattern: key)
    }

    /// Deletes the contents no record refers to, in one transaction that locks them first:
    /// a save naming one of them (it locks what it finds, ``PostgresAssetRows/known(_:_:_:)``)
    /// either committed before, and the content stays, or finds it gone.
    @discardableResult
    public func pruneUnreferencedAssets() async throws -> Int {
        let logger = self.logger
        return try await transaction { connection in
            let candidates = try await connection.query(
                """
                SELECT sha256 FROM assets a
                WHERE NOT EXISTS (SELECT 1 FROM asset_references r WHERE r.sha256 = a.sha256)
                ORDER BY sha256 FOR UPDATE
                """, logger: logger)
            var digests: [ByteBuffer] = []
            for try await digest in candidates.decode(ByteBuffer.self) { digests.append(digest) }
            guard !digests.isEmpty else { return 0 }
            // A statement of its own: it sees the references saves committed while this one
            // waited for their locks.
            var bindings = PostgresBindings(capacity: 1)
            bindings.append(digests)
            let deleted = try await connection.query(
                PostgresQuery(
                    unsafeSQL: """
                        DELETE FROM assets a
                        WHERE a.sha256 = ANY($1::bytea[])
                            AND NOT EXISTS (SELECT 1 FROM asset_references r WHERE r.sha256 = a.sha256)
                        RETURNING 1
                        """,
                    binds: bindings), logger: logger)
            var count = 0
            for try await _ in deleted.decode(Int32.self) { count += 1 }
            return count
        }
    }

    /// Records the commits in one transaction that first takes each content's advisory lock
    /// (in key order, so two notes never wait on each other): it waits for a drop in progress.
    public func noteAssetsCommitted(_ digests: [[UInt8]], at time: Wire.Timestamp) async throws {
        let unique = Array(Set(digests)).sorted { $0.lexicographicallyPrecedes($1) }
        guard !unique.isEmpty else { return }
        let locks = Set(unique.map(Self.assetLock)).sorted()
        var bindings = PostgresBindings(capacity: 2)
        bindings.append(unique.map { ByteBuffer(bytes: $0) })
        bindings.append(RecordCodec.seconds(time))
        let logger = self.logger
        try await transaction { [bindings] connection in
            for lock in locks { try await Self.takeAssetLock(lock, connection, logger) }
            try await connection.query(
                PostgresQuery(
                    unsafeSQL: """
                        INSERT INTO asset_commits (sha256, committed_at)
                        SELECT sha256, $2 FROM unnest($1::bytea[]) AS committed (sha256) ORDER BY sha256
                        ON CONFLICT (sha256) DO UPDATE
                            SET committed_at = greatest(asset_commits.committed_at, excluded.committed_at)
                        """,
                    binds: bindings), logger: logger)
        }
    }

    /// Takes the advisory lock `key` of the asset lock class until the transaction ends.
    private static func takeAssetLock(_ key: Int32, _ connection: PostgresConnection, _ logger: Logger) async throws {
        var bindings = PostgresBindings(capacity: 2)
        bindings.append(assetLockClass)
        bindings.append(key)
        try await connection.query(
            PostgresQuery(unsafeSQL: "SELECT pg_advisory_xact_lock($1, $2)", binds: bindings), logger: logger)
    }

    /// Checks and drops under the content's advisory lock and its `assets` row lock, each
    /// check a statement of its own after the locks (it sees what committed meanwhile); runs
    /// `remove` before the commit.
    public func dropAssetIfUnreferenced(
        _ sha256: [UInt8], committedBefore cutoff: Wire.Timestamp, whileLocked remove: @escaping @Sendable () throws -> Void
    ) async throws -> Bool {
        var digest = PostgresBindings(capacity: 1)
        digest.append(ByteBuffer(bytes: sha256))
        var bindings = digest
        bindings.append(RecordCodec.seconds(cutoff))
        let logger = self.logger
        return try await transaction { [digest, bindings] connection in
            try await Self.takeAssetLock(Self.assetLock(sha256), connection, logger)
            try await connection.query(
                PostgresQuery(unsafeSQL: "SELECT 1 FROM assets WHERE sha256 = $1 FOR UPDATE", binds: digest), logger: logger)
            let needed = try await connection.query(
                PostgresQuery(
                    unsafeSQL: """
                        SELECT EXISTS (SELECT 1 FROM asset_references WHERE sha256 = $1)
                            OR EXISTS (SELECT 1 FROM asset_commits WHERE sha256 = $1 AND committed_at >= $2)
                        """,
                    binds: bindings), logger: logger)
            var stillNeeded = true
            for try await value in needed.decode(Bool.self) { stillNeeded = value }
            guard !stillNeeded else { return false }
            try await connection.query(
                PostgresQuery(
                    unsafeSQL: """
                        WITH forgotten AS (DELETE FROM asset_commits WHERE sha256 = $1)
                        DELETE FROM assets WHERE sha256 = $1
                        """,
                    binds: digest), logger: logger)
            try remove()
            return true
        }
    }

    @discardableResult
    public func forgetAssetCommits(before cutoff: Wire.Timestamp) async throws -> Int {
        var bindings = PostgresBindings(capacity: 1)
        bindings.append(RecordCodec.seconds(cutoff))
        let logger = self.logger
        return try await connection { [bindings] connection in
            let rows = try await connection.query(
                PostgresQuery(unsafeSQL: "DELETE FROM asset_commits WHERE committed_at < $1 RETURNING 1", binds: bindings),
                logger: logger)
            var count = 0
            for try await _ in rows.decode(Int32.self) { count += 1 }
            return count
        }
    }

    public func assetIsReferenced(_ sha256: [UInt8]) async throws -> Bool {
        var bindings = PostgresBindings(capacity: 1)
        bindings.append(ByteBuffer(bytes: sha256))
        let logger = self.logger
        return try await connection { [bindings] connection in
            let rows = try await connection.query(
                PostgresQuery(unsafeSQL: "SELECT 1 FROM asset_references WHERE sha256 = $1 LIMIT 1", binds: bindings),
                logger: logger)
            var found = false
            for try await _ in rows.decode(Int32.self) { found = true }
            return found
        }
    }

    public func assetBytes(createdBy user: String) async throws -> UInt64 {
        var bindings = PostgresBindings(capacity: 1)
        bindings.append(user)
        let logger = self.logger
        return try await connection { [bindings] connection in
            let rows = try await connection.query(
                PostgresQuery(
                    unsafeSQL: """
                        SELECT coalesce(sum(size), 0)::bigint FROM assets WHERE sha256 IN (
                            SELECT a.sha256 FROM asset_references a
                            JOIN records r ON r.container = a.container AND r.owner = a.owner AND r.scope = a.scope
                                AND r.zone_id = a.zone_id AND r.name = a.record_name
                            WHERE r.creator = $1)
                        """,
                    binds: bindings), logger: logger)
            var bytes: Int64 = 0
            for try await value in rows.decode(Int64.self) { bytes = value }
            return UInt64(max(bytes, 0))
        }
    }
}
