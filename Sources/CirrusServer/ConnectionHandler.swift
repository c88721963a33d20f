import CirrusStore
import CirrusTLS
import CirrusWire
import Logging
import NIOConcurrencyHelpers
import NIOCore

/// Asked of every connection when the server shuts down gracefully: say `GoAway`, let open
/// streams finish, then close.
struct GracefulShutdownEvent: Sendable {}

/// Asked of every connection when an administrator disabled a user or a bearer token was
/// revoked or expired: the connections it matches close with `NOT_AUTHENTICATED`.
struct CloseUserEvent: Sendable {
    enum Match: Sendable {
        case user(String)
        case token(String)
    }

    let match: Match
    let reason: String

    func matches(_ identity: ClientIdentity) -> Bool {
        switch match {
        case .user(let name): identity.userRecordName == name
        case .token(let id): identity.tokenID == id
        }
    }
}

/// The server side of one connection, in the channel pipeline: framing, flow control and
/// back-pressure. It feeds frames through the ``ConnectionStateMachine`` (which keeps each
/// stream's ``StreamStateMachine``, the one place a stream's credit is counted) and carries out
/// what it answers. Operations run in async code: the shared ``OperationRouter`` starts each on
/// a task of its own, and it reaches the connection only through its ``OperationStream``.
///
/// By aspect: authentication in `ConnectionHandler+Handshake.swift`, acting on the machine's
/// answers in `+Actions`, the operations' streams in `+Operations`, writing their events under
/// back-pressure in `+Drain`, coalesced writes and flushes in `+Writing`, timers and shutdown
/// in `+Timers`.
///
/// Writes are coalesced: frames written while a read burst is handled are flushed once at
/// `channelReadComplete`. While the peer does not read (the channel is not writable), this
/// handler stops reading from it and stops taking events from its operations, which then wait
/// in `emit` with at most one event queued each: a peer that never reads holds the socket's
/// write buffer and a few events, whatever credit it granted. The same pause applies while the
/// server's ``OutboundBudget`` (bytes waiting for every socket together) is spent and this
/// connection holds more than its fair share of it.
final class ConnectionHandler: ChannelDuplexHandler {
    typealias InboundIn = Wire.Frame
    typealias OutboundIn = Wire.Frame
    typealias OutboundOut = OutboundFrame

    /// The server's configuration, shared by every connection instead of copied into each.
    let shared: SharedServerConfiguration
    var configuration: ServerConfiguration { self.shared.configuration }
    /// Carries the connection's metadata (`connection`, `peer`, and `user` once authenticated).
    var logger: Logger
    /// Counts this connection's bytes against the server's outbound budget (below TLS).
    let outbound: OutboundAccountingHandler?
    var machine: ConnectionStateMachine
    var peerCertificate: TLSPeerCertificate?
    var identity: ClientIdentity?
    /// Set once ``PeerLimits`` counted this connection for its user; given back at the end.
    var admittedUser: String?
    /// This connection's place on its event loop's ``ConnectionTicker``.
    var timer: ConnectionTicker.Registration?
    var needsFlush = false
    var inReadBurst = false
    private var pendingRead = false
    var flushScheduled = false
    var isClosing = false
    /// Events written since the last flush, for ``ServerMetrics`` (counted once per flush).
    var eventsSinceFlush = 0
    /// Set once TLS completed its handshake: a TLS error before then is a failed handshake.
    private var tlsEstablished = false
    /// Set while the handler is in a pipeline; operations write through it.
    var context: ChannelHandlerContext?
    /// Runs small operations on this connection's event loop (``OperationRouter/start``).
    var loopTaskExecutor: EventLoopTaskExecutor?
    /// Operations running on this connection, by stream ID.
    var operations: [UInt64: RunningOperation] = [:] {
        didSet { self.openStreams.withLockedValue { $0 = self.operations.count } }
    }
    /// `operations.count`, for the streams' batch sizes (read off the event loop).
    let openStreams = NIOLockedValueBox(0)
    /// Streams that delivered a long-lived operation's `Complete`, for its acknowledgement.
    var completedLongLived = CompletedLongLivedStreams()
    /// Production is paused: the socket is not writable or the outbound budget is spent.
    var isPaused = false
    /// Streams whose queued events (and maybe `Complete`) wait for the pause to end.
    var deferredDrains = DeferredDrains()

