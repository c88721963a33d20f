import CirrusStore
import Logging
import NIOCore
import PostgresNIO
import Synchronization

/// The one connection of a ``PostgresStorage`` that `LISTEN`s for the notifications every node
/// commits (``PostgresNotificationWriter/channel``), so this node's observers hear of them too.
///
/// A `NOTIFY` names a feed and its new head; the listener reads the feed after the position
/// this node announced (``NotificationPositions``) and announces what it finds: the feed table
/// is the source of truth, a `NOTIFY` only says where to look. When the connection drops, the
/// listener connects again, `LISTEN`s, then reads every feed this node knows whose head moved
/// meanwhile: a `NOTIFY` lost with the connection only delays its notifications.
///
/// Feeds are read by a second task, so a burst of `NOTIFY`s of one feed is one read.
final class PostgresNotificationListener: Sendable {
    /// Feeds of known positions read per statement when the listener catches up.
    static let catchUpBatch = 1_000
    /// Notifications read per statement.
    static let readBatch = 500

    private struct State {
        /// Feeds to read, after which sequence.
        var pending: [NotificationFeedKey: Int64] = [:]
        /// The server process of the listening connection, while it listens.
        var backendPID: Int32?
        /// How many times a connection started listening.
        var listens = 0
    }

    private let configuration: PostgresConnection.Configuration
    private let client: PostgresClient
    /// How long a read waits for a pooled connection (``PostgresClient/withConnection(leaseTimeout:_:)``).
    private let leaseTimeout: Duration
    private let announcer: NotificationAnnouncer
    /// Told of the long-lived operation signals every node sends.
    private let signals: PostgresLongLivedSignals
    private let logger: Logger
    private let state = Mutex(State())
    private let wake: AsyncStream<Void>.Continuation
    private let wakes: AsyncStream<Void>

    init(
        configuration: PostgresConnection.Configuration, client: PostgresClient, leaseTimeout: Duration,
        announcer: NotificationAnnouncer, signals: PostgresLongLivedSignals, logger: Logger
    ) {
        self.configuration = configuration
        self.client = client
        self.leaseTimeout = leaseTimeout
        self.announcer = announcer
        self.signals = signals
        self.logger = logger
        (wakes, wake) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
    }

    /// The server process of the listening connection (nil while it reconnects).
    var backendPID: Int32? { state.withLock { $0.backendPID } }

    /// How many times a connection started listening (1 once the first did).
    var listens: Int { state.withLock { $0.listens } }

    /// Listens, and reads what it hears, until cancelled; `started` is called once the first
    /// connection listens, or its attempt failed.
    func run(started: @escaping @Sendable () -> Void) async {
        await withDiscardingTaskGroup { group in
            group.addTask { await self.listen(started: started) }
            group.addTask { await self.readPending() }
        }
    }

    // MARK: - Listening

    private func listen(started: @escaping @Sendable () -> Void) async {
        var delay = Duration.milliseconds(50)
        var first = true
        while !Task.isCancelled {
            do {
                let connection = try await PostgresConnection.connect(
                    on: PostgresClient.defaultEventLoopGroup.any(), configuration: configuration, id: 0, logger: logger)
                do {
                    try await listen(on: connection) {
                        if first { started() }
                        first = false
                        delay = .milliseconds(50)
                    }
                } catch {
                    if !Task.isCancelled {
                        logger.warning("PostgreSQL notification listener lost its connection", metadata: ["error": "\(error)"])
                    }
                }
                state.withLock { $0.backendPID = nil }
                try? await connection.close()
            } catch {
                logger.warning("PostgreSQL notification listener cannot connect", metadata: ["error": "\(error)"])
            }
            if first {
                started()
                first = false
            }
            guard !Task.isCancelled else { return }
            try? await Task.sleep(for: delay)
            delay = min(delay * 2, .seconds(2))
        }
    }

