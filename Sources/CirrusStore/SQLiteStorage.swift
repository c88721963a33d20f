public import CirrusWire
import Foundation
import GRDB
import Synchronization

/// The embedded storage engine, and the default one: one SQLite file in WAL
/// mode with `synchronous = FULL`, so a call returns only after its commit is
/// durable. It implements ``RecordStorage`` (and ``OperationJournal``) and is
/// held to the storage conformance suite in `Tests/CirrusStoreTests`.
///
/// All database work runs on GRDB's own dispatch queues (one writer, several
/// readers), never on the caller's thread.
///
/// For example:
/// ```swift
/// let storage = try SQLiteStorage(directory: "./cirrus-data")
/// let zones = try await storage.fetchAllZones(in: .private(container: "c", user: "_alice"))
/// ```
public final class SQLiteStorage: RecordStorage, SubscriptionStorage {
    /// The file inside the directory holding every database of every container.
    public static let fileName = "cirrus.sqlite"
    /// CloudKit's per-operation item limit.
    public static let defaultMaxItemsPerOperation = 400

    /// The directory the storage lives in.
    public let directory: String
    /// Requests with more items fail with `limitExceeded` and write nothing.
    public let maxItemsPerOperation: Int
    /// Seconds a query cursor stays valid after the query's first page.
    public let queryCursorLifetime: Double

    let pool: DatabasePool
    /// One slot per reader of `pool`; every read of the pool holds one (see ``ReaderSlots``).
    let readers: ReaderSlots
    /// Connections of the storage's own for reads in place (see ``InPlaceReaders``).
    let inPlaceReaders: InPlaceReaders
    let writer: WriteCoalescer
    let checkpointer: WALCheckpointer
    /// The key query cursors are sealed with (`store_secrets`, schema v6).
    let querySecret: [UInt8]
    /// The zones whose writes keep record versions for live query cursors.
    let queryCursorZones: QueryCursorZones
    let clock: @Sendable () -> Wire.Timestamp
    /// Compiled subscriptions per database, for the writes that fire them.
    let subscriptionCache = SubscriptionCache()
    /// Told of the notifications each commit added to a feed (see `observeNotifications`).
    let notificationObservers = Mutex<[@Sendable (NotificationFeedKey, [StoredNotification]) -> Void]>([])
    /// Told of every write transaction (see `observeCommits`). A reference, so the write
    /// queue's closure can hold it before `self` is initialized.
    let commitObservers = CommitObservers()
    /// Reads the generation every change of a share moves (``sharesGeneration``).
    let shareGeneration: ShareGeneration
    /// When the asset file store last committed each content (``noteAssetsCommitted(_:at:)``),
    /// in seconds since 1970. In memory: one process holds a SQLite data directory, and so its
    /// asset directory; a content committed before a restart is kept by its upload's marker,
    /// or was never named by a save.
    let assetCommits = Mutex<[[UInt8]: Double]>([:])
    /// Told of what each commit did to a long-lived operation (see `observeLongLivedOperations`).
    let longLivedObservers = Mutex<[@Sendable (LongLivedOperationSignal) -> Void]>([])

