public import CirrusStore
public import CirrusWire
import Foundation
public import Logging
import PostgresNIO
import Synchronization

/// The storage engine on a PostgreSQL server, for several `cirrusd` nodes sharing one
/// database (`cirrusd --database`): all of ``RecordStorage`` — records, zones and their change
/// feeds, queries (full-text search and distance sorts included), subscriptions and
/// notification feeds, the user directory and bearer tokens, shares and the shared database,
/// asset references — and the long-lived operation journal (``OperationJournal``) and the
/// server secret (``ServerSecretStorage``), with the SQLite engine's semantics (README →
/// PostgreSQL).
///
/// Asset content that a record brings inline is kept here once per checksum; larger content
/// is files of the server's asset store, in a directory every node shares (a shared file
/// system): this storage keeps which contents exist, which records name them, and which
/// contents a node committed lately, and orders each content's commits and its drop with an
/// advisory lock, so no node's collection removes a file another node still needs.
///
/// Opening it connects a pool to the server and brings the schema to this version's
/// (``PostgresStorage/schemaVersion``) under an advisory lock, so nodes starting together
/// migrate once. Every table of a database's data is keyed by (container, owner, scope) first,
/// so the data can be distributed by that key later; the user directory and tokens are the
/// server's, keyed by user. Sessions run with `synchronous_commit=on`: a call returns
/// after its transaction is durable on the server. Concurrent writes into one database on
/// one node share transactions (group commit, ``observeCommits(_:)``). A write's notifications
/// are stored in its transaction; every node's observers hear of them, through a connection
/// that `LISTEN`s (``observeNotifications(_:)``). Shares change under their database's row
/// lock, like records; access checks read them afresh on every request (no
/// ``sharesGeneration``), so a participant removed on one node loses access on every node.
///
/// For example:
/// ```swift
/// let storage = try await PostgresStorage(url: PostgresURL("postgres://cirrus@db/cirrus"))
/// let zones = try await storage.fetchAllZones(in: .private(container: "c", user: "_alice"))
/// await storage.close()
/// ```
public final class PostgresStorage: RecordSyncStorage {
    /// At most this many items (records, zones) in one request.
    public let maxItemsPerOperation: Int
    /// The server, password masked.
    public let url: PostgresURL
    /// How long a query cursor stays valid, in seconds.
    public let queryCursorLifetime: Double

    let client: PostgresClient
    let logger: Logger
    let clock: @Sendable () -> Wire.Timestamp
    /// How long a call waits for a pooled connection before it fails `.unavailable`.
    let leaseTimeout: Duration
    /// The group commit of record and zone writes, per database.
    let writes: PostgresWriteQueue
    /// Told of every write transaction (see ``observeCommits(_:)``).
    private let commitObservers = CommitObservers()
    /// The compiled subscriptions of each database.
    let subscriptionCache = PostgresSubscriptionCache()
    /// The server secret query cursors are sealed with, once read (``querySecret()``).
    let querySecretCache = Mutex<[UInt8]?>(nil)
    /// The observers of notifications, and how far this node announced each feed.
    let notifications: NotificationAnnouncer
    /// Hears the notifications every node commits (``observeNotifications(_:)``).
    let listener: PostgresNotificationListener
    /// The observers of long-lived operation signals (``observeLongLivedOperations(_:)``).
    let longLivedSignals = PostgresLongLivedSignals()
    private let running: Task<Void, Never>
    private let listening: Task<Void, Never>
    /// Sends the long-lived operation signals this node queues (``PostgresLongLivedSignals``).
    private let signalling: Task<Void, Never>

