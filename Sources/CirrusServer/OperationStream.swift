import CirrusStore
import CirrusWire
import NIOConcurrencyHelpers
import NIOCore

/// The server end of one operation's stream, handed to an ``OperationExecutor``: each
/// ``emit(_:)`` becomes one `Event` with the next `seq`.
///
/// The connection's state machine counts the client's flow-control credit (its
/// ``StreamStateMachine``); the stream holds only what of it may still be queued, re-derived
/// from the machine on every grant (``creditChanged(to:)``). While there is credit, `emit` only
/// queues the event and returns; the connection's event loop writes everything queued in one
/// go. With no credit left, `emit` waits until the client grants more, so a slow client slows
/// the operation down instead of making the server buffer its events.
///
/// Credit is not a memory budget: a peer may grant a million events and never read. So `emit`
/// also waits while ``maximumQueuedEvents`` are queued, and while the connection is paused
/// (its socket is not writable, or the server's outbound budget is spent) and an event is
/// already queued: a stalled connection holds at most one queued event per stream, whatever
/// credit its peer granted.
///
/// A long-lived operation runs detached from any connection: its stream is its journal
/// (``LongLivedRun``), and `emit` appends to it without waiting for anyone; the connections
/// following the operation read the journal at their own pace.
public final class OperationStream: Sendable {
    /// The client's stream ID (0 for the journal of a detached long-lived operation).
    public let streamID: UInt64
    /// The operation's ID from `Open`.
    public let operationID: String
    private let connection: Connection?
    /// Set when this stream is the journal of a long-lived operation.
    let run: LongLivedRun?
    private let state: NIOLockedValueBox<State>

    /// Events queued for the event loop at most, whatever the credit: the batch one drain writes.
    static let maximumQueuedEvents = 64

    private struct Connection: Sendable {
        let eventLoop: any EventLoop
        let handler: NIOLoopBound<ConnectionHandler>
        /// Streams open on the connection now, kept by its handler.
        let openStreams: NIOLockedValueBox<Int>
    }

    /// Items the executors of one connection should hold in memory at once, shared among its
    /// streams (see ``batchLimit(_:)``).
    public static let connectionBatchBudget = 4_096
    /// The smallest batch ``batchLimit(_:)`` suggests.
    public static let minimumBatch = 16

    /// One event waiting for the event loop: a payload to encode, or an event already in wire
    /// format (a journaled callback replayed as stored).
    enum QueuedEvent: Sendable {
        case payload(Wire.Event.Payload)
        /// A payload already in wire format (a change feed's record as stored).
        case encodedPayload(Wire.EncodedPayload)
        case encoded(Wire.EncodedEvent)
        /// A `DownloadAsset` chunk whose content goes out of `data` as it is.
        case assetChunk(offset: UInt64, data: ByteBuffer)
    }

    private struct State {
        /// The machine's credit for the stream, less the events queued since it was read.
        var credit: UInt64
        var outbox: [QueuedEvent] = []
        var drainScheduled = false
        /// The operation's end, handed over with the scheduled drain (see ``complete(_:)``).
        var completion: OperationCompletion?
        var waiter: CheckedContinuation<Void, any Error>?
        var isClosed = false
        /// The connection stopped taking events (see ``pause()``).
        var isPaused = false

        /// Whether one more event may be queued now.
        var canQueue: Bool {
            self.credit > 0 && self.outbox.count < OperationStream.maximumQueuedEvents
                && !(self.isPaused && !self.outbox.isEmpty)
        }

        /// How many events may be queued now at once (when ``canQueue``): what the credit and
        /// the outbox allow, and only one while paused.
        var roomNow: Int {
            if self.isPaused { return 1 }
            return Int(min(self.credit, UInt64(OperationStream.maximumQueuedEvents - self.outbox.count)))
        }

        /// Whether the queue has room once the outbox is emptied (asked while taking it).
        var canQueueAfterTaking: Bool {
            self.credit > 0
        }

        mutating func takeWaiter() -> CheckedContinuation<Void, any Error>? {
            defer { self.waiter = nil }
            return self.waiter
        }
    }

    private enum EmitAction {
        case queued
        case queuedScheduleDrain
        case wait
        case closed
    }

    init(
        streamID: UInt64, operationID: String, credit: UInt64, handler: ConnectionHandler, eventLoop: any EventLoop,
        openStreams: NIOLockedValueBox<Int>
    ) {
        self.streamID = streamID
        self.operationID = operationID
        self.connection = Connection(
            eventLoop: eventLoop, handler: NIOLoopBound(handler, eventLoop: eventLoop), openStreams: openStreams)
        self.run = nil
        self.state = NIOLockedValueBox(State(credit: credit))
    }

