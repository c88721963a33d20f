import CirrusWire
import Dispatch
import NIOConcurrencyHelpers

/// What an operation stream hands to its operation, in order.
enum StreamDelivery: Sendable {
    /// The long-lived operation is registered and journaled.
    case persisted(Wire.Persisted)
    /// One callback of the operation.
    case event(Wire.Event)
    /// The operation finished; nothing follows.
    case complete(Wire.Complete)
    /// The stream cannot go on (connection lost, refused, protocol error); nothing follows.
    case failed(ConnectionFailure)
}

/// One operation's stream: its `Open`, the queue its deliveries run on, and its flow-control
/// bookkeeping.
///
/// Deliveries arrive from the connection's event loop and run on `queue` (the operation's serial
/// callback queue) in the order they arrived. Credit is granted back only after the receiver
/// returned from an event, `creditBatch` events at a time, so the events waiting on `queue`
/// never exceed the stream window however slow the receiver is.
final class ClientStream: Sendable {
    private struct State {
        var connection: ClientConnection?
        var streamID: UInt64 = 0
        /// Events delivered since the last `Window`.
        var consumed: UInt32 = 0
        /// A terminal delivery (`complete`/`failed`) was queued; later ones are dropped.
        var isTerminated = false
        /// The operation cancelled: nothing more is delivered.
        var isCancelled = false
        /// Times the stream was handed to a connection (GoAway retries).
        var attempts = 0
    }

    let open: Wire.Open
    let window: UInt32
    private let queue: DispatchQueue
    private let receiver: @Sendable (StreamDelivery) -> Void
    private let state = NIOLockedValueBox(State())

    /// - parameter receiver: runs on `queue` for each delivery.
    init(open: Wire.Open, window: UInt32, queue: DispatchQueue, receiver: @escaping @Sendable (StreamDelivery) -> Void) {
        var open = open
        open.initialWindow = max(window, 1)
        self.open = open
        self.window = max(window, 1)
        self.queue = queue
        self.receiver = receiver
    }

    /// Credit is returned in batches of this many events (half the window).
    var creditBatch: UInt32 { max(self.window / 2, 1) }

    var isCancelled: Bool { self.state.withLockedValue { $0.isCancelled } }

    /// The stream ID on its current connection (0 before it is opened).
    var streamID: UInt64 { self.state.withLockedValue { $0.streamID } }

    /// Counts a hand-over to a connection; false once it has been tried too often.
    func beginAttempt(maximum: Int = 3) -> Bool {
        self.state.withLockedValue { state in
            state.attempts += 1
            return state.attempts <= maximum
        }
    }

    /// The connection opened the stream as `streamID`. Event loop. False when the operation
    /// was cancelled meanwhile: the connection then cancels the stream it just opened.
    func attached(to connection: ClientConnection, streamID: UInt64) -> Bool {
        self.state.withLockedValue { state in
            state.streamID = streamID
            state.consumed = 0
            guard !state.isCancelled else { return false }
            state.connection = connection
            return true
        }
    }

    /// Queues `delivery` for the receiver. Called on the connection's event loop.
    func deliver(_ delivery: StreamDelivery) {
        let accepted = self.state.withLockedValue { state -> Bool in
            guard !state.isTerminated else { return false }
            switch delivery {
            case .complete, .failed:
                state.isTerminated = true
                state.connection = nil
            case .event, .persisted:
                break
            }
            return true
        }
        guard accepted else { return }
        self.queue.async {
            guard !self.isCancelled else { return }
            self.receiver(delivery)
            if case .event = delivery {
                self.consumedOne()
            }
        }
    }

    /// Ends the stream with `failure` unless it already ended.
    func fail(_ failure: ConnectionFailure) {
        self.deliver(.failed(failure))
    }

    /// Stops deliveries and tells the server to stop the operation.
    func cancel(reason: String) {
        let (connection, streamID) = self.state.withLockedValue { state -> (ClientConnection?, UInt64) in
            defer {
                state.isCancelled = true
                state.isTerminated = true
                state.connection = nil
            }
            return state.isTerminated ? (nil, 0) : (state.connection, state.streamID)
        }
        connection?.cancel(streamID: streamID, reason: reason)
    }

    private func consumedOne() {
        let grant = self.state.withLockedValue { state -> (ClientConnection, UInt64, UInt32)? in
            state.consumed += 1
            guard state.consumed >= self.creditBatch, let connection = state.connection else { return nil }
            defer { state.consumed = 0 }
            return (connection, state.streamID, state.consumed)
        }
        if let (connection, streamID, credit) = grant {
            connection.grant(credit: credit, streamID: streamID)
        }
    }
}
