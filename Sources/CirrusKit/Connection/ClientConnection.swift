import CirrusWire
import NIOCore

/// A connected, authenticated Cirrus connection: the channel and its protocol handler. Every
/// method may be called from any thread; the work runs on the channel's event loop.
final class ClientConnection: Sendable {
    let channel: any Channel
    /// The server's answer to `Hello`: the user and the effective limits.
    let helloAck: Wire.HelloAck
    private let handler: NIOLoopBound<ClientConnectionHandler>

    init(channel: any Channel, handler: NIOLoopBound<ClientConnectionHandler>, helloAck: Wire.HelloAck) {
        self.channel = channel
        self.handler = handler
        self.helloAck = helloAck
    }

    var eventLoop: any EventLoop { self.channel.eventLoop }

    /// Opens `stream` on this connection, on its event loop, then tells `opened` whether it
    /// did: false when the connection no longer takes new streams (draining or closed); the
    /// caller then uses another connection. (A callback, not a future: every operation opens
    /// a stream, and a future, its promise and their callbacks are several allocations each.)
    func open(_ stream: ClientStream, then opened: @escaping @Sendable (Bool) -> Void) {
        self.eventLoop.execute {
            opened(self.handler.value.open(stream, on: self))
        }
    }

    func grant(credit: UInt32, streamID: UInt64) {
        self.eventLoop.execute {
            self.handler.value.grant(credit: credit, streamID: streamID)
        }
    }

    func cancel(streamID: UInt64, reason: String, detach: Bool = false) {
        self.eventLoop.execute {
            self.handler.value.cancel(streamID: streamID, reason: reason, detach: detach)
        }
    }

    /// Sends `Cancel{completion_acknowledged}` on `streamID`, whose `Complete` arrived.
    func acknowledgeCompletion(streamID: UInt64) {
        self.eventLoop.execute {
            self.handler.value.acknowledgeCompletion(streamID: streamID)
        }
    }

    /// Round trip of a `Ping` on stream 0.
    func ping() -> EventLoopFuture<Void> {
        self.eventLoop.flatSubmit {
            self.handler.value.ping()
        }
    }

    /// Says `GoAway` and closes once open streams have ended.
    func close() {
        self.eventLoop.execute {
            self.handler.value.goAway()
        }
    }
}
