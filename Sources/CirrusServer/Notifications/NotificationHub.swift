import CirrusStore
import Synchronization

/// Hands the notifications each commit added to a feed to the watches (`WatchNotifications`
/// streams) of that feed, so a watch sends them without reading back what the writer just
/// wrote.
///
/// A watch keeps its own position in the feed. What the hub delivers it takes with
/// ``Watch/take(after:)``: the notifications that follow its position without a gap, or
/// ``Delivery/gap`` when some are missing — announcements of concurrent commits can arrive out
/// of order, and a watch that was busy (or waiting for flow-control credit) holds at most
/// ``mailboxLimit`` of them — and the watch then reads its feed after its position instead.
/// Signals coalesce: at most one waits per watch.
///
/// For example:
/// ```swift
/// let hub = NotificationHub(observing: storage)
/// let watch = hub.watch(feed)
/// defer { hub.stopWatching(watch) }
/// for await _ in watch.signals {
///     switch watch.take(after: position) { … }  // send them, or read the feed over a gap
/// }
/// ```
public final class NotificationHub: Sendable {
    /// How many undelivered notifications one watch holds before it drops them and reads its
    /// feed instead (a watch whose client does not read holds no more than this).
    public static let mailboxLimit = 256

    /// One registered watch.
    public struct Watch: Sendable {
        public let feed: NotificationFeedKey
        let id: UInt64
        let mailbox: Mailbox
        /// Yields once after each commit (coalesced) that added notifications to the feed.
        public let signals: AsyncStream<Void>

        /// The notifications delivered since the last call that come after `position`, in
        /// order, or ``Delivery/gap`` when they do not follow `position` without a gap.
        public func take(after position: Int64) -> Delivery {
            self.mailbox.take(after: position)
        }
    }

    /// What a watch takes from its mailbox.
    public enum Delivery: Sendable, Equatable {
        /// The notifications right after the position, consecutive (possibly none).
        case notifications([StoredNotification])
        /// Some are missing: read the feed after the position.
        case gap
    }

    /// The notifications delivered to one watch and not taken yet.
    final class Mailbox: Sendable {
        private struct State {
            var pending: [StoredNotification] = []
            var overflowed = false
        }

        private let state = Mutex(State())

        func put(_ notifications: [StoredNotification]) {
            self.state.withLock { state in
                guard !state.overflowed else { return }
                if state.pending.count + notifications.count > NotificationHub.mailboxLimit {
                    state.pending = []
                    state.overflowed = true
                } else {
                    state.pending.append(contentsOf: notifications)
                }
            }
        }

        func take(after position: Int64) -> Delivery {
            let (pending, overflowed) = self.state.withLock { state in
                defer { state = State() }
                return (state.pending, state.overflowed)
            }
            if overflowed { return .gap }
            var next = position + 1
            var fresh: [StoredNotification] = []
            for notification in pending.sorted(by: { $0.seq < $1.seq }) where notification.seq >= next {
                guard notification.seq == next else { return .gap }
                fresh.append(notification)
                next += 1
            }
            return .notifications(fresh)
        }
    }

    private struct Registration {
        var mailbox: Mailbox
        var continuation: AsyncStream<Void>.Continuation
    }

    private struct State {
        var nextID: UInt64 = 0
        var watches: [NotificationFeedKey: [UInt64: Registration]] = [:]
    }

    private let state = Mutex(State())

    /// A hub told of every commit of `storage` that adds notifications.
    public init(observing storage: any SubscriptionStorage) {
        storage.observeNotifications { [weak self] feed, notifications in self?.deliver(notifications, to: feed) }
    }

    /// Registers a watch of `feed`; call ``stopWatching(_:)`` when done.
    public func watch(_ feed: NotificationFeedKey) -> Watch {
        let (signals, continuation) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let mailbox = Mailbox()
        let id = state.withLock { state in
            state.nextID += 1
            state.watches[feed, default: [:]][state.nextID] = Registration(mailbox: mailbox, continuation: continuation)
            return state.nextID
        }
        return Watch(feed: feed, id: id, mailbox: mailbox, signals: signals)
    }

    public func stopWatching(_ watch: Watch) {
        let registration = state.withLock { state -> Registration? in
            let removed = state.watches[watch.feed]?.removeValue(forKey: watch.id)
            if state.watches[watch.feed]?.isEmpty == true { state.watches[watch.feed] = nil }
            return removed
        }
        registration?.continuation.finish()
    }

    /// Watches registered now (for tests and metrics).
    public var watchCount: Int { state.withLock { $0.watches.values.reduce(0) { $0 + $1.count } } }

    func deliver(_ notifications: [StoredNotification], to feed: NotificationFeedKey) {
        let registrations = state.withLock { Array(($0.watches[feed] ?? [:]).values) }
        for registration in registrations {
            registration.mailbox.put(notifications)
            registration.continuation.yield()
        }
    }
}
