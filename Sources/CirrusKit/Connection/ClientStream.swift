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

/// One operation's stream: its `Open`, the queue its deliveries run on, its flow-control
/// bookkeeping and, for a long-lived operation, what it takes to resume it on another
/// connection.
///
/// Deliveries arrive from the connection's event loop and run on `queue` (the operation's serial
/// callback queue) in the order they arrived. Credit is granted back only after the receiver
/// returned from an event, `creditBatch` events at a time, so the events waiting on `queue`
/// never exceed the stream window however slow the receiver is.
///
/// A long-lived operation's stream outlives its connections: when one drops, the stream is
/// attached again to the next with `Resume{last_seq: the last seq handed to the receiver}`
/// (the server replays what came after), or with its `Open` again if the server never said
/// `Persisted`. Every event goes through `EventSequence`, so events of the old connection
/// still queued and the replay of the new one reach the receiver once each, in order.
final class ClientStream: Sendable {
    /// What happens to a stream whose connection was lost.
    enum LossOutcome: Sendable, Hashable {
        /// The stream ended (it failed, or had ended already).
        case ended
        /// Attach it to a connection again; `attempt` counts losses in a row without progress.
        case resume(attempt: Int)
    }

    private struct State {
        var connection: ClientConnection?
        var streamID: UInt64 = 0
        /// Bumped at each attachment: queued events of an earlier one do not earn credit on the
        /// current one.
        var generation = 0
        /// Events delivered since the last `Window`.
        var consumed: UInt32 = 0
        /// A terminal delivery (`complete`/`failed`) was queued; later ones are dropped.
        var isTerminated = false
        /// The operation cancelled: nothing more is delivered.
        var isCancelled = false
        /// Times the stream was handed to a connection since it was last attached anew (GoAway
        /// retries).
        var attempts = 0
        /// The events handed to the receiver.
        var sequence = EventSequence()
        /// The server has registered the operation (`Persisted` arrived, or the stream resumes
        /// a fetched operation): attach with `Resume`, never `Open`.
        var serverHasOperation: Bool
        /// `Open` frames handed to connections so far.
        var opensSent = 0
        /// Connections lost in a row with no `Persisted` or `Event` in between.
        var lossesWithoutProgress = 0
        /// `Resume`s refused with `OPERATION_ALREADY_ATTACHED` in a row; they wait for the
        /// server to notice an old connection is gone and do not count as losses.
        var alreadyAttachedRefusals = 0
        /// The last `Resume` was refused with `OPERATION_ALREADY_ATTACHED`.
        var refusedAsAttached = false
        /// Lost its connection and waits to be attached again.
        var isReattaching = false
        /// A plain `Cancel` of the server's long-lived operation is not confirmed yet: cancelled
        /// while reattaching (the next attachment sends `Resume` and then `Cancel`), or sent on
        /// a connection that may end before the server reads it. Until the server's `Complete`
        /// confirms it, a lost connection attaches the stream again only to say it once more.
        var owesCancel = false
        /// The cancellation only detaches from a long-lived operation (a timeout).
        var cancelDetaches = false
        /// The connection and stream ID the `Complete` arrived on (completion acknowledgement).
        var completedOn: (connection: ClientConnection, streamID: UInt64)?
        /// Deliveries handed to `queue` whose block has not finished.
        var deliveriesOnQueue = 0
    }

    let open: Wire.Open
    /// The records a modify-records `Open` saves, written ahead (see
    /// `FrameEncoder.encode(_:appendingRecordsToSave:into:maximumFrameBytes:)`); nil when
    /// `open` holds its whole request.
    let recordsToSave: Wire.EncodedRecords?
    let window: UInt32
    /// Resumed after a lost connection instead of failing.
    let isLongLived: Bool
    /// Credit for an event is earned when the receiver returns from it (true), or only when the
    /// receiver's owner calls `eventConsumed()` (false: it hands events on to a consumer of its
    /// own, e.g. an `AsyncSequence`, and the server must wait for that consumer).
    let creditsOnDelivery: Bool
    /// Deliveries may run on the connection's event loop (see ``init``).
    let deliversInPlace: (@Sendable ([StreamDelivery]) -> Bool)?
    private let queue: DispatchQueue
    private let receiver: @Sendable (StreamDelivery) -> Void
    private let state: NIOLockedValueBox<State>

