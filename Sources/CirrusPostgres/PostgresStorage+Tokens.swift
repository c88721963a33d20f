public import CirrusStore
public import CirrusWire
import Foundation
import Logging
import PostgresNIO

extension PostgresStorage: TokenStorage {
    private static let tokenColumns = "id, hash, user_name, label, created_at, expires_at, revoked_at"
    private typealias TokenColumns = (String, Data, String, String, Double, Double?, Double?)

    /// Stores a new token, registering its user when the directory does not know them yet.
    /// The token's ID is claimed with one `INSERT … ON CONFLICT`: of two nodes saving the
    /// same ID at once, the second to commit gets `.alreadyExists` and stores nothing.
    ///
    /// - throws: ``StoreError`` `.alreadyExists` for a token ID in use, `.invalidArguments` for
    ///   a malformed user name.
    public func saveToken(_ token: StoredToken) async throws {
        try DirectoryRules.checkUserName(token.user)
        let created = RecordCodec.seconds(token.createdAt)
        let expires = token.expiresAt.map(RecordCodec.seconds)
        let revoked = token.revokedAt.map(RecordCodec.seconds)
        let logger = self.logger
        try await transaction { connection in
            try await connection.query(
                "INSERT INTO users (name, created_at) VALUES (\(token.user), \(created)) ON CONFLICT (name) DO NOTHING",
                logger: logger)
            let inserted = try await connection.query(
                """
                INSERT INTO bearer_tokens (id, hash, user_name, label, created_at, expires_at, revoked_at)
                VALUES (\(token.id), \(Data(token.hash)), \(token.user), \(token.label), \(created), \(expires), \(revoked))
                ON CONFLICT (id) DO NOTHING RETURNING 1
                """, logger: logger)
            var saved = false
            for try await _ in inserted.decode(Int32.self) { saved = true }
            // Throwing rolls back the user created above too.
            guard saved else { throw DirectoryRules.tokenExists(token.id) }
        }
    }

    /// The tokens of `user` (nil: of everyone), revoked and expired ones included, oldest first.
    ///
    /// - throws: ``StoreError``.
    public func tokens(of user: String?) async throws -> [StoredToken] {
        let logger = self.logger
        return try await connection { connection in
            let rows =
                if let user {
                    try await connection.query(
                        """
                        SELECT \(unescaped: Self.tokenColumns) FROM bearer_tokens WHERE user_name = \(user)
                        ORDER BY created_at, id
                        """, logger: logger)
                } else {
                    try await connection.query(
                        "SELECT \(unescaped: Self.tokenColumns) FROM bearer_tokens ORDER BY created_at, id", logger: logger)
                }
            var tokens: [StoredToken] = []
            for try await columns in rows.decode(TokenColumns.self) { tokens.append(Self.storedToken(columns)) }
            return tokens
        }
    }

    /// Revokes the token `id`; revoking it again changes nothing (it keeps its first
    /// revocation time).
    ///
    /// - throws: ``StoreError`` `.invalidArguments` when there is no such token.
    @discardableResult
    public func revokeToken(_ id: String, at time: Wire.Timestamp) async throws -> StoredToken {
        let seconds = RecordCodec.seconds(time)
        let logger = self.logger
        return try await connection { connection in
            let rows = try await connection.query(
                """
                UPDATE bearer_tokens SET revoked_at = coalesce(revoked_at, \(seconds)) WHERE id = \(id)
                RETURNING \(unescaped: Self.tokenColumns)
                """, logger: logger)
            for try await columns in rows.decode(TokenColumns.self) { return Self.storedToken(columns) }
            throw DirectoryRules.unknownToken(id)
        }
    }

    /// Deletes the tokens that expired or were revoked before `cutoff`; returns how many.
    ///
    /// - throws: ``StoreError``.
    @discardableResult
    public func pruneTokens(endedBefore cutoff: Wire.Timestamp) async throws -> Int {
        let seconds = RecordCodec.seconds(cutoff)
        let logger = self.logger
        return try await connection { connection in
            let rows = try await connection.query(
                """
                WITH pruned AS (
                    DELETE FROM bearer_tokens
                    WHERE revoked_at < \(seconds) OR (revoked_at IS NULL AND expires_at < \(seconds))
                    RETURNING 1
                )
                SELECT count(*) FROM pruned
                """, logger: logger)
            var count: Int64 = 0
            for try await value in rows.decode(Int64.self) { count = value }
            return Int(count)
        }
    }

    /// The tokens neither revoked nor expired at `time`, oldest first.
    ///
    /// - throws: ``StoreError``.
    public func activeTokens(at time: Wire.Timestamp) async throws -> [StoredToken] {
        let seconds = RecordCodec.seconds(time)
        let logger = self.logger
        return try await connection { connection in
            let rows = try await connection.query(
                """
                SELECT \(unescaped: Self.tokenColumns) FROM bearer_tokens
                WHERE revoked_at IS NULL AND (expires_at IS NULL OR expires_at > \(seconds))
                ORDER BY created_at, id
                """, logger: logger)
            var tokens: [StoredToken] = []
            for try await columns in rows.decode(TokenColumns.self) { tokens.append(Self.storedToken(columns)) }
            return tokens
        }
    }

    private static func storedToken(_ columns: TokenColumns) -> StoredToken {
        let (id, hash, user, label, created, expires, revoked) = columns
        return StoredToken(
            id: id, hash: [UInt8](hash), user: user, label: label,
            createdAt: DirectoryRules.timestamp(seconds: created),
            expiresAt: expires.map(DirectoryRules.timestamp(seconds:)),
            revokedAt: revoked.map(DirectoryRules.timestamp(seconds:)))
    }
}
