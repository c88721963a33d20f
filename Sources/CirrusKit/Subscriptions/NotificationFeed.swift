import CirrusModel
import CirrusWire
import Dispatch
import Foundation
import NIOConcurrencyHelpers

/// The engine under `CKContainer.notifications(since:databaseScopes:)`: one
/// `WatchNotifications` stream at a time, reopened after it fails, and a bounded hand-over to
/// one consumer.
///
/// - Reconnect: when the stream fails for a reason that may pass (connection lost, GoAway,
///   the server busy or draining), the feed waits the container's jittered reconnect backoff
///   (growing with the failures since the last `.live`) and opens a new stream with `since` =
///   the last token it received (the `.live` token or the last notification's
///   `change_token`). The server replays what came after it, so the consumer gets every
///   notification once, in order. Other errors end the feed with that error, after the
///   notifications already received.
/// - Back-pressure: the stream does not earn credit when its events arrive, only when the
///   consumer takes a notification (`next()`), so at most the stream window of notifications
///   is ever held here; a slow consumer makes the server wait. A new stream is opened only
///   once the consumer has taken every notification of the old one, so reconnects do not
///   stack windows either.
/// - A watch is idle for long periods: it has no request or resource timeout, and it is
///   never long-lived (a new stream with `since` replaces resuming).
final class NotificationFeed: Sendable {
    private enum Ending {
        case open
        case finished
        case failed(CKError)
    }

    private struct State {
        /// Notifications received and not yet taken, with the stream whose credit they hold.
        var buffer: [(notification: CKNotification, stream: ClientStream)] = []
        /// A consumer waiting in `next()` (only while `buffer` is empty).
        var waiter: CheckedContinuation<CKNotification?, any Error>?
        var ending = Ending.open
        var isStarted = false
        /// The current stream and its number (deliveries of earlier ones are ignored).
        var stream: ClientStream?
        var generation = 0
        /// The last feed position received: where a new stream starts (`since`).
        var lastToken: CKServerChangeToken?
        /// The position just after the last notification the consumer took (or the `.live`
        /// token when it had taken everything before it).
        var position: CKServerChangeToken?
        /// Failed streams since the last `.live`.
        var failures = 0
        /// The backoff has passed but the consumer has not taken everything yet: open the next
        /// stream when it has.
        var reopenWhenDrained = false
    }

    private let container: CKContainer
    private let scopes: [CKDatabaseScope]
    private let queue: DispatchQueue
    private let state: NIOLockedValueBox<State>
    /// Called each time a stream of the feed goes live (the server will push what comes next).
    private let onLive: (@Sendable () -> Void)?

    init(
        container: CKContainer, since: CKServerChangeToken?, scopes: [CKDatabaseScope],
        onLive: (@Sendable () -> Void)? = nil
    ) {
        self.container = container
        self.scopes = scopes
        self.onLive = onLive
        self.queue = DispatchQueue(label: "CKContainer.notifications.\(UUID().uuidString)")
        self.state = NIOLockedValueBox(State(lastToken: since, position: since))
    }

    /// Where the consumer stands: the token just after the last notification it took.
    var position: CKServerChangeToken? { self.state.withLockedValue { $0.position } }

    // MARK: - Consumer

