import GRDB

/// Reads the shares generation (schema v13's `share_generation` row, which triggers move
/// with every change of `shares` or `share_participants`, by any process) on a read-only
/// connection of its own, so a request's access check does not wait for one of the pool's
/// readers. A read sees every transaction committed before it began: a change of a share
/// has moved the value before the write that made it returns, in this process or another.
final class ShareGeneration: Sendable {
    private let connection: DatabaseQueue

    /// Opens the connection on the store's file (already migrated to v13).
    init(path: String) throws {
        var configuration = Configuration()
        configuration.label = "CirrusStore.shareGeneration"
        configuration.readonly = true
        configuration.busyMode = .timeout(10)
        connection = try DatabaseQueue(path: path, configuration: configuration)
    }

    /// The value now; nil when it cannot be read (the caller then reads the shares afresh).
    var current: UInt64? {
        try? connection.inDatabase { db in
            try Int64.fetchOne(db.cachedStatement(sql: "SELECT value FROM share_generation WHERE id = 1"))
        }.map { UInt64(bitPattern: $0) }
    }

    func close() throws {
        try connection.close()
    }
}
