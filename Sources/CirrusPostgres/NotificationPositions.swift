import CirrusStore
import Synchronization

/// Which notifications of each feed this node announced to its observers, so that it
/// announces each once, even out of order: one committed by this node is announced right after
/// its commit, and its `NOTIFY` comes back to this node's listener later; one committed by
/// another node arrives as a `NOTIFY` (or is found after the listener reconnected), and is read
/// from the feed, the source of truth. Commits of two nodes into one feed can be announced in
/// either order; the one announced later is still announced.
///
/// A feed's notifications commit in sequence order (its row is locked from the moment its head
/// moves until the commit), so a read of the feed after a position finds every notification
/// committed before the newest it finds, but those pruned.
///
/// A feed is followed from the first time this node reads it (a watch reads its feed first),
/// hears of it, or commits to it.
struct NotificationPositions: Sendable {
    /// What this node announced of one feed.
    struct Feed: Sendable, Equatable {
        /// Every notification up to here was announced (or was there before the node followed
        /// the feed, or was pruned before it was read).
        var through: Int64
        /// Those announced after `through`, out of order.
        var above: Set<Int64> = []

        /// Whether every notification of `range` was announced.
        func announced(_ range: ClosedRange<Int64>) -> Bool {
            guard range.upperBound > through else { return true }
            let unknown = max(range.lowerBound, through + 1)...range.upperBound
            guard above.count >= unknown.count else { return false }
            return unknown.allSatisfy(above.contains)
        }
    }

    private(set) var feeds: [NotificationFeedKey: Feed] = [:]

    /// Of `notifications` (of `feed`), those not announced yet, in feed order, which count as
    /// announced from now on. `readAfter` says they are all the feed keeps after that sequence
    /// up to the newest of them (a read of the feed): any other in that range was pruned.
    mutating func fresh(
        _ notifications: [StoredNotification], of feed: NotificationFeedKey, readAfter start: Int64? = nil
    ) -> [StoredNotification] {
        let sorted = notifications.sorted { $0.seq < $1.seq }
        guard let newest = sorted.last?.seq else { return [] }
        var position = feeds[feed] ?? Feed(through: start ?? (sorted[0].seq - 1))
        var fresh: [StoredNotification] = []
        for notification in sorted where !position.announced(notification.seq...notification.seq) {
            fresh.append(notification)
            position.above.insert(notification.seq)
        }
        if let start, start <= position.through { position.through = max(position.through, newest) }
        position.above = position.above.filter { $0 > position.through }
        while position.above.remove(position.through + 1) != nil { position.through += 1 }
        feeds[feed] = position
        return fresh
    }

    /// Where to read the feed an announcement names, after which sequence; nil when this node
    /// announced all it announces already. A feed this node does not follow yet is read from
    /// the announcement's first notification.
    func readStart(for announcement: NotificationAnnouncement) -> Int64? {
        guard let position = feeds[announcement.feed] else { return announcement.first - 1 }
        return position.announced(announcement.first...announcement.head) ? nil : position.through
    }

    /// Where to read `feed`, whose newest notification is now `head`, after a `NOTIFY` may have
    /// been lost; nil when this node announced everything up to `head` or does not follow the
    /// feed.
    func readStart(of feed: NotificationFeedKey, head: Int64) -> Int64? {
        guard let position = feeds[feed], head > position.through, !position.announced(position.through...head) else {
            return nil
        }
        return position.through
    }

    /// Notes that a reader on this node saw `feed` up to `head` (a watch starts there): from
    /// then on the feed's new notifications are announced, also those of a `NOTIFY` lost while
    /// the listener reconnects. No effect on a feed this node follows already.
    mutating func register(_ feed: NotificationFeedKey, at head: Int64) {
        if feeds[feed] == nil { feeds[feed] = Feed(through: head) }
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

    /// Tells the observers of the notifications of `feed` not announced yet; `readAfter` as
    /// for ``NotificationPositions/fresh(_:of:readAfter:)``.
    func announce(_ notifications: [StoredNotification], of feed: NotificationFeedKey, readAfter start: Int64? = nil) {
        let (fresh, observers) = state.withLock { state in
            (state.positions.fresh(notifications, of: feed, readAfter: start), state.observers)
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

    /// Every feed this node follows.
    var knownFeeds: [NotificationFeedKey] {
        state.withLock { Array($0.positions.feeds.keys) }
    }
}