    /// The stream of a detached long-lived operation: every event goes to its journal.
    init(run: LongLivedRun) {
        self.streamID = 0
        self.operationID = run.key.operationID
        self.connection = nil
        self.run = run
        self.state = NIOLockedValueBox(State(credit: 0))
    }

    /// How many items (records, changes) an executor should read into memory for its next
    /// batch: `limit`, or less when many streams share the connection. A peer that opens many
    /// streams and stops reading leaves each waiting with its last batch in memory; sharing
    /// ``connectionBatchBudget`` among the streams bounds that per connection, whatever the
    /// peer does. A detached long-lived operation gets `limit`.
    ///
    /// For example, a change feed reads `stream.batchLimit(400)` changes at a time.
    public func batchLimit(_ limit: Int) -> Int {
        guard let connection = self.connection else { return limit }
        let streams = max(1, connection.openStreams.withLockedValue { $0 })
        return min(limit, max(Self.minimumBatch, Self.connectionBatchBudget / streams))
    }

    /// Sends one callback of the operation.
    ///
    /// - throws: `CancellationError` when the client cancelled the operation or the connection
    ///   closed; the executor should stop.
    public func emit(_ payload: Wire.Event.Payload) async throws {
        try await self.emit(contentsOf: [payload])
    }

    /// Sends `payloads` as consecutive callbacks of the operation, in order: what ``emit(_:)``
    /// does for each, with one lock and one hand-off to the event loop for as many events as the
    /// credit and the outbox take at once (a batch of a change feed or a query page).
    ///
    /// For example: `try await stream.emit(contentsOf: page.map { .query(…) })`.
    ///
    /// - throws: `CancellationError` when the client cancelled the operation or the connection
    ///   closed; the executor should stop. Events before the cancellation may have been sent.
    public func emit(contentsOf payloads: [Wire.Event.Payload]) async throws {
        guard self.connection != nil else {
            try Task.checkCancellation()
            _ = try await self.run?.journal(payloads, checkpoint: nil)
            return
        }
        try await self.queue(payloads.map(QueuedEvent.payload))
    }

    /// An event's payload for ``emit(payloads:)``: a message, or one already in wire format.
    public enum Payload: Sendable {
        case message(Wire.Event.Payload)
        case encoded(Wire.EncodedPayload)

        /// The payload as a message, one in wire format decoded.
        ///
        /// - throws: ``WireError`` `.malformedMessage`.
        func decoded() throws(WireError) -> Wire.Event.Payload {
            switch self {
            case .message(let message): message
            case .encoded(let encoded): try encoded.decoded()
            }
        }
    }

    /// Sends `payloads` as ``emit(contentsOf:)`` does, those already in wire format as they are
    /// (a detached long-lived operation decodes them to journal them).
    ///
    /// - throws: as ``emit(contentsOf:)``; a payload in wire format that does not decode, for a
    ///   detached long-lived operation: ``WireError``.
    nonisolated(nonsending) public func emit(payloads: [Payload]) async throws {
        guard self.connection != nil else {
            try await self.emit(contentsOf: payloads.map { payload throws(WireError) in try payload.decoded() })
            return
        }
        try await self.queue(
            payloads.map { payload in
                switch payload {
                case .message(let message): .payload(message)
                case .encoded(let encoded): .encodedPayload(encoded)
                }
            })
    }

    /// Sends journaled events as they are stored, in order: a replay, whose events keep the seqs
    /// they were journaled with (the connection checks each against the stream's next seq).
    ///
    /// - throws: as ``emit(contentsOf:)``.
    func emit(encoded events: [Wire.EncodedEvent]) async throws {
        guard self.connection != nil else {
            // A detached operation journals what it emits; it never replays into itself.
            throw CancellationError()
        }
        try await self.queue(events.map(QueuedEvent.encoded))
    }

