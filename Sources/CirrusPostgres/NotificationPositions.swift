import CirrusStore
import Synchronization

/// How far this node announced each notification feed to its observers, so that no
/// notification is announced twice on a node: one committed by this node is announced right
/// after its commit, and its `NOTIFY` comes back to this node's listener later; one committed
/// by another node arrives as a `NOTIFY` (or is found after the listener reconnected), and is
/// read from the feed, the source of truth.
///
/// A feed's notifications commit in sequence order (its row is locked from the moment its head
/// moves until the commit), so a read of the feed after the position never misses one that
/// was committed before a later one it finds.
struct NotificationPositions: Sendable {
    /// The newest sequence announced (or known to be read by this node) per feed.
    private(set) var announced: [NotificationFeedKey: Int64] = [:]

    /// Of `notifications` (of `feed`), those newer than any announced, in feed order; the
    /// feed's position moves past them.
    mutating func fresh(_ notifications: [StoredNotification], of feed: NotificationFeedKey) -> [StoredNotification] {
        let last = announced[feed]
        let fresh = notifications.filter { notification in last.map { notification.seq > $0 } ?? true }
            .sorted { $0.seq < $1.seq }
        if let newest = fresh.last?.seq { announced[feed] = max(last ?? newest, newest) }
        return fresh
    }

    /// Where to read the feed an announcement names, after which sequence; nil when this node
    /// announced all it announces already. A feed this node never heard of is read from the
    /// announcement's first notification.
    func readStart(for announcement: NotificationAnnouncement) -> Int64? {
        guard let last = announced[announcement.feed] else { return announcement.first - 1 }
        return announcement.head > last ? last : nil
    }

    /// Where to read `feed`, whose newest notification is now `head`, after a `NOTIFY` may have
    /// been lost; nil when there is nothing new or this node never heard of the feed.
    func readStart(of feed: NotificationFeedKey, head: Int64) -> Int64? {
        guard let last = announced[feed], head > last else { return nil }
        return last
    }

    /// Notes that a reader on this node saw `feed` up to `head` (a watch starts there): from
    /// then on the feed's new notifications are announced, also those of a `NOTIFY` lost while
    /// the listener reconnects. No effect on a feed this node knows already.
    mutating func register(_ feed: NotificationFeedKey, at head: Int64) {
        if announced[feed] == nil { announced[feed] = head }
    }
}

/// The observers of a ``PostgresStorage`` and the positions it announced them
/// (``NotificationPositions``).
final class NotificationAnnouncer: Sendable {
    typealias Observer = @Sendable (NotificationFeedKey, [StoredNotification]) -> Void

    private struct State {
        var observers: [Observer] = []
        var positions = NotificationPositions()
    }

    private let state = Mutex(State())

    func observe(_ observer: @escaping Observer) {
        state.withLock { $0.observers.append(observer) }
    }

    /// Tells the observers of the notifications of `feed` not announced yet.
    func announce(_ notifications: [StoredNotification], of feed: NotificationFeedKey) {
        let (fresh, observers) = state.withLock { state in
            (state.positions.fresh(notifications, of: feed), state.observers)
        }
        guard !fresh.isEmpty else { return }
        for observer in observers { observer(feed, fresh) }
    }

    /// Tells the observers of what one commit of this node added to the feeds of `container`,
    /// per subscriber.
    func announce(in container: String, _ notified: [String: [StoredNotification]]) {
        for (user, notifications) in notified.sorted(by: { $0.key < $1.key }) {
            announce(notifications, of: NotificationFeedKey(container: container, user: user))
        }
    }

    func readStart(for announcement: NotificationAnnouncement) -> Int64? {
        state.withLock { $0.positions.readStart(for: announcement) }
    }

    func readStart(of feed: NotificationFeedKey, head: Int64) -> Int64? {
        state.withLock { $0.positions.readStart(of: feed, head: head) }
    }

    func register(_ feed: NotificationFeedKey, at head: Int64) {
        state.withLock { $0.positions.register(feed, at: head) }
    }

    /// Every feed this node announced or registered.
    var knownFeeds: [NotificationFeedKey] {
        state.withLock { Array($0.positions.announced.keys) }
    }
}