    /// Connects to `url` and migrates the schema.
    ///
    /// - parameter maximumConnections: the pool's size on this node.
    /// - parameter queryCursorLifetime: seconds a query cursor stays valid.
    /// - parameter leaseTimeout: how long a call waits for a pooled connection (the server
    ///   down, or every connection busy) before it fails with ``StoreError`` `.unavailable`.
    /// - parameter clock: the source of deletion dates; the wall clock unless a test injects one.
    /// - throws: ``StoreError`` `.unavailable` when the server cannot be reached;
    ///   `.storageFailure` when it refuses the sign-in or holds a schema newer than this version.
    public init(
        url: PostgresURL,
        maximumConnections: Int = 20,
        maxItemsPerOperation: Int = SQLiteStorage.defaultMaxItemsPerOperation,
        queryCursorLifetime: Double = SQLiteStorage.defaultQueryCursorLifetime,
        leaseTimeout: Duration = .seconds(10),
        logger: Logger = Logger(label: "cirrus.postgres"),
        clock: @escaping @Sendable () -> Wire.Timestamp = SQLiteStorage.systemClock
    ) async throws {
        // The migration runs on a connection of its own before the pool starts: a server that
        // cannot be reached or refuses the sign-in fails the open at once, with its reason,
        // rather than after the pool's retries.
        let startupParameters = [("synchronous_commit", "on"), ("application_name", "cirrusd")]
        // The listener has a connection of its own (a pooled one would be handed to others).
        var listenerConfiguration: PostgresConnection.Configuration
        do {
            listenerConfiguration = try url.connectionConfiguration()
            listenerConfiguration.options.connectTimeout = .seconds(30)
            listenerConfiguration.options.additionalStartupParameters = [("application_name", "cirrusd-listener")]
            var single = try url.connectionConfiguration()
            single.options.connectTimeout = .seconds(30)
            single.options.additionalStartupParameters = startupParameters
            let connection = try await PostgresConnection.connect(
                on: PostgresClient.defaultEventLoopGroup.any(), configuration: single, id: 0, logger: logger)
            do {
                try await Self.migrate(connection, logger: logger)
            } catch {
                try? await connection.close()
                throw error
            }
            try? await connection.close()
        } catch {
            throw Self.storeError(error)
        }
        var configuration = url.clientConfiguration
        configuration.options.maximumConnections = max(1, maximumConnections)
        configuration.options.connectTimeout = .seconds(30)
        configuration.options.additionalStartupParameters = startupParameters
        let client = PostgresClient(configuration: configuration, backgroundLogger: logger)
        self.client = client
        self.url = url
        self.logger = logger
        self.clock = clock
        self.leaseTimeout = leaseTimeout
        self.maxItemsPerOperation = maxItemsPerOperation
        self.queryCursorLifetime = queryCursorLifetime
        let observers = commitObservers
        let statistics = PostgresColdStatistics(client: client, leaseTimeout: leaseTimeout, logger: logger)
        self.writes = PostgresWriteQueue(client: client, logger: logger, leaseTimeout: leaseTimeout) { commit in
            statistics.noteWritten(commit.items)
            for observer in observers.withLock({ $0 }) { observer(commit) }
        }
        // The pool leases only while run() runs: the open returns once the task that runs it
        // has started (it goes straight on into run()).
        let (started, starting) = AsyncStream<Void>.makeStream()
        self.running = Task {
            starting.finish()
            await client.run()
        }
        for await _ in started {}
        // The open returns once the listener listens (or its first attempt failed), so what
        // other nodes commit from then on reaches this node's observers.
        let announcer = NotificationAnnouncer()
        let listener = PostgresNotificationListener(
            configuration: listenerConfiguration, client: client, leaseTimeout: leaseTimeout, announcer: announcer,
            signals: longLivedSignals, logger: logger)
        self.notifications = announcer
        self.listener = listener
        let signals = longLivedSignals
        self.signalling = Task { await signals.sendQueued(client: client, leaseTimeout: leaseTimeout, logger: logger) }
        let (listens, listen) = AsyncStream<Void>.makeStream()
        self.listening = Task { await listener.run { listen.finish() } }
        for await _ in listens {}
        logger.info("PostgreSQL storage open", metadata: ["url": "\(url)", "schema": "\(Self.schemaVersion)"])
    }

