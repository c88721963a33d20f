import CirrusModel
import Foundation
import NIOConcurrencyHelpers

/// Keeps a local store in sync with one database (CloudKit's `CKSyncEngine`): it fetches what
/// changed on the server and sends the app's pending changes, with the change tokens, batching,
/// retries and push handling a sync app would otherwise write by hand.
///
/// The app tells the engine what changed locally (`state.add(pendingRecordZoneChanges:)`),
/// hands it the records when it asks (`nextRecordZoneChangeBatch`), applies what it fetched
/// (`.fetchedRecordZoneChanges`), resolves conflicts (`.sentRecordZoneChanges`'
/// `failedRecordSaves`) and persists the state (`.stateUpdate`).
///
/// With `automaticallySync` (the default) the engine saves a `CKDatabaseSubscription` and
/// watches the container's notification stream: a push that the database changed starts a
/// fetch, and pending changes are sent soon after they are added (debounced, in batches of
/// at most 400). Failures that may pass are retried after the server's `retryAfterSeconds`
/// or a growing backoff. Every send is a long-lived operation whose ID is in the state
/// before it starts: a process killed mid-send resumes that operation on its next launch
/// and learns what the server applied, so it sends exactly what was not acknowledged.
///
/// Differences from Apple's: the state serialization is `Codable` (not `NSSecureCoding`);
/// the delegate must be `Sendable`; the account is the connection's user (a change of
/// certificate or token between launches is reported as `.switchAccounts`); a zone whose
/// token expired is reported as `.didFetchRecordZoneChanges` with `changeTokenExpired` before
/// it is fetched again from the start. The public database has no change feeds (fetches fail
/// with `invalidArguments`). Calling `fetchChanges` or `sendChanges` from inside a delegate
/// call waits forever: the engine runs one thing at a time.
///
/// For example:
/// ```swift
/// let configuration = CKSyncEngine.Configuration(
///     database: container.privateCloudDatabase, stateSerialization: savedState, delegate: store)
/// let syncEngine = CKSyncEngine(configuration)
/// syncEngine.state.add(pendingRecordZoneChanges: [.saveRecord(note.recordID)])
/// ```
public final class CKSyncEngine: Sendable, CustomStringConvertible {
    /// How a sync engine is set up (CloudKit's `CKSyncEngine.Configuration`).
    public struct Configuration: Sendable {
        /// The database to sync: the private one, or the shared one.
        public var database: CKDatabase
        /// The state from the last `.stateUpdate` event handled; nil the first time.
        public var stateSerialization: State.Serialization?
        /// Handles events and provides records. The engine holds it weakly.
        public var delegate: any CKSyncEngineDelegate
        /// Fetch on push and send pending changes by itself. Default: true.
        public var automaticallySync = true
        /// The database subscription to watch; nil = one the engine saves for itself.
        public var subscriptionID: CKSubscription.ID?

        /// A configuration syncing `database`, from `stateSerialization` (nil the first time).
        public init(database: CKDatabase, stateSerialization: State.Serialization?, delegate: any CKSyncEngineDelegate) {
            self.database = database
            self.stateSerialization = stateSerialization
            self.delegate = delegate
        }
    }

    /// The database the engine syncs.
    public let database: CKDatabase
    /// What the engine has yet to send and fetch.
    public let state: State
    let automaticallySync: Bool
    let subscriptionID: CKSubscription.ID
    /// The engine saves its subscription itself (none was named in the configuration).
    let ownsSubscription: Bool
    private let weakDelegate: NIOLockedValueBox<WeakDelegate>
    /// One fetch or send at a time.
    let gate = SyncGate()
    let running = NIOLockedValueBox(Running())

    private struct WeakDelegate {
        weak var value: (any CKSyncEngineDelegate)?
    }

    /// What runs now and what is requested (see CKSyncEngine+Scheduling.swift).
    struct Running {
        var operations: [ObjectIdentifier: CKOperation] = [:]
        var accountChecked = false
        var fetchRequested = false
        var sendRequested = false
        var loopRunning = false
        var stateUpdateScheduled = false
        var failures = 0
        /// A fetch failed in a way that may pass: a requested send goes first next time, so
        /// fetches that keep failing do not hold back the device's own changes.
        var sendFirst = false
        var watch: Task<Void, Never>?
    }

    /// A sync engine for `configuration`; with `automaticallySync`, it starts syncing at once.
    public init(_ configuration: Configuration) {
        self.database = configuration.database
        self.state = State(configuration.stateSerialization?.contents ?? State.Contents())
        self.automaticallySync = configuration.automaticallySync
        self.subscriptionID = configuration.subscriptionID ?? "CKSyncEngine-\(configuration.database.databaseScope)"
        self.ownsSubscription = configuration.subscriptionID == nil
        self.weakDelegate = NIOLockedValueBox(WeakDelegate(value: configuration.delegate))
        let automaticallySync = self.automaticallySync
        self.state.setOnChange { [weak self] added in
            self?.scheduleStateUpdate()
            if added && automaticallySync { self?.scheduleSend() }
        }
        if automaticallySync {
            self.startAutomaticSync()
        }
    }

