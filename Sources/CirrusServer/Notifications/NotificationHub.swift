import CirrusStore
import Synchronization

/// Wakes the watches (`WatchNotifications` streams) of a notification feed when the storage
/// committed new notifications to it.
///
/// A signal carries no notification: each watch reads its feed after its own position, so a
/// watch that was busy (or waiting for flow-control credit) when several commits landed reads
/// them all at once, and one that is woken for nothing new reads nothing. Signals coalesce: at
/// most one waits per watch.
///
/// For example:
/// ```swift
/// let hub = NotificationHub(observing: storage)
/// let watch = hub.watch(feed)
/// defer { hub.stopWatching(watch) }
/// for await _ in watch.signals { /* read the feed after the last position */ }
/// ```
public final class NotificationHub: Sendable {
    /// One registered watch.
    public struct Watch: Sendable {
        public let feed: NotificationFeedKey
        let id: UInt64
        /// Yields once after each commit (coalesced) that added notifications to the feed.
        public let signals: AsyncStream<Void>
    }

    private struct State {
        var nextID: UInt64 = 0
        var watches: [NotificationFeedKey: [UInt64: AsyncStream<Void>.Continuation]] = [:]
    }

    private let state = Mutex(State())

    /// A hub told of every commit of `storage` that adds notifications.
    public init(observing storage: any SubscriptionStorage) {
        storage.observeNotifications { [weak self] feed in self?.signal(feed) }
    }

    /// Registers a watch of `feed`; call ``stopWatching(_:)`` when done.
    public func watch(_ feed: NotificationFeedKey) -> Watch {
        let (signals, continuation) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let id = state.withLock { state in
            state.nextID += 1
            state.watches[feed, default: [:]][state.nextID] = continuation
            return state.nextID
        }
        return Watch(feed: feed, id: id, signals: signals)
    }

    public func stopWatching(_ watch: Watch) {
        let continuation = state.withLock { state -> AsyncStream<Void>.Continuation? in
            let removed = state.watches[watch.feed]?.removeValue(forKey: watch.id)
            if state.watches[watch.feed]?.isEmpty == true { state.watches[watch.feed] = nil }
            return removed
        }
        continuation?.finish()
    }

    /// Watches registered now (for tests and metrics).
    public var watchCount: Int { state.withLock { $0.watches.values.reduce(0) { $0 + $1.count } } }

    func signal(_ feed: NotificationFeedKey) {
        let continuations = state.withLock { Array(($0.watches[feed] ?? [:]).values) }
        for continuation in continuations { continuation.yield() }
    }
}
