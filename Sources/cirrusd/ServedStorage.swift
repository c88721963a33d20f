import CirrusPostgres
import CirrusServer
import CirrusStore
import Foundation
import Logging

/// The storage `cirrusd` serves from: the embedded SQLite storage in `--data-dir` (the
/// default), or a PostgreSQL server that several `cirrusd` nodes share (`--database`).
///
/// For example:
/// ```swift
/// let storage = try await ServedStorage.openPostgres(url: url, logLevel: .info)
/// let executor = StorageExecutor(storage: storage.records, …)
/// ```
enum ServedStorage {
    case sqlite(SQLiteStorage)
    case postgres(PostgresStorage)

    /// Connects to the PostgreSQL server at `url` and brings its schema to this version's
    /// (under an advisory lock, so nodes starting together migrate once).
    static func openPostgres(
        url: PostgresURL, maximumConnections: Int = 20,
        queryCursorLifetime: Double = SQLiteStorage.defaultQueryCursorLifetime, logLevel: Logger.Level
    ) async throws -> ServedStorage {
        var logger = Logger(label: "cirrus.postgres")
        logger.logLevel = logLevel
        let storage = try await PostgresStorage(
            url: url, maximumConnections: maximumConnections, queryCursorLifetime: queryCursorLifetime, logger: logger)
        return .postgres(storage)
    }

    /// Everything the operations run against, and the long-lived operations' journal.
    var records: any RecordStorage & OperationJournal {
        switch self {
        case .sqlite(let storage): storage
        case .postgres(let storage): storage
        }
    }

    /// The secret change tokens, cursors and handles are sealed with: the data directory's for
    /// SQLite (created there on the first start); the database's for PostgreSQL, so a token
    /// sealed by one node opens on every other.
    func serverSecret(dataDirectory: String) async throws -> [UInt8] {
        switch self {
        case .sqlite: try ServerSecret.loadOrCreate(inDirectory: dataDirectory)
        case .postgres(let storage): try await ServerSecret.load(from: storage)
        }
    }

    /// Counts every write transaction in `metrics`.
    func observeCommits(_ observer: @escaping @Sendable (WriteCommit) -> Void) {
        switch self {
        case .sqlite(let storage): storage.observeCommits(observer)
        case .postgres(let storage): storage.observeCommits(observer)
        }
    }

    /// Whether the storage can serve (the readiness probe's question).
    func checkHealth() async throws {
        switch self {
        case .sqlite(let storage): try await storage.checkHealth()
        case .postgres(let storage): try await storage.checkHealth()
        }
    }

    /// The user directory and tokens (for the `users` and `tokens` commands).
    var directory: any UserStorage & TokenStorage {
        switch self {
        case .sqlite(let storage): storage
        case .postgres(let storage): storage
        }
    }

    /// Closes the storage; it is not used afterwards.
    func close() async throws {
        switch self {
        case .sqlite(let storage): try storage.close()
        case .postgres(let storage): await storage.close()
        }
    }

    /// This node's ID when `--node-id` is not given: `local` on SQLite, where one process serves
    /// a data directory; on PostgreSQL the host's name and `port`, which stay the same across
    /// the node's restarts and differ between nodes (a random ID when the port is picked at
    /// random, 0).
    func defaultNodeID(port: Int) -> String {
        switch self {
        case .sqlite: return "local"
        case .postgres:
            guard port != 0 else { return LongLivedOperations.Leasing.randomNodeID() }
            return "\(ProcessInfo.processInfo.hostName):\(port)"
        }
    }

    /// What the log's start line says of it.
    var description: String {
        switch self {
        case .sqlite(let storage): "SQLite in \(storage.directory)"
        case .postgres(let storage): "PostgreSQL at \(storage.url)"
        }
    }
}