    /// One operation running on a stream. Its seqs and credit are the machine's.
    struct RunningOperation {
        let stream: OperationStream
        var task: Task<Void, Never>?
        /// Set once `Persisted` went out: the stream follows this long-lived operation.
        var longLived: LongLivedOperationKey?
        /// Lets another stream attach to that operation; called as soon as this stream stops.
        var releaseFollower: (@Sendable () -> Void)?
    }

    /// The encoder right below this handler: it applies the negotiated `max_frame_bytes` and
    /// says which frame it refused as too large. Nil in tests that encode nothing.
    let encoder: ConnectionFrameEncoder?

    init(
        configuration: SharedServerConfiguration, outbound: OutboundAccountingHandler? = nil, logger: Logger,
        encoder: ConnectionFrameEncoder? = nil
    ) {
        self.shared = configuration
        self.outbound = outbound
        self.logger = logger
        self.encoder = encoder
        self.machine = ConnectionStateMachine(role: .server, configuration: configuration.configuration.connection, now: .now())
    }

    /// A handler with a configuration of its own (tests).
    convenience init(
        configuration: ServerConfiguration, outbound: OutboundAccountingHandler? = nil, logger: Logger,
        encoder: ConnectionFrameEncoder? = nil
    ) {
        self.init(
            configuration: SharedServerConfiguration(configuration), outbound: outbound, logger: logger, encoder: encoder)
    }

    // MARK: - Life cycle

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        self.machine = ConnectionStateMachine(role: .server, configuration: self.configuration.connection, now: .now())
        self.timer = ConnectionTicker.register(on: context.eventLoop, every: self.configuration.timerInterval) {
            self.timerFired(context: context)
        }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.timer?.cancel()
        self.timer = nil
        self.stopAllOperations()
        self.releaseUser()
        self.context = nil
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.timer?.cancel()
        self.timer = nil
        self.stopAllOperations()
        self.releaseUser()
        context.fireChannelInactive()
    }

    private func releaseUser() {
        if let user = self.admittedUser {
            self.admittedUser = nil
            self.configuration.peerLimits.release(user: user)
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let handshake = event as? TLSHandshakeCompleted {
            self.tlsEstablished = true
            self.peerCertificate = handshake.peerCertificate
        }
        context.fireUserInboundEventTriggered(event)
    }

    func triggerUserOutboundEvent(context: ChannelHandlerContext, event: Any, promise: EventLoopPromise<Void>?) {
        if let event = event as? CloseUserEvent {
            promise?.succeed(())
            if let identity = self.identity, event.matches(identity), !self.isClosing {
                self.logger.info("closing a connection of \(identity.userRecordName): \(event.reason)")
                self.closeWithError(code: .notAuthenticated, message: event.reason, context: context)
            }
            return
        }
        guard event is GracefulShutdownEvent else {
            context.triggerUserOutboundEvent(event, promise: promise)
            return
        }
        promise?.succeed(())
        self.beginGracefulShutdown(context: context)
    }

    // MARK: - Reading

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = self.unwrapInboundIn(data)
        self.inReadBurst = true
        self.handle(self.machine.receive(frame, now: .now()), context: context)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        self.inReadBurst = false
        self.flushIfNeeded(context: context)
        context.fireChannelReadComplete()
    }

    func read(context: ChannelHandlerContext) {
        if context.channel.isWritable {
            context.read()
        } else {
            self.pendingRead = true
        }
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        let writable = context.channel.isWritable
        self.machine.writabilityChanged(isWritable: writable)
        self.updateProduction(context: context)
        if writable, self.pendingRead {
            self.pendingRead = false
            context.read()
        }
        context.fireChannelWritabilityChanged()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        switch error {
        case let error as WireError:
            let code: Wire.ErrorCode = error.code == .frameTooLarge ? .frameTooLarge : .malformedFrame
            self.logger.info("closing connection: \(error)")
            self.closeWithError(code: code, message: error.message, context: context)
        case let error as TLSError:
            if !self.tlsEstablished {
                self.configuration.metrics?.tlsHandshakeFailed(error)
            }
            self.logger.info("TLS failed: \(error)")
            context.close(promise: nil)
        default:
            self.logger.debug("connection error: \(error)")
            context.close(promise: nil)
        }
    }
}
