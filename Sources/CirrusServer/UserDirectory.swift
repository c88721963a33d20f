import CirrusStore
import CirrusWire
import Logging
import Synchronization

/// The server's view of the user directory (``UserStorage``, ``TokenStorage``): registers each
/// authenticated user (and the email addresses their certificate vouches for) once per
/// process, knows who is disabled and which bearer tokens are valid without a storage read
/// per connection, and notices when an administrator changes either from outside the process
/// (`cirrusd users disable`, `cirrusd tokens issue|revoke`, against the same data directory).
///
/// For example:
/// ```swift
/// let users = UserDirectory(storage: storage)
/// try await users.load()
/// configuration.users = users
/// Task { await users.watch(every: .seconds(2), server: server) }
/// ```
public final class UserDirectory: Sendable {
    let storage: any UserStorage & TokenStorage
    let clock: @Sendable () -> Wire.Timestamp
    let logger: Logger
    /// Seconds a token of `CKFetchWebAuthTokenOperation` is valid.
    public let webAuthTokenLifetime: Int64
    private let state = Mutex(State())

    private struct State {
        var disabled: Set<String> = []
        /// Valid bearer tokens by ID (as of the last read, plus those issued here since).
        var tokens: [String: StoredToken] = [:]
        /// (container, user) pairs whose `Users` record this process knows exists.
        var usersRecords: Set<[String]> = []
        /// Users registered by this process, with the emails they were registered with.
        var registered: [String: [String]] = [:]
        var isShuttingDown = false
    }

    /// Users registered at most at once in memory; beyond it the cache starts over (it only
    /// saves writes).
    static let maximumRemembered = 100_000

    /// Web auth tokens valid at once per user; one more is refused until some expire or are
    /// revoked.
    public static let maximumWebAuthTokensPerUser = 100

    /// The label of the tokens `CKFetchWebAuthTokenOperation` issues.
    static let webAuthTokenLabel = "web auth token"

    /// One hour, unless configured otherwise.
    public static let defaultWebAuthTokenLifetime: Int64 = 3600

    public init(
        storage: any UserStorage & TokenStorage,
        clock: @escaping @Sendable () -> Wire.Timestamp = SQLiteStorage.systemClock,
        webAuthTokenLifetime: Int64 = UserDirectory.defaultWebAuthTokenLifetime,
        logger: Logger = Logger(label: "cirrusd.users")
    ) {
        self.storage = storage
        self.clock = clock
        self.webAuthTokenLifetime = webAuthTokenLifetime
        self.logger = logger
    }

    /// Reads who is disabled and which tokens are valid; call before serving.
    ///
    /// - throws: ``StoreError``.
    public func load() async throws {
        try await refresh()
    }

    /// Whether an administrator disabled `user` (as of the last ``load()`` or ``refresh()``,
    /// or a change made through this directory).
    public func isDisabled(_ user: String) -> Bool {
        state.withLock { $0.disabled.contains(user) }
    }

    /// What changed since the last read: connections of these users and tokens must close.
    public struct Revocations: Sendable, Hashable {
        /// Users disabled since.
        public var disabledUsers: Set<String> = []
        /// Tokens revoked or expired since.
        public var tokenIDs: Set<String> = []
    }

