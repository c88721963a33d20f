import CirrusKit
import CirrusModel
import CirrusServer
import CirrusStore
import CirrusTestSupport
import CirrusWire
import Foundation
import NIOConcurrencyHelpers
import Testing

/// A real server with the SQLite storage in a temporary directory; `body` gets a factory of
/// containers (one per user) talking to it over TLS: CloudKit code against the whole stack,
/// configured as `cirrusd` configures it (long-lived operations included).
func withStack(
    _ body: (_ container: @escaping @Sendable (String) -> CKContainer) async throws -> Void
) async throws {
    try await withStack(clock: nil) { container, _ in try await body(container) }
}

/// Waits until `operation` finished (after the code under test added it itself).
func finished(_ operation: Operation) async {
    await waitUntilFinished(operation)
}

/// A wall clock the test moves by hand (seconds since the epoch).
final class ManualClock: Sendable {
    private let seconds: NIOLockedValueBox<Int64>

    init(start: Int64 = 1_800_000_000) {
        self.seconds = NIOLockedValueBox(start)
    }

    var clock: @Sendable () -> Wire.Timestamp {
        { [seconds] in Wire.Timestamp(seconds: seconds.withLockedValue { $0 }, nanos: 0) }
    }

    func advance(seconds delta: Int64) {
        self.seconds.withLockedValue { $0 += delta }
    }
}

/// What a test can reach behind the server of ``withStack(clock:tombstoneRetentionSeconds:_:)``.
struct StackInternals: Sendable {
    let storage: SQLiteStorage
    let longLived: LongLivedOperations
    /// The server's port (for a proxy in between).
    var port = 0
    /// Prunes tombstones older than the retention, by the stack's clock.
    let maintenance: StorageMaintenance
    /// The server's user directory (what `cirrusd users` changes is in `storage`).
    let users: UserDirectory
    /// The server's asset files.
    let assets: AssetStore
    /// The server, once started.
    var server: CirrusServer?
}

/// ``withStack(_:)`` with the storage on `clock` (the wall clock when nil), and its internals
/// handed to `body`.
func withStack(
    clock: ManualClock?,
    tombstoneRetentionSeconds: Int64 = 3600,
    assetLimits: AssetStore.Limits = AssetStore.Limits(),
    metrics: ServerMetrics? = nil,
    _ body: (_ container: @escaping @Sendable (String) -> CKContainer, _ internals: StackInternals) async throws -> Void
) async throws {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cirrus-e2e-\(UUID().uuidString)").path
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let now = clock?.clock ?? SQLiteStorage.systemClock
    let storage = try SQLiteStorage(directory: directory, clock: now)
    defer { try? storage.close() }
    let users = UserDirectory(storage: storage, clock: now)
    let assets = try AssetStore(
        directory: directory + "/assets", storage: storage, secret: Array("stack secret".utf8), limits: assetLimits,
        clock: now)
    let executor = StorageExecutor(storage: storage, users: users, assets: assets, metrics: metrics)
    let longLived = LongLivedOperations(journal: storage, executor: executor, clock: now)
    var internals = StackInternals(
        storage: storage,
        longLived: longLived,
        maintenance: StorageMaintenance(
            storage: storage, tombstoneRetentionSeconds: tombstoneRetentionSeconds, clock: now, assets: assets),
        users: executor.users,
        assets: assets)
    try await withServer(configure: {
        $0.executor = executor
        $0.longLivedOperations = longLived
        $0.users = executor.users
    }) { server, port in
        internals.port = port
        internals.server = server
        try await body(
            { user in
                CKContainer(identifier: "iCloud.com.example.notes", configuration: TestCertificates.client(port: port, user: user))
            }, internals)
    }
}
