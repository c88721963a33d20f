import NIOCore

extension ConnectionStateMachine {
    /// The limits and timers one connection runs under. Every number a peer could push on is
    /// bounded here.
    public struct Configuration: Sendable, Hashable {
        /// The protocol version this side speaks.
        public var protocolVersion: UInt32 = Wire.protocolVersion
        /// Streams that may be open at once; an `Open` beyond this is refused on its stream.
        public var maximumConcurrentStreams: Int = 128
        /// Time the peer has after the TLS handshake to complete `Hello`/`HelloAck`.
        public var handshakeTimeout: TimeAmount = .seconds(10)
        /// A connection with no open stream and no frame received for this long is closed.
        public var idleTimeout: TimeAmount = .seconds(300)
        /// After this long without a frame from the peer, a `Ping` is sent.
        public var keepaliveInterval: TimeAmount = .seconds(30)
        /// A `Ping` unanswered for this long closes the connection.
        public var keepaliveTimeout: TimeAmount = .seconds(20)
        /// Event credit of a stream whose `Open`/`Resume` asks for 0 (sent as
        /// `Limits.initial_stream_window`).
        public var initialStreamWindow: UInt32 = 64
        /// Event credit a stream may have outstanding. A `Window` that would raise it above this
        /// is `FLOW_CONTROL_VIOLATION` (frame.proto: above 2^32-1); an initial window never
        /// exceeds it (a `uint32`).
        public var maximumStreamCredit: UInt64 = UInt64(UInt32.max)
        /// Streams the peer may cancel, or have refused for opening too many, in a burst before
        /// the rate applies (rapid open-and-cancel, open floods).
        public var cancelBurst: Int = 200
        /// Sustained stream cancellations and refusals per second the peer may cause.
        public var cancelsPerSecond: Int = 100
        /// Control frames (`Pong`s) queued for a peer that does not read before it is dropped.
        public var maximumQueuedControlFrames: Int = 64

        public init() {}
    }
}
