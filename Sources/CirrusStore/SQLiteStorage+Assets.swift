public import CirrusWire
import Foundation
import GRDB

extension SQLiteStorage {
    @discardableResult
    public func pruneUnreferencedAssets() async throws -> Int {
        try await write(weight: 1) { db in
            try db.run(sql: "DELETE FROM assets WHERE sha256 NOT IN (SELECT sha256 FROM asset_references)")
            return db.changesCount
        }
    }

    public func noteAssetsCommitted(_ digests: [[UInt8]], at time: Wire.Timestamp) async throws {
        let seconds = RecordCodec.seconds(time)
        // A drop holds the lock while it checks and moves the file: a note waits for it.
        assetCommits.withLock { commits in
            for digest in digests { commits[digest] = max(commits[digest] ?? seconds, seconds) }
        }
    }

    public func dropAssetIfUnreferenced(
        _ sha256: [UInt8], committedBefore cutoff: Wire.Timestamp, whileLocked remove: @escaping @Sendable () throws -> Void
    ) async throws -> Bool {
        let cutoff = RecordCodec.seconds(cutoff)
        return try await write(weight: 1) { [self] db in
            guard
                try db.int64(
                    sql: "SELECT 1 FROM asset_references WHERE sha256 = ? LIMIT 1", arguments: [Data(sha256)]) == nil
            else { return false }
            // The writer queue orders this against saves; the lock against notes of commits.
            let dropped = try assetCommits.withLock { commits throws -> Bool in
                if let committed = commits[sha256], committed >= cutoff { return false }
                try remove()
                commits[sha256] = nil
                return true
            }
            guard dropped else { return false }
            try db.run(sql: "DELETE FROM assets WHERE sha256 = ?", arguments: [Data(sha256)])
            return true
        }
    }

    @discardableResult
    public func forgetAssetCommits(before cutoff: Wire.Timestamp) async throws -> Int {
        let cutoff = RecordCodec.seconds(cutoff)
        return assetCommits.withLock { commits in
            let before = commits.count
            commits = commits.filter { $0.value >= cutoff }
            return before - commits.count
        }
    }

    public func assetIsReferenced(_ sha256: [UInt8]) async throws -> Bool {
        try await read { db in
            try db.int64(sql: "SELECT 1 FROM asset_references WHERE sha256 = ? LIMIT 1", arguments: [Data(sha256)]) != nil
        }
    }

    public func assetBytes(createdBy user: String) async throws -> UInt64 {
        try await read { db in
            let bytes = try db.int64(
                sql: """
                    SELECT COALESCE(SUM(size), 0) FROM assets WHERE sha256 IN (
                        SELECT r.sha256 FROM asset_references r JOIN records ON records.id = r.record_id
                        WHERE records.creator = ?)
                    """,
                arguments: [user])
            return UInt64(max(bytes ?? 0, 0))
        }
    }
}
