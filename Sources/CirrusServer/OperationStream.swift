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
public final class OperationStream: Sendable {
    /// The client's stream ID.
    public let streamID: UInt64
    /// The operation's ID from `Open`.
    public let operationID: String
    private let eventLoop: any EventLoop
    private let handler: NIOLoopBound<ConnectionHandler>
    private let state: NIOLockedValueBox<State>

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
        self.eventLoop = eventLoop
        self.handler = NIOLoopBound(handler, eventLoop: eventLoop)
        self.state = NIOLockedValueBox(State(credit: credit))
    }

    /// Sends one callback of the operation.
    ///
    /// - throws: `CancellationError` when the client cancelled the operation or the connection
    ///   closed; the executor should stop.
    public func emit(_ payload: Wire.Event.Payload) async throws {
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
                let handler = self.handler
                let streamID = self.streamID
                self.eventLoop.execute { handler.value.drain(streamID: streamID) }
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
        let streamID = self.streamID
        let handler = self.handler
        self.eventLoop.execute {
            handler.value.complete(streamID: streamID, completion: completion)
        }
    }
}
