import CirrusStore
import CirrusWire
import Logging

/// Housekeeping of a ``RecordStorage`` a server runs in the background: drops record and zone
/// tombstones older than the retention period (change tokens that still need them then get
/// `changeTokenExpired`), query cursor snapshots past their lifetime, long-lived operations
/// completed longer ago than their retention (with their journals, when the storage is an
/// ``OperationJournal``), notifications older than theirs (notification change tokens that
/// still need them then get `changeTokenExpired`), and asset contents no record refers to any
/// more.
///
/// For example:
/// ```swift
/// let maintenance = StorageMaintenance(storage: storage, tombstoneRetentionSeconds: 30 * 86_400)
/// let task = Task { await maintenance.run(every: .seconds(3600)) }
/// ```
public struct StorageMaintenance: Sendable {
    /// Tombstones are kept 30 days unless configured otherwise.
    public static let defaultTombstoneRetentionSeconds: Int64 = 30 * 86_400

    /// Query cursors are kept an hour unless configured otherwise.
    public static let defaultQueryCursorLifetimeSeconds: Int64 = 3600

    /// Notifications are kept 7 days unless configured otherwise.
    public static let defaultNotificationRetentionSeconds: Int64 = 7 * 86_400

    let storage: any RecordStorage
    let tombstoneRetentionSeconds: Int64
    let queryCursorLifetimeSeconds: Int64
    let longLivedRetentionSeconds: Int64
    let notificationRetentionSeconds: Int64
    let clock: @Sendable () -> Wire.Timestamp
    /// Expired uploads and content files nothing refers to are collected from it.
    let assets: AssetStore?
    let logger: Logger
    /// Counts the passes and how long they took.
    let metrics: ServerMetrics?

    /// - parameter clock: the current time; the wall clock unless a test injects one.
    public init(
        storage: any RecordStorage,
        tombstoneRetentionSeconds: Int64 = Self.defaultTombstoneRetentionSeconds,
        queryCursorLifetimeSeconds: Int64 = Self.defaultQueryCursorLifetimeSeconds,
        longLivedRetentionSeconds: Int64 = LongLivedOperations.defaultRetentionSeconds,
        notificationRetentionSeconds: Int64 = Self.defaultNotificationRetentionSeconds,
        clock: @escaping @Sendable () -> Wire.Timestamp = SQLiteStorage.systemClock,
        assets: AssetStore? = nil,
        logger: Logger = Logger(label: "cirrusd.maintenance"),
        metrics: ServerMetrics? = nil
    ) {
        self.metrics = metrics
        self.storage = storage
        self.tombstoneRetentionSeconds = tombstoneRetentionSeconds
        self.queryCursorLifetimeSeconds = queryCursorLifetimeSeconds
        self.longLivedRetentionSeconds = longLivedRetentionSeconds
        self.notificationRetentionSeconds = notificationRetentionSeconds
        self.clock = clock
        self.assets = assets
        self.logger = logger
    }

    /// One pass: prunes what is past retention.
    ///
    /// - returns: how many asset contents were dropped (rows kept in the storage and files of
    ///   the asset store).
    /// - throws: the storage's error.
    @discardableResult
    public func runOnce() async throws -> Int {
        let now = self.clock()
        let cutoff = Wire.Timestamp(seconds: now.seconds - self.tombstoneRetentionSeconds, nanos: now.nanos)
        try await self.storage.pruneTombstones(deletedBefore: cutoff)
        try await self.storage.pruneQueryCursors(
            createdBefore: Wire.Timestamp(seconds: now.seconds - self.queryCursorLifetimeSeconds, nanos: now.nanos))
        if let journal = self.storage as? any OperationJournal {
            try await journal.pruneLongLivedOperations(
                completedBefore: Wire.Timestamp(seconds: now.seconds - self.longLivedRetentionSeconds, nanos: now.nanos))
        }
        try await self.storage.pruneNotifications(
            createdBefore: Wire.Timestamp(seconds: now.seconds - self.notificationRetentionSeconds, nanos: now.nanos))
        let rows = try await self.storage.pruneUnreferencedAssets()
        let files = try await self.assets?.collect().contents ?? 0
        return rows + files
    }

    /// Passes every `interval` until the task is cancelled; a failed pass is logged and the
    /// next one tries again.
    public func run(every interval: Duration) async {
        while !Task.isCancelled {
            let started = ContinuousClock.now
            do {
                let assets = try await self.runOnce()
                self.metrics?.maintenancePass(failed: false, duration: .now - started)
                self.logger.debug("maintenance pass done", metadata: ["assetsDropped": "\(assets)"])
            } catch {
                self.metrics?.maintenancePass(failed: true, duration: .now - started)
                self.logger.error("maintenance pass failed: \(error)")
            }
            do {
                try await Task.sleep(for: interval)
            } catch {
                return
            }
        }
    }
}
