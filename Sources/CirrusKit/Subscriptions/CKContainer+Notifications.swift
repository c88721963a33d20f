import CirrusModel
import Dispatch
import Foundation
import NIOConcurrencyHelpers

/// Notifications pushed over the container's connection: Cirrus's stand-in for APNs. The
/// server pushes each notification a subscription produces to every connected client of the
/// user that watches, at once and under flow control.
extension CKContainer {
    /// The current user's notifications as they are created, for as long as you iterate: each
    /// with its `changeToken` set (the feed position just after it).
    ///
    /// With `since`, the notifications created after that token come first (what this device
    /// missed while it was away), then the live ones; without, only notifications created from
    /// the moment the server starts the watch. Persist the last `changeToken` you handled and
    /// pass it next time to get everything exactly once.
    ///
    /// The sequence survives dropped connections: it reconnects with the container's jittered
    /// backoff and continues after the last notification it received, so nothing is missed or
    /// repeated; it keeps trying for as long as you iterate (the backoff caps at the
    /// configuration's `reconnectMaximumDelay`). It ends by throwing the `CKError` when the server refuses the watch for good
    /// (`changeTokenExpired` for a too-old `since`: fetch with
    /// `CKFetchNotificationChangesOperation` or start again without a token;
    /// `invalidArguments`, `notAuthenticated` …). Leaving the loop or cancelling its task
    /// cancels the watch on the server. A slow loop body slows the server down: at most the
    /// configuration's `streamWindow` notifications wait on the client.
    ///
    /// Each iterator is a watch of its own.
    ///
    /// For example:
    /// ```swift
    /// for try await notification in container.notifications(since: savedToken) {
    ///     if let change = notification as? CKDatabaseNotification {
    ///         try await syncDatabase(change.databaseScope)
    ///     }
    ///     savedToken = notification.changeToken
    /// }
    /// ```
    ///
    /// - parameter changeToken: where to start: after this notification-feed token; nil = from
    ///   the moment the server starts the watch.
    /// - parameter databaseScopes: only notifications about these databases; empty = all.
    public func notifications(since changeToken: CKServerChangeToken? = nil, databaseScopes: [CKDatabase.Scope] = []) -> Notifications {
        Notifications(container: self, since: changeToken, databaseScopes: databaseScopes)
    }

    /// The `AsyncSequence` of `notifications(since:databaseScopes:)`.
    public struct Notifications: AsyncSequence, Sendable {
        public typealias Element = CKNotification

        let container: CKContainer
        let since: CKServerChangeToken?
        let databaseScopes: [CKDatabase.Scope]

        public func makeAsyncIterator() -> AsyncIterator {
            AsyncIterator(handle: FeedHandle(NotificationFeed(container: self.container, since: self.since, scopes: self.databaseScopes)))
        }

        /// Iterates one watch; dropping it cancels the watch.
        public struct AsyncIterator: AsyncIteratorProtocol, Sendable {
            let handle: FeedHandle

            /// The next notification, waiting for one.
            ///
            /// - throws: the `CKError` that ended the watch.
            public mutating func next() async throws -> CKNotification? {
                try await self.handle.feed.next()
            }
        }
    }

    /// Calls `handler` with each of the current user's notifications as it is created, serially
    /// on `queue`, until you cancel the returned watch or it fails: the callback form of
    /// `notifications(since:databaseScopes:)`, with the same reconnects and back-pressure (the
    /// next notification is handed over only after `handler` returned).
    ///
    /// For example:
    /// ```swift
    /// let watch = container.watchNotifications(since: savedToken) { notification in
    ///     print("changed:", notification)
    /// } completion: { error in
    ///     if let error { print("watch ended:", error) }
    /// }
    /// …
    /// savedToken = watch.lastChangeToken
    /// watch.cancel()
    /// ```
    ///
    /// - parameter changeToken: where to start: after this notification-feed token; nil = from
    ///   the moment the server starts the watch.
    /// - parameter databaseScopes: only notifications about these databases; empty = all.
    /// - parameter queue: where `handler` and `completion` run; nil = a private serial queue.
    /// - parameter handler: runs once per notification, in feed order.
    /// - parameter completion: runs once, last: nil after `cancel()`, else the `CKError` that
    ///   ended the watch.
    /// - returns: the watch; keep it to cancel it (it runs until cancelled even if you do not).
    @discardableResult
    public func watchNotifications(
        since changeToken: CKServerChangeToken? = nil,
        databaseScopes: [CKDatabase.Scope] = [],
        queue: DispatchQueue? = nil,
        handler: @escaping @Sendable (CKNotification) -> Void,
        completion: (@Sendable ((any Error)?) -> Void)? = nil
    ) -> CKNotificationWatch {
        let watch = CKNotificationWatch(since: changeToken)
        let queue = queue ?? DispatchQueue(label: "CKContainer.watchNotifications.\(UUID().uuidString)")
        let sequence = self.notifications(since: changeToken, databaseScopes: databaseScopes)
        let task = Task {
            let ending: (any Error)?
            do {
                for try await notification in sequence {
                    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                        queue.async {
                            handler(notification)
                            continuation.resume()
                        }
                    }
                    watch.handled(notification)
                }
                ending = nil
            } catch {
                ending = error
            }
            queue.async { completion?(ending) }
        }
        watch.attach(task)
        return watch
    }
}

/// A running `CKContainer.watchNotifications` (a Cirrus addition): cancel it, or read where
/// it stands to continue later.
///
/// For example:
/// ```swift
/// let watch = container.watchNotifications { notification in print(notification) }
/// watch.cancel()
/// ```
public final class CKNotificationWatch: Sendable {
    private struct State {
        var task: Task<Void, Never>?
        var lastChangeToken: CKServerChangeToken?
        var isCancelled = false
    }

    private let state: NIOLockedValueBox<State>

    init(since: CKServerChangeToken?) {
        self.state = NIOLockedValueBox(State(lastChangeToken: since))
    }

    /// The feed position just after the last notification the handler returned from (the
    /// `since` token before the first): pass it as `since` to continue from there.
    public var lastChangeToken: CKServerChangeToken? { self.state.withLockedValue { $0.lastChangeToken } }

    /// Whether `cancel()` was called.
    public var isCancelled: Bool { self.state.withLockedValue { $0.isCancelled } }

    /// Stops the watch and cancels it on the server. The handler is not called again once the
    /// call it may be in returns; then `completion` runs with nil.
    public func cancel() {
        let task = self.state.withLockedValue { state -> Task<Void, Never>? in
            state.isCancelled = true
            return state.task
        }
        task?.cancel()
    }

    func attach(_ task: Task<Void, Never>) {
        let cancelled = self.state.withLockedValue { state -> Bool in
            state.task = task
            return state.isCancelled
        }
        if cancelled { task.cancel() }
    }

    func handled(_ notification: CKNotification) {
        self.state.withLockedValue { $0.lastChangeToken = notification.changeToken ?? $0.lastChangeToken }
    }
}

/// Owns one `NotificationFeed` for its iterator: when the iterator goes away, the watch stops.
final class FeedHandle: Sendable {
    let feed: NotificationFeed

    init(_ feed: NotificationFeed) {
        self.feed = feed
    }

    deinit {
        self.feed.stop()
    }
}