    nonisolated(nonsending) private func queue(_ payloads: [QueuedEvent]) async throws {
        guard let connection = self.connection else { throw CancellationError() }
        var next = payloads.startIndex
        while next < payloads.endIndex {
            try Task.checkCancellation()
            let action = self.state.withLockedValue { state -> EmitAction in
                if state.isClosed { return .closed }
                guard state.canQueue else { return .wait }
                let room = state.roomNow
                let end = next + min(payloads.endIndex - next, room)
                state.credit -= UInt64(end - next)
                state.outbox.append(contentsOf: payloads[next..<end])
                next = end
                if state.drainScheduled { return .queued }
                state.drainScheduled = true
                return .queuedScheduleDrain
            }
            switch action {
            case .queued:
                continue
            case .queuedScheduleDrain:
                let handler = connection.handler
                let streamID = self.streamID
                connection.eventLoop.execute { handler.value.drain(streamID: streamID) }
                continue
            case .closed:
                throw CancellationError()
            case .wait:
                try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                    let resumeNow = self.state.withLockedValue { state -> Bool in
                        if state.isClosed || state.canQueue { return true }
                        state.waiter = continuation
                        return false
                    }
                    if resumeNow { continuation.resume() }
                }
            }
        }
    }

    /// Sends one `DownloadAsset` chunk event (`AssetChunk{offset, data}`), as ``emit(_:)``
    /// would, but with the content written to the socket from `data` itself: a file chunk
    /// read into a buffer is not copied again to be encoded.
    ///
    /// - throws: as ``emit(_:)``.
    public func emitAssetChunk(offset: UInt64, data: ByteBuffer) async throws {
        guard self.connection != nil else {
            let chunk = Wire.AssetChunk(offset: offset, data: Array(data.readableBytesView))
            try await self.emit(.downloadAsset(Wire.DownloadAssetEvent(callback: .chunk(chunk))))
            return
        }
        try await self.queue([.assetChunk(offset: offset, data: data)])
    }

    // MARK: - Called by the connection handler, on its event loop

    /// Takes what `emit` queued, and the operation's completion when it ended with them (to
    /// send after them), and lets a producer waiting for room go on.
    func takeQueued() -> (events: [QueuedEvent], completion: OperationCompletion?) {
        let (queued, completion, waiter) = self.state.withLockedValue { state in
            state.drainScheduled = false
            defer {
                state.outbox.removeAll(keepingCapacity: true)
                state.completion = nil
            }
            return (state.outbox, state.completion, state.canQueueAfterTaking ? state.takeWaiter() : nil)
        }
        waiter?.resume()
        return (queued, completion)
    }

    /// Whether `emit` queued events that no drain has taken yet.
    var hasQueued: Bool {
        self.state.withLockedValue { !$0.outbox.isEmpty }
    }

    /// The client granted more events: the stream's credit in the connection's state machine is
    /// now `credit`, of which the events queued and not yet taken are already spent.
    func creditChanged(to credit: UInt64) {
        let waiter = self.state.withLockedValue { state in
            state.credit = credit - min(credit, UInt64(state.outbox.count))
            return state.takeWaiter()
        }
        waiter?.resume()
    }

    /// The connection cannot take events now (its socket is not writable, or the server's
    /// outbound budget is spent): once one event is queued, `emit` waits for ``resume()``.
    func pause() {
        self.state.withLockedValue { $0.isPaused = true }
    }

    /// The connection takes events again.
    func resume() {
        let waiter = self.state.withLockedValue { state in
            state.isPaused = false
            return state.canQueue ? state.takeWaiter() : nil
        }
        waiter?.resume()
    }

    /// The stream ended (cancelled, connection closed): `emit` throws from now on.
    func close() {
        let waiter = self.state.withLockedValue { state in
            state.isClosed = true
            state.outbox.removeAll()
            return state.takeWaiter()
        }
        waiter?.resume(throwing: CancellationError())
    }

    func complete(_ completion: OperationCompletion) {
        guard let connection = self.connection else { return }
        // A drain of its last events is on its way to the event loop: the completion goes
        // with it, so the events and the `Complete` take one hand-off and share one flush
        // (a one-record fetch's event and `Complete` woke the loop twice and went out as two
        // TLS records).
        let handedOver = self.state.withLockedValue { state -> Bool in
            guard state.drainScheduled, !state.isClosed else { return false }
            state.completion = completion
            return true
        }
        if handedOver { return }
        let streamID = self.streamID
        let handler = connection.handler
        connection.eventLoop.execute {
            handler.value.complete(streamID: streamID, completion: completion)
        }
    }

    /// Sends `Persisted` on the stream, first thing, then runs `then` on the connection's event
    /// loop; false (and `then` does not run) when the stream already ended: the client
    /// cancelled or went away before it could hear that the operation is durable. `release`
    /// runs when the stream stops following the operation (on the event loop).
    func persisted(
        key: LongLivedOperationKey, release: @escaping @Sendable () -> Void, then: @escaping @Sendable () -> Void
    ) async -> Bool {
        guard let connection = self.connection else { return false }
        let streamID = self.streamID
        let handler = connection.handler
        let sent = try? await connection.eventLoop.submit {
            handler.value.persisted(streamID: streamID, key: key, release: release, then: then)
        }.get()
        return sent ?? false
    }
}
