import CirrusStore
import CirrusWire
import NIOConcurrencyHelpers
import NIOCore

/// The server end of one operation's stream, handed to an ``OperationExecutor``: each
/// ``emit(_:)`` becomes one `Event` with the next `seq`.
///
/// The stream mirrors the client's flow-control credit. While there is credit, `emit` only
/// queues the event and returns; the connection's event loop writes everything queued in one
/// go. With no credit left, `emit` waits until the client grants more, so a slow client slows
/// the operation down instead of making the server buffer its events: at most the granted
/// credit is ever queued.
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

    private struct Connection: Sendable {
        let eventLoop: any EventLoop
        let handler: NIOLoopBound<ConnectionHandler>
    }

    private struct State {
        var credit: UInt64
        var outbox: [Wire.Event.Payload] = []
        var drainScheduled = false
        var waiter: CheckedContinuation<Void, any Error>?
        var isClosed = false
    }

    private enum EmitAction {
        case queued
        case queuedScheduleDrain
        case wait
        case closed
    }

    init(streamID: UInt64, operationID: String, credit: UInt64, handler: ConnectionHandler, eventLoop: any EventLoop) {
        self.streamID = streamID
        self.operationID = operationID
        self.connection = Connection(eventLoop: eventLoop, handler: NIOLoopBound(handler, eventLoop: eventLoop))
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

    /// Sends one callback of the operation.
    ///
    /// - throws: `CancellationError` when the client cancelled the operation or the connection
    ///   closed; the executor should stop.
    public func emit(_ payload: Wire.Event.Payload) async throws {
        guard let connection = self.connection else {
            try Task.checkCancellation()
            _ = try await self.run?.journal([payload], checkpoint: nil)
            return
        }
        while true {
            try Task.checkCancellation()
            let action = self.state.withLockedValue { state -> EmitAction in
                if state.isClosed { return .closed }
                guard state.credit > 0 else { return .wait }
                state.credit -= 1
                state.outbox.append(payload)
                if state.drainScheduled { return .queued }
                state.drainScheduled = true
                return .queuedScheduleDrain
            }
            switch action {
            case .queued:
                return
            case .queuedScheduleDrain:
                let handler = connection.handler
                let streamID = self.streamID
                connection.eventLoop.execute { handler.value.drain(streamID: streamID) }
                return
            case .closed:
                throw CancellationError()
            case .wait:
                try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                    let resumeNow = self.state.withLockedValue { state -> Bool in
                        if state.isClosed || state.credit > 0 { return true }
                        state.waiter = continuation
                        return false
                    }
                    if resumeNow { continuation.resume() }
                }
            }
        }
    }

    // MARK: - Called by the connection handler, on its event loop

    /// Takes what `emit` queued.
    func takeQueued() -> [Wire.Event.Payload] {
        self.state.withLockedValue { state in
            state.drainScheduled = false
            defer { state.outbox.removeAll(keepingCapacity: true) }
            return state.outbox
        }
    }

    /// The client granted `credit` more events.
    func grant(_ credit: UInt64) {
        let waiter = self.state.withLockedValue { state in
            state.credit += credit
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }

    /// The stream ended (cancelled, connection closed): `emit` throws from now on.
    func close() {
        let waiter = self.state.withLockedValue { state in
            state.isClosed = true
            state.outbox.removeAll()
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(throwing: CancellationError())
    }

    func complete(_ completion: OperationCompletion) {
        guard let connection = self.connection else { return }
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
