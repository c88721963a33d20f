import CirrusWire
import NIOCore

/// The server end of one operation's stream, handed to an ``OperationExecutor``: each
/// ``emit(_:)`` becomes one `Event` with the next `seq`.
///
/// `emit` returns once the event is written. When the client has no credit left for this
/// stream it waits until a `Window` arrives, so a slow client slows the operation down
/// instead of making the server buffer its events.
public final class OperationStream: Sendable {
    /// The client's stream ID.
    public let streamID: UInt64
    /// The operation's ID from `Open`.
    public let operationID: String
    private let eventLoop: any EventLoop
    private let handler: NIOLoopBound<ConnectionHandler>

    init(streamID: UInt64, operationID: String, handler: ConnectionHandler, eventLoop: any EventLoop) {
        self.streamID = streamID
        self.operationID = operationID
        self.eventLoop = eventLoop
        self.handler = NIOLoopBound(handler, eventLoop: eventLoop)
    }

    /// Sends one callback of the operation.
    ///
    /// - throws: `CancellationError` when the client cancelled the operation or the connection
    ///   closed; the executor should stop.
    public func emit(_ payload: Wire.Event.Payload) async throws {
        let streamID = self.streamID
        let handler = self.handler
        let eventLoop = self.eventLoop
        try await eventLoop.flatSubmit {
            handler.value.emit(streamID: streamID, payload: payload, on: eventLoop)
        }.get()
    }

    func complete(_ completion: OperationCompletion) {
        let streamID = self.streamID
        let handler = self.handler
        self.eventLoop.execute {
            handler.value.complete(streamID: streamID, completion: completion)
        }
    }
}