    /// Reads who is disabled and which tokens are valid again; returns what was taken away
    /// since the last read.
    ///
    /// - throws: ``StoreError``.
    @discardableResult
    public func refresh() async throws -> Revocations {
        let disabled = try await storage.disabledUsers()
        let active = try await storage.activeTokens(at: clock())
        return state.withLock { state in
            var revocations = Revocations()
            revocations.disabledUsers = disabled.subtracting(state.disabled)
            let fresh = Dictionary(active.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
            revocations.tokenIDs = Set(state.tokens.keys).subtracting(fresh.keys)
            state.disabled = disabled
            state.tokens = fresh
            return revocations
        }
    }

    /// How long a token that expired or was revoked stays listed (`cirrusd tokens list`)
    /// before ``watch(every:server:)`` deletes it: 7 days.
    public static let endedTokenRetentionSeconds: Int64 = 7 * 86_400

    /// Every `interval`, reads the directory again and closes the connections of users
    /// disabled and of tokens revoked or expired since; until the task is cancelled. Once an
    /// hour it also deletes tokens that ended more than ``endedTokenRetentionSeconds`` ago.
    public func watch(every interval: Duration, server: CirrusServer) async {
        var lastPrune: Int64 = 0
        while !Task.isCancelled {
            do {
                try await Task.sleep(for: interval)
                let now = clock()
                if now.seconds - lastPrune >= 3600 {
                    lastPrune = now.seconds
                    let cutoff = Wire.Timestamp(seconds: now.seconds - Self.endedTokenRetentionSeconds, nanos: 0)
                    let pruned = try await storage.pruneTokens(endedBefore: cutoff)
                    if pruned > 0 { logger.info("deleted \(pruned) tokens that ended before \(cutoff.seconds)") }
                }
                let revocations = try await refresh()
                for user in revocations.disabledUsers {
                    logger.notice("user \(user) was disabled: closing their connections")
                    server.closeConnections(of: user)
                }
                for id in revocations.tokenIDs {
                    logger.notice("token \(id) was revoked or expired: closing the connections that use it")
                    server.closeConnections(usingToken: id)
                }
            } catch is CancellationError {
                return
            } catch {
                logger.error("could not read the user directory: \(error)")
            }
        }
    }

    /// The identity a directory bearer token authenticates, or nil when it is not one, or
    /// revoked, expired or unknown (all alike).
    func authenticate(bearerToken token: String) -> ClientIdentity? {
        guard let id = BearerToken.id(of: token) else { return nil }
        let stored = state.withLock { $0.tokens[id] }
        guard let stored, BearerToken.matches(token, hash: stored.hash) else { return nil }
        if let expiry = stored.expiresAt, !Self.isBefore(clock(), expiry) { return nil }
        var identity = ClientIdentity(userRecordName: stored.user)
        identity.tokenID = id
        return identity
    }

    /// Issues a token for `user`, valid for `lifetime` seconds (nil: until revoked), usable at
    /// once on this server.
    ///
    /// - throws: ``StoreError``.
    public func issueToken(for user: String, label: String, lifetime: Int64?) async throws -> (BearerToken, StoredToken) {
        let issued = BearerToken.generate()
        let now = clock()
        let stored = StoredToken(
            id: issued.id, hash: issued.hash, user: user, label: label, createdAt: now,
            expiresAt: lifetime.map { Wire.Timestamp(seconds: now.seconds + $0, nanos: now.nanos) })
        try await storage.saveToken(stored)
        state.withLock { $0.tokens[stored.id] = stored }
        return (issued, stored)
    }

    /// The web auth tokens of `user` valid now.
    func webAuthTokenCount(of user: String) -> Int {
        let now = clock()
        return state.withLock { state in
            state.tokens.values.count { token in
                token.user == user && token.label.hasPrefix(Self.webAuthTokenLabel)
                    && token.expiresAt.map { Self.isBefore(now, $0) } ?? true
            }
        }
    }

    static func isBefore(_ a: Wire.Timestamp, _ b: Wire.Timestamp) -> Bool {
        (a.seconds, a.nanos) < (b.seconds, b.nanos)
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

    /// Whether this process knows `user`'s `Users` record exists in `container`.
    func hasUsersRecord(_ user: String, in container: String) -> Bool {
        state.withLock { $0.usersRecords.contains([container, user]) }
    }

    func rememberUsersRecord(_ user: String, in container: String) {
        state.withLock { state in
            if state.usersRecords.count >= Self.maximumRemembered { state.usersRecords = [] }
            state.usersRecords.insert([container, user])
        }
    }

    /// Whether the server is shutting down (accounts read `temporarilyUnavailable`).
    public var isShuttingDown: Bool { state.withLock { $0.isShuttingDown } }

    /// Called by the server as it starts a graceful shutdown.
    func beginShutdown() {
        state.withLock { $0.isShuttingDown = true }
    }
}