    /// Opens (creating if needed) the storage in `directory` and migrates it.
    ///
    /// - parameter clock: the source of creation/modification dates and of
    ///   query cursor ages; the wall clock unless a test injects one.
    /// - parameter queryCursorLifetime: seconds a query cursor stays valid.
    /// - parameter walLimitBytes: how large the write-ahead log may grow before
    ///   the writer copies the rest of it into the database file so that it
    ///   starts over (see ``WALCheckpointer``), and the size it is cut back to then.
    /// - throws: ``StoreError`` `.storageFailure` when the directory or file
    ///   cannot be created or opened.
    public init(
        directory: String,
        maxItemsPerOperation: Int = SQLiteStorage.defaultMaxItemsPerOperation,
        queryCursorLifetime: Double = SQLiteStorage.defaultQueryCursorLifetime,
        walLimitBytes: Int = SQLiteStorage.defaultWALLimitBytes,
        clock: @escaping @Sendable () -> Wire.Timestamp = SQLiteStorage.systemClock
    ) throws {
        self.directory = directory
        self.maxItemsPerOperation = maxItemsPerOperation
        self.queryCursorLifetime = queryCursorLifetime
        self.clock = clock
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            var configuration = Configuration()
            configuration.label = "CirrusStore"
            configuration.foreignKeysEnabled = true
            configuration.busyMode = .timeout(10)
            let zones = QueryCursorZones(clock: clock)
            queryCursorZones = zones
            let liveFunction = zones.sqlFunction
            configuration.prepareDatabase { db in
                db.add(function: QueryGeometry.sqlFunction)
                db.add(function: liveFunction)
                // Sorts, statement journals and (on the rare fallback) savepoint
                // sub-journals stay in memory instead of spilling to temp files.
                try db.execute(sql: "PRAGMA temp_store = MEMORY")
                // Reads of the database file come straight from a shared memory
                // map instead of a pread and a page copy each (256 MiB of
                // address space per connection, not memory).
                try db.execute(sql: "PRAGMA mmap_size = \(Self.memoryMapBytes)")
            }
            let path = (directory as NSString).appendingPathComponent(Self.fileName)
            // Cursors sealed before a restart may be continued for one lifetime:
            // until then, every zone keeps pre-images.
            if FileManager.default.fileExists(atPath: path) {
                zones.keepEveryZone(until: zones.now + queryCursorLifetime)
            }
            // Before the first connection opens: each connection keeps the VFS it opened with.
            WALWriteGathering.install()
            pool = try DatabasePool(path: path, configuration: configuration)
            readers = ReaderSlots(count: configuration.maximumReaderCount)
            inPlaceReaders = InPlaceReaders(
                path: path, configuration: configuration, limit: configuration.maximumReaderCount)
            // GRDB puts a pool in WAL mode with synchronous = NORMAL after
            // `prepareDatabase` ran; only the writer commits, so set it there.
            try pool.writeWithoutTransaction { db in
                try db.execute(sql: Self.writerSettings)
                try db.execute(sql: "PRAGMA journal_size_limit = \(walLimitBytes)")
            }
            try Self.migrator.migrate(pool)
            shareGeneration = try ShareGeneration(path: path)
            querySecret = try pool.read { db in
                try Data.fetchOne(db, sql: "SELECT value FROM store_secrets WHERE name = 'query-cursor'").map { [UInt8]($0) }
            } ?? []
            guard !querySecret.isEmpty else { throw StoreError(.corruptData, "the store has no query cursor secret") }
            let checkpointer = try WALCheckpointer(path: path, logLimitBytes: walLimitBytes)
            self.checkpointer = checkpointer
            pool.writeWithoutTransaction { db in checkpointer.watch(db) }
            let observers = commitObservers
            writer = WriteCoalescer(
                writer: pool,
                afterCommit: { commit in
                    checkpointer.committed()
                    for observer in observers.withLock({ $0 }) { observer(commit) }
                },
                betweenTransactions: { db in
                    // The log outgrew the background checkpoints: copy the rest now, while
                    // nothing is appended, so the next transaction starts it over. Busy (the
                    // background checkpoint is running): tried again after the next commit.
                    if checkpointer.writerShouldCheckpoint { _ = try? db.checkpoint(.passive) }
                })
        } catch {
            throw StoreError.wrapping(error)
        }
    }

    /// Calls `observer` after every write transaction, on the writer queue, with how many
    /// requests shared it and how long it took; it must return quickly (count, not work).
    ///
    /// For example:
    /// ```swift
    /// storage.observeCommits { commit in metrics.recordCommit(jobs: commit.jobs, records: commit.items, nanoseconds: …) }
    /// ```
    public func observeCommits(_ observer: @escaping @Sendable (WriteCommit) -> Void) {
        commitObservers.withLock { $0.append(observer) }
    }

    /// Closes the database; later calls fail with `.storageFailure`.
    ///
    /// - throws: ``StoreError`` when SQLite refuses to close.
    public func close() throws {
        do {
            try checkpointer.close()
            try inPlaceReaders.close()
            try shareGeneration.close()
            try pool.close()
        } catch {
            throw StoreError.wrapping(error)
        }
    }

    /// The write-ahead log's size limit (`walLimitBytes`) unless a caller sets another.
    public static let defaultWALLimitBytes = 64 << 20

    /// How much of the database file each connection reads through a memory map.
    static let memoryMapBytes = 256 << 20

    /// The writer connection's settings.
    ///
    /// - `synchronous = FULL`: a commit returns once its log frames are synced.
    /// - `cache_size`: 64 MiB of pages, so a transaction of many records (and
    ///   the index pages it touches) does not evict its own pages.
    /// - `wal_autocheckpoint = 0`: the ``WALCheckpointer`` copies the log into
    ///   the database file on its own connection, not the committing writer.
    /// - `journal_size_limit` (set after these, from `walLimitBytes`): the log file
    ///   is cut back to that size when it restarts.
    /// - `secure_delete = FAST`: Debian builds SQLite with secure delete on,
    ///   which writes zeros over every freed page; FAST still zeroes deleted
    ///   content inside the pages a write touches anyway, without extra page writes.
    static let writerSettings = """
        PRAGMA synchronous = FULL;
        PRAGMA cache_size = -65536;
        PRAGMA wal_autocheckpoint = 0;
        PRAGMA secure_delete = FAST;
        """

    /// A storage in a new, uniquely named directory under the system temporary
    /// directory, for tests; ``destroy()`` removes it.
    ///
    /// For example:
    /// ```swift
    /// let storage = try SQLiteStorage.temporary()
    /// defer { try? storage.destroy() }
    /// ```
    ///
    /// - throws: ``StoreError`` `.storageFailure`.
    public static func temporary(
        clock: @escaping @Sendable () -> Wire.Timestamp = SQLiteStorage.systemClock
    ) throws -> SQLiteStorage {
        let directory = (NSTemporaryDirectory() as NSString).appendingPathComponent("cirrus-store-\(UUID().uuidString)")
        return try SQLiteStorage(directory: directory, clock: clock)
    }

    /// Closes the storage and deletes its directory with everything in it.
    ///
    /// - throws: ``StoreError`` `.storageFailure`.
    public func destroy() throws {
        try close()
        do { try FileManager.default.removeItem(atPath: directory) } catch { throw StoreError.wrapping(error) }
    }

    /// The current time as a protocol timestamp.
    public static let systemClock: @Sendable () -> Wire.Timestamp = {
        let now = Date().timeIntervalSince1970
        let seconds = now.rounded(.down)
        return Wire.Timestamp(seconds: Int64(seconds), nanos: Int32((now - seconds) * 1_000_000_000))
    }

    /// Runs `body` on GRDB's writer queue in a transaction it may share with
    /// concurrent writes (group commit); returns after the commit. An error
    /// thrown by `body` undoes only its writes; `body` may run twice, so it
    /// does database work only.
    ///
    /// - parameter weight: about how many rows `body` writes (request items).
    /// - parameter sharesCache: `body` reads databases, zones and change sequences
    ///   through ``WriteCoalescer/transactionCache`` (record writes); see ``WriteTransactionCache``.
    func write<T: Sendable>(
        weight: Int, sharesCache: Bool = false, _ body: @escaping @Sendable (Database) throws -> T
    ) async throws -> T {
        do { return try await writer.write(weight: weight, sharesCache: sharesCache, body) } catch {
            throw StoreError.wrapping(error)
        }
    }

    /// Runs `body` as ``write(weight:sharesCache:_:)`` does, and tells the notification
    /// observers what it notified (``announceNotifications(in:_:)``) on the writer as soon as
    /// its transaction committed: a watch on another connection hears of a save without
    /// waiting for the saving task to be scheduled again.
    func writeNotifying<T: Sendable>(
        weight: Int, sharesCache: Bool = false, in container: String,
        _ body: @escaping @Sendable (Database) throws -> Notified<T>
    ) async throws -> T {
        do {
            return try await writer.write(
                weight: weight, sharesCache: sharesCache,
                committed: { [weak self] notified in self?.announceNotifications(in: container, notified.notifications) },
                body
            ).value
        } catch {
            throw StoreError.wrapping(error)
        }
    }

    /// Runs `body` on a snapshot on one of GRDB's reader queues.
    func read<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        await readers.take()
        defer { readers.giveBack() }
        do { return try await pool.read(body) } catch { throw StoreError.wrapping(error) }
    }

    /// The most rows a read may look up by key to run in place (``readInPlaceIfFree(_:)``).
    static let inPlaceReadLimit = 16

    /// Runs `body` on a snapshot on the calling thread when one of the storage's own readers
    /// is free now (``InPlaceReaders``); on a reader's queue as ``read(_:)`` does otherwise. A
    /// read of a few rows by key takes tens of microseconds, less than the two thread wake-ups
    /// of ``read(_:)`` (onto a reader's queue and back onto the task's executor). For bounded
    /// reads only (at most ``inPlaceReadLimit`` lookups): it holds the calling thread, a
    /// cooperative one, while it runs, and never waits for a reader there. Never on a thread
    /// that must not block on storage (``ReadPlacement/mayReadInPlace`` false): such reads go
    /// to a reader's queue.
    func readInPlaceIfFree<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        if ReadPlacement.mayReadInPlace {
            let read: T?
            do { read = try inPlaceReaders.readIfFree(body) } catch { throw StoreError.wrapping(error) }
            if let read { return read }
        }
        return try await self.read(body)
    }

    func checkItemCount(_ count: Int) throws(StoreError) {
        guard count <= maxItemsPerOperation else {
            throw StoreError(.limitExceeded, "\(count) items in one request; at most \(maxItemsPerOperation) allowed")
        }
    }
}

/// The observers of ``SQLiteStorage/observeCommits(_:)`` (and of the PostgreSQL engine's).
package final class CommitObservers: Sendable {
    private let observers = Mutex<[@Sendable (WriteCommit) -> Void]>([])

    package init() {}

    package func withLock<R>(_ body: (inout [@Sendable (WriteCommit) -> Void]) -> R) -> R {
        observers.withLock { body(&$0) }
    }
}
