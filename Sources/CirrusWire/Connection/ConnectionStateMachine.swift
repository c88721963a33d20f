import NIOCore

/// The protocol rules of one Cirrus connection, as a value that is fed events and answers with
/// actions. It never touches a channel, so every rule is tested on its own.
///
/// It tracks the connection's phase (awaiting `Hello`, active, draining after `GoAway`, closed)
/// and each open stream as a ``StreamStateMachine``: the `seq` of its events (1, 2, 3 … with no
/// gap), its flow-control credit (an `Event` is never sent beyond what the client granted), and
/// its end by `Complete` or `Cancel`. It bounds what a peer can abuse: concurrent streams, the rate of cancelled
/// and refused streams, credit, and control frames queued for a peer that does not read. Time is passed
/// in, never read.
///
/// For example, on the server:
/// ```swift
/// var machine = ConnectionStateMachine(role: .server, configuration: .init(), now: .now())
/// switch machine.receive(frame, now: .now()) {
/// case .sendPong(let nonce): …
/// case .openStream(let id, let open): …
/// default: …
/// }
/// ```
public struct ConnectionStateMachine: Sendable {
    /// Which end of the connection this machine keeps.
    public enum Role: Sendable, Hashable {
        case server
        case client
    }

    /// The connection's phase.
    public enum Phase: Sendable, Hashable {
        /// The server waits for `Hello`; the client waits for `HelloAck`.
        case handshaking
        case active
        /// A `GoAway` was sent or received: no new streams; closes when the last one ends.
        case draining
        case closed
    }

    public let role: Role
    public internal(set) var configuration: Configuration
    public internal(set) var phase: Phase = .handshaking

    /// The streams not ended yet; an ended stream is removed.
    var streams: [UInt64: StreamStateMachine] = [:]
    /// The highest stream ID opened so far; stream IDs only go up.
    var highestStreamID: UInt64 = 0
    var handshakeDeadline: NIODeadline
    /// The last frame of any kind from the peer (keepalive).
    var lastReceive: NIODeadline
    /// The last frame from the peer other than Ping/Pong (idle timeout).
    var lastActivity: NIODeadline
    var outstandingPing: (nonce: UInt64, sentAt: NIODeadline)?
    var nextPingNonce: UInt64 = 1
    var isWritable = true
    var queuedControlFrames = 0
    /// Streams the peer may still abandon (cancel, or open beyond the limit and have refused)
    /// before it is disconnected.
    var abandonTokens: TokenBucket
    /// Client: whether `Hello` went out.
    var sentHello = false

    public init(role: Role, configuration: Configuration, now: NIODeadline) {
        self.role = role
        self.configuration = configuration
        self.handshakeDeadline = now + configuration.handshakeTimeout
        self.lastReceive = now
        self.lastActivity = now
        self.abandonTokens = TokenBucket(burst: configuration.cancelBurst, perSecond: configuration.cancelsPerSecond, now: now)
    }

    /// The number of streams currently open.
    public var openStreamCount: Int { self.streams.count }

    /// Whether `streamID` is open.
    public func isOpen(streamID: UInt64) -> Bool { self.streams[streamID] != nil }

    /// The events that may still be sent on `streamID` before the peer grants more.
    public func credit(streamID: UInt64) -> UInt64 { self.streams[streamID]?.credit ?? 0 }

    /// The last event `seq` sent (server) or received (client) on `streamID`; nil when the
    /// stream is not open.
    public func lastSeq(streamID: UInt64) -> UInt64? { self.streams[streamID]?.lastSeq }

    /// A new stream's state, with this connection's credit limit.
    func makeStream(initialWindow: UInt32, lastSeq: UInt64) -> StreamStateMachine {
        var stream = StreamStateMachine(maximumCredit: self.configuration.maximumStreamCredit)
        _ = stream.open(initialCredit: self.initialCredit(initialWindow), lastSeq: lastSeq)
        return stream
    }

    /// Draining and nothing left open: the connection can close.
    public var isDrained: Bool { self.phase == .draining && self.streams.isEmpty }
}