    /// Closes every connection; the storage is not used afterwards.
    public func close() async {
        signalling.cancel()
        await signalling.value
        listening.cancel()
        await listening.value
        running.cancel()
        await running.value
    }

    /// Calls `observer` after every write transaction of records or zones (committed or
    /// not), with how many requests shared it and how long it took; it must return quickly
    /// (count, not work).
    ///
    /// For example:
    /// ```swift
    /// storage.observeCommits { commit in metrics.recordCommit(jobs: commit.jobs, records: commit.items, nanoseconds: …) }
    /// ```
    public func observeCommits(_ observer: @escaping @Sendable (WriteCommit) -> Void) {
        commitObservers.withLock { $0.append(observer) }
    }

    // MARK: - Transactions

    /// Runs `body` in `key`'s database's next transaction, after its row lock, shared with
    /// the concurrent writes into it on this node (``PostgresWriteQueue``); returns after the
    /// commit. An error thrown by `body` undoes only its writes; `body` may run twice, so it
    /// does database work only.
    ///
    /// - parameter weight: about how many rows `body` writes (request items).
    func write<Result: Sendable>(
        in key: DatabaseKey, weight: Int, _ body: @escaping @Sendable (PostgresConnection) async throws -> Result
    ) async throws(StoreError) -> Result {
        do {
            return try await writes.write(in: key, weight: weight, body)
        } catch {
            throw Self.storeError(error)
        }
    }

    /// Runs `body` in one transaction on a pooled connection of its own; commits when it
    /// returns.
    func transaction<Result: Sendable>(
        _ body: @escaping @Sendable (PostgresConnection) async throws -> Result
    ) async throws(StoreError) -> Result {
        try await inTransaction(begin: "BEGIN", body)
    }

    /// Runs `body` in a read-only transaction that sees one snapshot of the database
    /// throughout (REPEATABLE READ), as a reader on SQLite does.
    func snapshot<Result: Sendable>(
        _ body: @escaping @Sendable (PostgresConnection) async throws -> Result
    ) async throws(StoreError) -> Result {
        try await inTransaction(begin: "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY", body)
    }

    /// Runs `body` between `begin` and `COMMIT` on a pooled connection of its own; rolls back
    /// when it throws.
    private func inTransaction<Result: Sendable>(
        begin: PostgresQuery, _ body: @escaping @Sendable (PostgresConnection) async throws -> Result
    ) async throws(StoreError) -> Result {
        let logger = self.logger
        return try await connection { connection in
            try await connection.query(begin, logger: logger)
            let result: Result
            do {
                result = try await body(connection)
            } catch {
                // A connection that was lost rolled back with its session (and a statement
                // sent on it may never be answered).
                if PostgresUnavailability.reason(error) == nil { _ = try? await connection.query("ROLLBACK", logger: logger) }
                throw error
            }
            try await connection.query("COMMIT", logger: logger)
            return result
        }
    }

    /// Runs `body` on a pooled connection outside a transaction (one statement, or reads that
    /// need no common snapshot).
    func connection<Result: Sendable>(
        _ body: @escaping @Sendable (PostgresConnection) async throws -> Result
    ) async throws(StoreError) -> Result {
        do {
            return try await client.withConnection(leaseTimeout: leaseTimeout, body)
        } catch {
            throw Self.storeError(error)
        }
    }

    func checkItemCount(_ count: Int) throws(StoreError) {
        guard count <= maxItemsPerOperation else {
            throw StoreError(.limitExceeded, "\(count) items in one request; at most \(maxItemsPerOperation) allowed")
        }
    }
}

/// Everything the server's operations run against: records, zones and their feeds, queries,
/// subscriptions, the user directory and tokens, shares and asset references.
extension PostgresStorage: RecordStorage {}