    /// The next notification, waiting for one; nil once stopped; throws the error that ended
    /// the feed (once, after every notification received before it).
    func next() async throws -> CKNotification? {
        let start = self.state.withLockedValue { state -> Bool in
            defer { state.isStarted = true }
            return !state.isStarted
        }
        if start {
            self.openStream()
        }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<CKNotification?, any Error>) in
                enum Action {
                    case take(CKNotification, ClientStream, reopen: Bool)
                    case fail(CKError)
                    case end
                    case wait
                }
                let action = self.state.withLockedValue { state -> Action in
                    if !state.buffer.isEmpty {
                        let (notification, stream) = state.buffer.removeFirst()
                        state.position = notification.changeToken ?? state.position
                        let reopen = state.buffer.isEmpty && state.reopenWhenDrained
                        if reopen { state.reopenWhenDrained = false }
                        return .take(notification, stream, reopen: reopen)
                    }
                    switch state.ending {
                    case .failed(let error):
                        state.ending = .finished
                        return .fail(error)
                    case .finished:
                        return .end
                    case .open:
                        guard state.waiter == nil else {
                            // Two consumers of one iterator: the first keeps waiting.
                            return .fail(CKError(.internalError, message: "next() was called while another call to it was waiting"))
                        }
                        state.waiter = continuation
                        return .wait
                    }
                }
                switch action {
                case .take(let notification, let stream, let reopen):
                    stream.eventConsumed()
                    if reopen { self.openStream() }
                    continuation.resume(returning: notification)
                case .fail(let error):
                    continuation.resume(throwing: error)
                case .end:
                    continuation.resume(returning: nil)
                case .wait:
                    break
                }
            }
        } onCancel: {
            self.stop()
        }
    }

    /// Ends the feed: the server stream is cancelled and a waiting consumer gets nil.
    func stop() {
        let (stream, waiter) = self.state.withLockedValue { state -> (ClientStream?, CheckedContinuation<CKNotification?, any Error>?) in
            if case .open = state.ending { state.ending = .finished }
            state.buffer.removeAll()
            state.reopenWhenDrained = false
            defer {
                state.stream = nil
                state.waiter = nil
            }
            return (state.stream, state.waiter)
        }
        stream?.cancel(reason: "the client stopped watching notifications")
        waiter?.resume(returning: nil)
    }

    // MARK: - Stream

    private func openStream() {
        let opened = self.state.withLockedValue { state -> (Wire.Open, Int)? in
            guard case .open = state.ending else { return nil }
            state.generation += 1
            let request = Wire.WatchNotificationsRequest(
                since: state.lastToken?.wireToken,
                databaseScopes: self.scopes.map(\.wireScope)
            )
            let open = Wire.Open(
                operationID: RandomUUID.string(),
                databaseScope: .unspecified,
                containerIdentifier: self.container.containerIdentifier ?? "",
                request: .watchNotifications(request)
            )
            return (open, state.generation)
        }
        guard let (open, generation) = opened else { return }
        let manager = self.container.connectionManager
        let stream = ClientStream(
            open: open,
            window: manager.configuration.streamWindow,
            queue: self.queue,
            creditsOnDelivery: false
        ) { delivery in
            self.receive(delivery, generation: generation)
        }
        let current = self.state.withLockedValue { state -> Bool in
            guard case .open = state.ending, state.generation == generation else { return false }
            state.stream = stream
            return true
        }
        guard current else { return }
        manager.open(stream)
    }

    /// One delivery of stream `generation`, on `queue`.
    private func receive(_ delivery: StreamDelivery, generation: Int) {
        guard let stream = self.state.withLockedValue({ $0.generation == generation ? $0.stream : nil }) else { return }
        switch delivery {
        case .persisted:
            break
        case .event(let event):
            guard case .watchNotifications(let payload) = event.payload else {
                stream.eventConsumed()
                return
            }
            switch payload.callback {
            case .live(let token):
                self.state.withLockedValue { state in
                    let token = CKServerChangeToken(wire: token)
                    state.lastToken = token
                    state.failures = 0
                    if state.buffer.isEmpty { state.position = token }
                }
                stream.eventConsumed()
                self.onLive?()
            case .notification(let watched):
                guard let wire = watched.notification else {
                    stream.eventConsumed()
                    return
                }
                let token = watched.changeToken.map(CKServerChangeToken.init(wire:))
                let notification = CKNotification.make(wire: wire, changeToken: token)
                let waiter = self.state.withLockedValue { state -> CheckedContinuation<CKNotification?, any Error>? in
                    state.lastToken = token ?? state.lastToken
                    if let waiter = state.waiter {
                        state.waiter = nil
                        state.position = token ?? state.position
                        return waiter
                    }
                    state.buffer.append((notification, stream))
                    return nil
                }
                if let waiter {
                    stream.eventConsumed()
                    waiter.resume(returning: notification)
                }
            case nil:
                stream.eventConsumed()
            }
        case .complete(let complete):
            guard let error = complete.error else {
                self.retry(after: nil)
                return
            }
            let ckError = CKError(wire: error)
            if Self.retryableCodes.contains(error.code) {
                self.retry(after: ckError.retryAfterSeconds)
            } else {
                self.end(ckError)
            }
        case .failed(let failure):
            if failure.code == .networkFailure {
                self.retry(after: nil)
            } else {
                self.end(CKError(failure))
            }
        }
    }

    /// Stream errors that may pass: the watch is opened again.
    static let retryableCodes: Set<Wire.ErrorCode> = [
        .networkFailure, .networkUnavailable, .serviceUnavailable, .requestRateLimited, .zoneBusy,
        .serverResponseLost, .accountTemporarilyUnavailable, .shuttingDown, .idleTimeout, .rateLimited,
        .tooManyStreams,
    ]

    /// Opens the next stream after the backoff (at least `retryAfter` seconds).
    private func retry(after retryAfter: Double?) {
        let failures = self.state.withLockedValue { state -> Int? in
            guard case .open = state.ending else { return nil }
            state.stream = nil
            state.failures += 1
            return state.failures
        }
        guard let failures else { return }
        let configuration = self.container.connectionManager.configuration
        let delay = max(
            ConnectionManager.backoff(
                failures: failures,
                base: configuration.reconnectBaseDelay,
                maximum: configuration.reconnectMaximumDelay
            ),
            retryAfter ?? 0
        )
        self.queue.asyncAfter(deadline: .now() + delay) {
            let now = self.state.withLockedValue { state -> Bool in
                guard case .open = state.ending else { return false }
                guard state.buffer.isEmpty else {
                    state.reopenWhenDrained = true
                    return false
                }
                return true
            }
            if now {
                self.openStream()
            }
        }
    }

    /// Ends the feed with `error`, after the notifications already received.
    private func end(_ error: CKError) {
        let waiter = self.state.withLockedValue { state -> CheckedContinuation<CKNotification?, any Error>? in
            guard case .open = state.ending else { return nil }
            state.stream = nil
            state.ending = .failed(error)
            guard let waiter = state.waiter else { return nil }
            state.waiter = nil
            state.ending = .finished
            return waiter
        }
        waiter?.resume(throwing: error)
    }
}