    /// Listens on `connection` until it drops (or the task is cancelled); `listening` is
    /// called once the `LISTEN`s took effect. It listens on two channels: the notification
    /// feeds' (``PostgresNotificationWriter/channel``) and the long-lived operations'
    /// (``PostgresLongLivedSignals/channel``), whose signals go straight to their observers.
    private func listen(on connection: PostgresConnection, listening: () -> Void) async throws {
        let rows = try await connection.query("SELECT pg_backend_pid()", logger: logger)
        var pid: Int32?
        for try await value in rows.decode(Int32.self) { pid = value }
        try await connection.listen(on: PostgresLongLivedSignals.channel) { longLived in
            try await connection.listen(on: PostgresNotificationWriter.channel) { notifications in
                state.withLock { state in
                    state.backendPID = pid
                    state.listens += 1
                }
                listening()
                try await withThrowingDiscardingTaskGroup { group in
                    let signals = self.signals
                    let logger = self.logger
                    group.addTask {
                        for try await notification in longLived where !signals.heard(notification.payload) {
                            logger.debug(
                                "PostgreSQL long-lived signal not understood", metadata: ["payload": "\(notification.payload)"])
                        }
                    }
                    // What was committed while no connection listened.
                    try await catchUp()
                    for try await notification in notifications {
                        guard let announcement = NotificationAnnouncement(payload: notification.payload) else {
                            logger.debug("PostgreSQL notification not understood", metadata: ["payload": "\(notification.payload)"])
                            continue
                        }
                        if let start = announcer.readStart(for: announcement) { enqueue(announcement.feed, after: start) }
                    }
                    // The connection ended: so does the other channel's sequence, but do not wait on it.
                    group.cancelAll()
                }
            }
        }
    }

    /// Queues a read of every feed this node knows whose head moved past what it announced.
    private func catchUp() async throws {
        let feeds = announcer.knownFeeds
        guard !feeds.isEmpty else { return }
        let logger = self.logger
        for start in stride(from: 0, to: feeds.count, by: Self.catchUpBatch) {
            let batch = feeds[start..<min(start + Self.catchUpBatch, feeds.count)]
            var binding = PostgresBindings(capacity: 2)
            binding.append(batch.map(\.container))
            binding.append(batch.map(\.user))
            let bindings = binding
            let heads = try await client.withConnection(leaseTimeout: leaseTimeout) { connection in
                let rows = try await connection.query(
                    PostgresQuery(
                        unsafeSQL: """
                            SELECT container, owner, head_seq FROM notification_feeds
                            WHERE (container, owner) IN (SELECT * FROM unnest($1::text[], $2::text[]))
                            """,
                        binds: bindings), logger: logger)
                var heads: [(NotificationFeedKey, Int64)] = []
                for try await (container, user, head) in rows.decode((String, String, Int64).self) {
                    heads.append((NotificationFeedKey(container: container, user: user), head))
                }
                return heads
            }
            for (feed, head) in heads {
                if let start = announcer.readStart(of: feed, head: head) { enqueue(feed, after: start) }
            }
        }
    }

    private func enqueue(_ feed: NotificationFeedKey, after start: Int64) {
        state.withLock { state in
            state.pending[feed] = min(state.pending[feed] ?? start, start)
        }
        wake.yield()
    }

    // MARK: - Reading

    /// Reads the queued feeds and announces what they hold, until cancelled. A read that fails
    /// (the server is away) is queued again.
    private func readPending() async {
        for await _ in wakes {
            while !Task.isCancelled {
                let pending = state.withLock { state in
                    defer { state.pending = [:] }
                    return state.pending
                }
                if pending.isEmpty { break }
                for (feed, start) in pending.sorted(by: { $0.key.description < $1.key.description }) {
                    do {
                        try await read(feed, after: start)
                    } catch {
                        guard !Task.isCancelled else { return }
                        logger.warning(
                            "PostgreSQL notification feed not read", metadata: ["feed": "\(feed)", "error": "\(error)"])
                        state.withLock { $0.pending[feed] = min($0.pending[feed] ?? start, start) }
                        try? await Task.sleep(for: .milliseconds(500))
                    }
                }
            }
        }
    }

    /// Announces the notifications of `feed` after `start` (those still kept).
    private func read(_ feed: NotificationFeedKey, after start: Int64) async throws {
        var after = start
        while true {
            let from = after
            let page = try await client.withConnection(leaseTimeout: leaseTimeout) { connection in
                try await PostgresStorage.notifications(of: feed, after: from, limit: Self.readBatch, connection, self.logger)
            }
            announcer.announce(page, of: feed, readAfter: after)
            guard page.count == Self.readBatch, let last = page.last?.seq else { return }
            after = last
        }
    }
}
