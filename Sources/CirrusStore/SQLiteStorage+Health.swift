import Foundation
import GRDB

extension SQLiteStorage {
    /// Checks that the storage can serve: a read on the database succeeds and its directory
    /// and file are still writable (a full disk shows up in the writes themselves).
    ///
    /// For example, a readiness probe: `try await storage.checkHealth()`.
    ///
    /// - throws: ``StoreError`` `.storageFailure` saying what is wrong.
    public func checkHealth() async throws {
        _ = try await read { db in try Int.fetchOne(db, sql: "SELECT 1") }
        let path = (directory as NSString).appendingPathComponent(Self.fileName)
        for (what, target) in [("data directory", directory), ("database file", path)] where access(target, W_OK) != 0 {
            throw StoreError(.storageFailure, "the \(what) \(target) is not writable: \(String(cString: strerror(errno)))")
        }
    }
}