    /// - parameter isLongLived: resume the operation after a lost connection.
    /// - parameter resuming: the operation exists on the server already (a fetched long-lived
    ///   operation): attach with `Resume` from the start.
    /// - parameter creditsOnDelivery: see `creditsOnDelivery`.
    /// - parameter deliversInPlace: when set, a read burst's deliveries for which it says true
    ///   run on the event loop that read them, as a `queue.sync` (which runs the block on the
    ///   calling thread when the queue is idle), if nothing handed to `queue` earlier is still
    ///   running: no hand-off to another thread. Only for a receiver whose work for those
    ///   deliveries never waits for the event loop (no asset download), and whose queue runs
    ///   nothing else that does (the operation's cancellation and timeout blocks do not).
    /// - parameter receiver: runs on `queue` for each delivery.
    init(
        open: Wire.Open,
        recordsToSave: Wire.EncodedRecords? = nil,
        window: UInt32,
        queue: DispatchQueue,
        isLongLived: Bool = false,
        resuming: Bool = false,
        creditsOnDelivery: Bool = true,
        deliversInPlace: (@Sendable ([StreamDelivery]) -> Bool)? = nil,
        receiver: @escaping @Sendable (StreamDelivery) -> Void
    ) {
        var open = open
        open.initialWindow = max(window, 1)
        self.open = open
        self.recordsToSave = recordsToSave
        self.window = max(window, 1)
        self.isLongLived = isLongLived || resuming
        self.creditsOnDelivery = creditsOnDelivery
        self.deliversInPlace = deliversInPlace
        self.queue = queue
        self.receiver = receiver
        self.state = NIOLockedValueBox(State(serverHasOperation: resuming))
    }

    /// Credit is returned in batches of this many events (half the window).
    var creditBatch: UInt32 { max(self.window / 2, 1) }

    var isCancelled: Bool { self.state.withLockedValue { $0.isCancelled } }

    /// Whether a connection should attach the stream: it is live, or it was cancelled while
    /// reattaching and the server still has to hear about it.
    var wantsAttachment: Bool { self.state.withLockedValue { !$0.isCancelled || $0.owesCancel } }

    /// Whether the cancellation, when the stream is cancelled, only detaches from the server's
    /// long-lived operation.
    var cancelDetaches: Bool { self.state.withLockedValue { $0.cancelDetaches } }

    /// The stream ID on its current connection (0 before it is opened).
    var streamID: UInt64 { self.state.withLockedValue { $0.streamID } }

    /// The seq of the last event handed to the receiver.
    var deliveredSeq: UInt64 { self.state.withLockedValue { $0.sequence.delivered } }

    /// Counts a hand-over to a connection; false once it has been tried too often.
    func beginAttempt(maximum: Int = 3) -> Bool {
        self.state.withLockedValue { state in
            state.attempts += 1
            return state.attempts <= maximum
        }
    }

    /// The frame that starts the stream on a connection: `Open`, or `Resume` from the last
    /// event delivered once the server has the operation. Event loop.
    func startFrame() -> Wire.Frame.Kind {
        self.state.withLockedValue { state in
            if state.serverHasOperation {
                return .resume(
                    Wire.Resume(operationID: self.open.operationID, lastSeq: state.sequence.delivered, initialWindow: self.window)
                )
            }
            state.opensSent += 1
            return .open(self.open)
        }
    }

    /// The connection opened the stream as `streamID`. Event loop. False when the operation
    /// was cancelled meanwhile: the connection then cancels the stream it just opened.
    func attached(to connection: ClientConnection, streamID: UInt64) -> Bool {
        self.state.withLockedValue { state in
            state.streamID = streamID
            state.consumed = 0
            state.generation += 1
            state.isReattaching = false
            // Cancelled: the connection says `Cancel` on the stream it just opened; an owed
            // cancel stays owed until the server confirms it.
            guard !state.isCancelled else { return false }
            state.connection = connection
            return true
        }
    }

    /// Queues `delivery` for the receiver. Called on the connection's event loop.
    func deliver(_ delivery: StreamDelivery) {
        self.deliver(contentsOf: [delivery])
    }