    deinit {
        self.running.withLockedValue { $0.watch }?.cancel()
    }

    var delegate: (any CKSyncEngineDelegate)? { self.weakDelegate.withLockedValue { $0.value } }

    /// Fetches what changed on the server since the last fetch, and reports it to the delegate.
    /// Waits for a fetch or send under way to end first.
    ///
    /// - throws: `CKError` when the fetch failed part way (what was fetched before it is
    ///   reported and kept); `CancellationError`-like `operationCancelled` after
    ///   `cancelOperations()`.
    public func fetchChanges(_ options: FetchChangesOptions = FetchChangesOptions()) async throws {
        try await self.gate.run { try await self.fetch(options, reason: .manual) }
    }

    /// Sends the pending changes in `options.scope`, in batches the delegate provides, and
    /// reports each batch's outcome. Waits for a fetch or send under way to end first.
    ///
    /// - throws: `CKError` when a batch could not be sent at all (its changes stay pending).
    public func sendChanges(_ options: SendChangesOptions = SendChangesOptions()) async throws {
        try await self.gate.run { try await self.send(options, reason: .manual) }
    }

    /// Cancels the operations under way and the scheduled syncs, and waits until the engine
    /// is idle. Changes not acknowledged stay pending; automatic sync goes on with the next
    /// push or added change. Like `fetchChanges` and `sendChanges`, not from inside a delegate
    /// call (it would wait for that call to end).
    public func cancelOperations() async {
        let operations = self.running.withLockedValue { running -> [CKOperation] in
            running.fetchRequested = false
            running.sendRequested = false
            return Array(running.operations.values)
        }
        for operation in operations { operation.cancel() }
        await self.gate.run {}
    }

    public var description: String {
        "<CKSyncEngine \(self.database.databaseScope): \(self.state)>"
    }

    // MARK: - Helpers of the fetch and send

    func emit(_ event: Event) async {
        guard let delegate = self.delegate else { return }
        await delegate.handleEvent(event, syncEngine: self)
    }

    /// Hands the state to the delegate if it changed since it was last handed over.
    func emitStateUpdate() async {
        if let serialization = self.state.takeUpdate() {
            await self.emit(.stateUpdate(Event.StateUpdate(stateSerialization: serialization)))
        }
    }

    /// Runs `operation` on the database (cancelled by `cancelOperations()`), waiting for the
    /// result block `install` hands over. A `partialFailure` is not thrown.
    func run(
        _ operation: CKDatabaseOperation,
        install: (@escaping (Result<Void, any Error>) -> Void) -> Void
    ) async throws {
        let key = ObjectIdentifier(operation)
        self.running.withLockedValue { $0.operations[key] = operation }
        defer { _ = self.running.withLockedValue { $0.operations.removeValue(forKey: key) } }
        try await self.database.run(operation, install: install)
    }

    /// Learns the user the engine syncs for, once per engine: the first time, `.signIn`; a
    /// state of another user is reset and reported as `.switchAccounts`.
    func checkAccount() async throws {
        guard !self.running.withLockedValue({ $0.accountChecked }) else { return }
        let user = try await self.database.container.userRecordID()
        let previous = self.state.read { $0.userRecordName }
        self.running.withLockedValue { $0.accountChecked = true }
        if previous == user.recordName { return }
        if let previous {
            self.state.update { contents in
                contents = State.Contents()
                contents.userRecordName = user.recordName
            }
            await self.emit(.accountChange(.init(changeType: .switchAccounts(
                previousUser: CKRecord.ID(recordName: previous), currentUser: user))))
        } else {
            self.state.update { $0.userRecordName = user.recordName }
            await self.emit(.accountChange(.init(changeType: .signIn(currentUser: user))))
        }
        await self.emitStateUpdate()
    }
}

/// An async mutex: one fetch or send of an engine at a time, the others waiting in order.
actor SyncGate {
    private var busy = false
    private var waiters: [CheckedContinuation<Void, Never>] = []

    func run<T: Sendable>(_ body: @Sendable () async throws -> T) async throws -> T {
        await self.enter()
        do {
            let result = try await body()
            self.leave()
            return result
        } catch {
            self.leave()
            throw error
        }
    }

    func run(_ body: @Sendable () async -> Void) async {
        await self.enter()
        await body()
        self.leave()
    }

    private func enter() async {
        if self.busy {
            await withCheckedContinuation { self.waiters.append($0) }
        } else {
            self.busy = true
        }
    }

    private func leave() {
        if self.waiters.isEmpty {
            self.busy = false
        } else {
            self.waiters.removeFirst().resume()
        }
    }
}
