public import CirrusWire
import Foundation
import GRDB

extension SQLiteStorage: TokenStorage {
    public func saveToken(_ token: StoredToken) async throws {
        try DirectoryRules.checkUserName(token.user)
        try await write(weight: 2) { db in
            guard try Bool.fetchOne(db, sql: "SELECT 1 FROM bearer_tokens WHERE id = ?", arguments: [token.id]) == nil
            else { throw DirectoryRules.tokenExists(token.id) }
            try db.run(
                sql: "INSERT OR IGNORE INTO users (name, created_at) VALUES (?, ?)",
                arguments: [token.user, RecordCodec.seconds(token.createdAt)])
            try db.run(
                sql: """
                    INSERT INTO bearer_tokens (id, hash, user, label, created_at, expires_at, revoked_at)
                    VALUES (?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [
                    token.id, Data(token.hash), token.user, token.label, RecordCodec.seconds(token.createdAt),
                    token.expiresAt.map(RecordCodec.seconds), token.revokedAt.map(RecordCodec.seconds),
                ])
        }
    }

    public func tokens(of user: String?) async throws -> [StoredToken] {
        try await read { db in
            let rows: [Row]
            if let user {
                rows = try Row.fetchAll(
                    db, sql: "SELECT * FROM bearer_tokens WHERE user = ? ORDER BY created_at, id", arguments: [user])
            } else {
                rows = try Row.fetchAll(db, sql: "SELECT * FROM bearer_tokens ORDER BY created_at, id")
            }
            return rows.map(Self.storedToken)
        }
    }

    @discardableResult
    public func revokeToken(_ id: String, at time: Wire.Timestamp) async throws -> StoredToken {
        let seconds = RecordCodec.seconds(time)
        return try await write(weight: 1) { db in
            try db.run(
                sql: "UPDATE bearer_tokens SET revoked_at = coalesce(revoked_at, ?) WHERE id = ?", arguments: [seconds, id])
            guard let row = try db.row(sql: "SELECT * FROM bearer_tokens WHERE id = ?", arguments: [id]) else {
                throw DirectoryRules.unknownToken(id)
            }
            return Self.storedToken(row)
        }
    }

    @discardableResult
    public func pruneTokens(endedBefore cutoff: Wire.Timestamp) async throws -> Int {
        let seconds = RecordCodec.seconds(cutoff)
        return try await write(weight: 1) { db in
            try db.run(
                sql: "DELETE FROM bearer_tokens WHERE revoked_at < ?1 OR (revoked_at IS NULL AND expires_at < ?1)",
                arguments: [seconds])
            return db.changesCount
        }
    }

    public func activeTokens(at time: Wire.Timestamp) async throws -> [StoredToken] {
        let seconds = RecordCodec.seconds(time)
        return try await read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT * FROM bearer_tokens
                    WHERE revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ?)
                    """,
                arguments: [seconds]
            ).map(Self.storedToken)
        }
    }

    private static func storedToken(_ row: Row) -> StoredToken {
        StoredToken(
            id: row["id"], hash: [UInt8](row["hash"] as Data? ?? Data()), user: row["user"], label: row["label"],
            createdAt: DirectoryRules.timestamp(seconds: row["created_at"] as Double? ?? 0),
            expiresAt: (row["expires_at"] as Double?).map { DirectoryRules.timestamp(seconds: $0) },
            revokedAt: (row["revoked_at"] as Double?).map { DirectoryRules.timestamp(seconds: $0) })
    }
}
