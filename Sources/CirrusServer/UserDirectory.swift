import CirrusStore
import CirrusWire
import Logging
import Synchronization

/// The server's view of the user directory (``UserStorage``): registers each authenticated
/// user (and the email addresses their certificate vouches for) once per process, knows who is
/// disabled without a storage read per connection, and notices when an administrator changes
/// that from outside the process (`cirrusd users disable`, against the same data directory).
///
/// For example:
/// ```swift
/// let users = UserDirectory(storage: storage)
/// try await users.load()
/// configuration.users = users
/// Task { await users.watch(every: .seconds(2)) { user in server.closeConnections(of: user) } }
/// ```
public final class UserDirectory: Sendable {
    let storage: any UserStorage
    let clock: @Sendable () -> Wire.Timestamp
    let logger: Logger
    private let state = Mutex(State())

    private struct State {
        var disabled: Set<String> = []
        /// Users registered by this process, with the emails they were registered with.
        var registered: [String: [String]] = [:]
        var isShuttingDown = false
    }

    /// Users registered at most at once in memory; beyond it the cache starts over (it only
    /// saves writes).
    static let maximumRemembered = 100_000

    public init(
        storage: any UserStorage,
        clock: @escaping @Sendable () -> Wire.Timestamp = SQLiteStorage.systemClock,
        logger: Logger = Logger(label: "cirrusd.users")
    ) {
        self.storage = storage
        self.clock = clock
        self.logger = logger
    }

    /// Reads who is disabled; call before serving.
    ///
    /// - throws: ``StoreError``.
    public func load() async throws {
        let disabled = try await storage.disabledUsers()
        state.withLock { $0.disabled = disabled }
    }

    /// Whether an administrator disabled `user` (as of the last ``load()`` or ``refresh()``,
    /// or a change made through this directory).
    public func isDisabled(_ user: String) -> Bool {
        state.withLock { $0.disabled.contains(user) }
    }

    /// Reads who is disabled again; returns the users disabled since the last read.
    ///
    /// - throws: ``StoreError``.
    @discardableResult
    public func refresh() async throws -> Set<String> {
        let disabled = try await storage.disabledUsers()
        return state.withLock { state in
            let added = disabled.subtracting(state.disabled)
            state.disabled = disabled
            return added
        }
    }

    /// Every `interval`, reads who is disabled and calls `closeConnections` for each user
    /// disabled since; until the task is cancelled.
    public func watch(every interval: Duration, closeConnections: @escaping @Sendable (String) -> Void) async {
        while !Task.isCancelled {
            do {
                try await Task.sleep(for: interval)
                for user in try await refresh() {
                    logger.notice("user \(user) was disabled: closing their connections")
                    closeConnections(user)
                }
            } catch is CancellationError {
                return
            } catch {
                logger.error("could not read the user directory: \(error)")
            }
        }
    }

    /// Makes sure `identity` is in the directory, with the email addresses its certificate
    /// vouches for; a storage write only the first time this process sees it (or its emails).
    ///
    /// - throws: ``StoreError``.
    public func register(_ identity: ClientIdentity) async throws {
        let known = state.withLock { $0.registered[identity.userRecordName] }
        guard known != identity.verifiedEmails else { return }
        try await storage.registerUser(identity.userRecordName, verifiedEmails: identity.verifiedEmails, at: clock())
        state.withLock { state in
            if state.registered.count >= Self.maximumRemembered { state.registered = [:] }
            state.registered[identity.userRecordName] = identity.verifiedEmails
        }
    }

    /// ``register(_:)`` on a task of its own, logging a failure (for a connection that just
    /// authenticated: its user needs no directory row to work).
    func registerInBackground(_ identity: ClientIdentity) {
        let known = state.withLock { $0.registered[identity.userRecordName] }
        guard known != identity.verifiedEmails else { return }
        Task {
            do {
                try await self.register(identity)
            } catch {
                self.logger.error("could not register user \(identity.userRecordName): \(error)")
            }
        }
    }

    /// Whether the server is shutting down (accounts read `temporarilyUnavailable`).
    public var isShuttingDown: Bool { state.withLock { $0.isShuttingDown } }

    /// Called by the server as it starts a graceful shutdown.
    func beginShutdown() {
        state.withLock { $0.isShuttingDown = true }
    }
}