    /// Queues `deliveries` for the receiver, in order, with one hop to `queue` and one credit
    /// update for all of them (the frames of one read burst), or runs them in place (see
    /// `deliversInPlace`). Called on the connection's event loop.
    func deliver(contentsOf deliveries: [StreamDelivery]) {
        let inPlace = self.deliversInPlace?(deliveries) ?? false
        let admitted = self.state.withLockedValue { state -> (generation: Int, count: Int, inPlace: Bool)? in
            var count = 0
            for delivery in deliveries {
                guard !state.isTerminated else { break }
                count += 1
                switch delivery {
                case .complete:
                    state.isTerminated = true
                    state.completedOn = state.connection.map { ($0, state.streamID) }
                    state.connection = nil
                case .failed:
                    state.isTerminated = true
                    state.connection = nil
                case .persisted:
                    state.serverHasOperation = true
                    state.lossesWithoutProgress = 0
                    state.alreadyAttachedRefusals = 0
                case .event:
                    state.lossesWithoutProgress = 0
                }
            }
            guard count > 0 else { return nil }
            // In place only behind nothing still on the queue: the order holds, and the queue
            // is not running a receiver that could wait for this event loop.
            let runsInPlace = inPlace && state.deliveriesOnQueue == 0
            if !runsInPlace { state.deliveriesOnQueue += 1 }
            return (state.generation, count, runsInPlace)
        }
        guard let (generation, count, runsInPlace) = admitted else { return }
        if runsInPlace {
            self.queue.sync { self.run(deliveries.prefix(count), generation: generation) }
        } else {
            self.queue.async {
                self.run(deliveries.prefix(count), generation: generation)
                self.state.withLockedValue { $0.deliveriesOnQueue -= 1 }
            }
        }
    }

    /// Hands `deliveries` to the receiver, in order, and earns their credit. Queue.
    private func run(_ deliveries: ArraySlice<StreamDelivery>, generation: Int) {
        // Events consumed here, for credit: handed to the receiver (when it earns credit on
        // delivery) or dropped as duplicates.
        var consumed: UInt32 = 0
        defer {
            if consumed > 0 { self.consumed(consumed, generation: generation) }
        }
        for delivery in deliveries {
            if case .event(let event) = delivery {
                let admission = self.state.withLockedValue { state -> EventSequence.Admission? in
                    state.isCancelled ? nil : state.sequence.admit(event.seq)
                }
                switch admission {
                case nil:
                    return
                case .deliver:
                    break
                case .duplicate:
                    consumed += 1
                    continue
                case .gap(let expected):
                    self.endAfterGap(seq: event.seq, expected: expected)
                    return
                }
            } else if self.isCancelled {
                return
            }
            self.receiver(delivery)
            if case .event = delivery, self.creditsOnDelivery {
                consumed += 1
            }
        }
    }

    /// Ends the stream with `failure` unless it already ended.
    func fail(_ failure: ConnectionFailure) {
        self.deliver(.failed(failure))
    }

    /// The stream's connection is gone (dropped, or it could not be made). A long-lived
    /// operation is attached again later, at most `maximumAttempts` times in a row without
    /// progress; any other stream fails with `failure`. Event loop.
    func connectionLost(_ failure: ConnectionFailure, maximumAttempts: Int) -> LossOutcome {
        enum Decision {
            case ended
            case fail(ConnectionFailure)
            case resume(Int)
        }
        let decision = self.state.withLockedValue { state -> Decision in
            guard !state.isTerminated || state.owesCancel else { return .ended }
            state.connection = nil
            guard self.isLongLived, failure.code == .networkFailure else { return .fail(failure) }
            if state.refusedAsAttached {
                // Up to three times the losses allowed, with the same growing backoff: with the
                // defaults that outlasts the server's keepalive (about 50 s).
                state.refusedAsAttached = false
                state.alreadyAttachedRefusals += 1
                guard state.alreadyAttachedRefusals <= 3 * maximumAttempts else {
                    state.owesCancel = false
                    return .fail(
                        .network("\(failure.message); the operation stayed attached to another stream, gave up resuming it")
                    )
                }
                state.attempts = 0
                state.isReattaching = true
                return .resume(state.alreadyAttachedRefusals)
            }
            state.lossesWithoutProgress += 1
            guard state.lossesWithoutProgress <= maximumAttempts else {
                state.owesCancel = false
                return .fail(
                    .network("\(failure.message); gave up resuming the long-lived operation after \(maximumAttempts) attempts")
                )
            }
            state.attempts = 0
            state.isReattaching = true
            return .resume(state.lossesWithoutProgress)
        }
        switch decision {
        case .ended:
            return .ended
        case .fail(let failure):
            self.fail(failure)
            return .ended
        case .resume(let attempt):
            return .resume(attempt: attempt)
        }
    }

    /// A `Complete` refusing a repeated `Open` as a duplicate ID means the server registered the
    /// operation before the connection dropped (its `Persisted` was lost): the stream takes
    /// over with `Resume` instead of ending. Event loop.
    func isTakenOverAfterDuplicate(_ complete: Wire.Complete) -> Bool {
        guard self.isLongLived, complete.error?.code == .duplicateOperationID else { return false }
        return self.state.withLockedValue { state in
            guard !state.isTerminated, !state.serverHasOperation, state.opensSent > 1 else { return false }
            state.serverHasOperation = true
            state.connection = nil
            return true
        }
    }

    /// A `Complete` refusing `Resume` with `OPERATION_ALREADY_ATTACHED` means the server still
    /// has a stream following the operation, typically that of a connection that dropped
    /// without the server noticing yet (it does within its keepalive timeout): the stream tries
    /// again after the reconnect backoff, like after a dropped connection, instead of ending.
    /// Event loop.
    func isRetriedAfterAlreadyAttached(_ complete: Wire.Complete) -> Bool {
        guard self.isLongLived, complete.error?.code == .operationAlreadyAttached else { return false }
        return self.state.withLockedValue { state in
            guard !state.isTerminated || state.owesCancel, state.serverHasOperation else { return false }
            state.connection = nil
            state.refusedAsAttached = true
            return true
        }
    }

    /// Stops deliveries and tells the server: `Cancel` stops the operation; with `detach`, a
    /// long-lived operation keeps running on the server and only this stream stops.
    func cancel(reason: String, detach: Bool = false) {
        let (connection, streamID) = self.state.withLockedValue { state -> (ClientConnection?, UInt64) in
            defer {
                state.isCancelled = true
                state.isTerminated = true
                state.connection = nil
            }
            guard !state.isTerminated else { return (nil, 0) }
            state.cancelDetaches = detach
            if self.isLongLived, state.serverHasOperation, !detach, state.connection != nil || state.isReattaching {
                // Owed until the server confirms it. Between connections, the next one
                // resumes the operation only to cancel it; on a connection, the `Cancel` may
                // go into one that is already ending (its loss then reattaches the stream).
                state.owesCancel = true
            }
            return (state.connection, state.streamID)
        }
        connection?.cancel(streamID: streamID, reason: reason, detach: detach)
    }

    /// Whether the stream's plain `Cancel` waits for the server's confirming `Complete`.
    var owesCancel: Bool { self.state.withLockedValue { $0.owesCancel } }

    /// A `Complete` arrived on the stream after its `Cancel`: the server's operation ended
    /// (cancelled, or it had finished), nothing more is owed. Event loop.
    func cancelConfirmed() {
        self.state.withLockedValue { $0.owesCancel = false }
    }

    /// Tells the server the client has the long-lived operation's result
    /// (`Cancel{completion_acknowledged}` on the stream its `Complete` came on), so it is no
    /// longer listed. Best effort: nothing is sent if that connection is gone.
    func acknowledgeCompletion() {
        let target = self.state.withLockedValue { state -> (connection: ClientConnection, streamID: UInt64)? in
            defer { state.completedOn = nil }
            return state.completedOn
        }
        if let target {
            target.connection.acknowledgeCompletion(streamID: target.streamID)
        }
    }

    /// An event arrived out of order: the protocol is broken. The stream stops (detached, so a
    /// long-lived operation survives on the server) and the receiver gets the failure. Queue.
    private func endAfterGap(seq: UInt64, expected: UInt64) {
        let (connection, streamID) = self.state.withLockedValue { state -> (ClientConnection?, UInt64) in
            defer {
                // Nothing more reaches the receiver but the failure below.
                state.isCancelled = true
                state.isTerminated = true
                state.connection = nil
            }
            return (state.connection, state.streamID)
        }
        connection?.cancel(streamID: streamID, reason: "event seq \(seq) arrived, \(expected) expected", detach: self.isLongLived)
        self.receiver(
            .failed(
                ConnectionFailure(
                    code: .protocolViolation,
                    message: "the server skipped events: seq \(seq) arrived after \(expected - 1)"
                )
            )
        )
    }

    /// One event handed to the receiver has been consumed, for a stream that does not earn
    /// credit on delivery: credit goes back to the current attachment, `creditBatch` at a time.
    /// Any thread. Only for streams that are never re-attached (not long-lived): an event of an
    /// earlier attachment would otherwise earn credit on the current one.
    func eventConsumed() {
        let generation = self.state.withLockedValue { $0.generation }
        self.consumed(1, generation: generation)
    }

    private func consumed(_ count: UInt32, generation: Int) {
        let grant = self.state.withLockedValue { state -> (ClientConnection, UInt64, UInt32)? in
            guard state.generation == generation else { return nil }
            state.consumed += count
            guard state.consumed >= self.creditBatch, let connection = state.connection else { return nil }
            defer { state.consumed = 0 }
            return (connection, state.streamID, state.consumed)
        }
        if let (connection, streamID, credit) = grant {
            connection.grant(credit: credit, streamID: streamID)
        }
    }
}
