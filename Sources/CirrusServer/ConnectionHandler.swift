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

/// The server side of one connection: feeds frames through the connection state machine and
/// carries out what it answers. Protocol work only: operations run on tasks of their own
/// (``OperationExecutor``) and reach the connection through their ``OperationStream``.
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
    private let shared: SharedServerConfiguration
    private var configuration: ServerConfiguration { self.shared.configuration }
    /// Carries the connection's metadata (`connection`, `peer`, and `user` once authenticated).
    private var logger: Logger
    /// Counts this connection's bytes against the server's outbound budget (below TLS).
    private let outbound: OutboundAccountingHandler?
    private var machine: ConnectionStateMachine
    private var peerCertificate: TLSPeerCertificate?
    private var identity: ClientIdentity?
    /// Set once ``PeerLimits`` counted this connection for its user; given back at the end.
    private var admittedUser: String?
    /// This connection's place on its event loop's ``ConnectionTicker``.
    private var timer: ConnectionTicker.Registration?
    private var needsFlush = false
    private var inReadBurst = false
    private var pendingRead = false
    private var flushScheduled = false
    private var isClosing = false
    /// Events written since the last flush, for ``ServerMetrics`` (counted once per flush).
    private var eventsSinceFlush = 0
    /// Set once TLS completed its handshake: a TLS error before then is a failed handshake.
    private var tlsEstablished = false
    /// Set while the handler is in a pipeline; operations write through it.
    private var context: ChannelHandlerContext?
    /// Operations running on this connection, by stream ID.
    private var operations: [UInt64: RunningOperation] = [:] {
        didSet { self.openStreams.withLockedValue { $0 = self.operations.count } }
    }
    /// `operations.count`, for the streams' batch sizes (read off the event loop).
    private let openStreams = NIOLockedValueBox(0)
    /// Streams that delivered a long-lived operation's `Complete`: a `Cancel` with
    /// `completion_acknowledged` on one drops the operation. At most
    /// ``maximumAcknowledgeable``, the oldest forgotten first.
    private var acknowledgeable: [UInt64: LongLivedOperationKey] = [:]
    private static let maximumAcknowledgeable = 1_024
    /// Production is paused: the socket is not writable or the outbound budget is spent.
    private var isPaused = false
    /// Streams whose queued events (and maybe `Complete`) wait for the pause to end, in the
    /// order they asked to be drained.
    private var deferredDrains: [UInt64] = []
    private var deferredCompletions: [UInt64: OperationCompletion] = [:]

    private struct RunningOperation {
        let stream: OperationStream
        var nextSeq: UInt64 = 1
        var task: Task<Void, Never>?
        /// Set once `Persisted` went out: the stream follows this long-lived operation.
        var longLived: LongLivedOperationKey?
        /// Lets another stream attach to that operation; called as soon as this stream stops.
        var releaseFollower: (@Sendable () -> Void)?
    }

    /// The encoder right below this handler: it applies the negotiated `max_frame_bytes` and
    /// says which frame it refused as too large. Nil in tests that encode nothing.
    private let encoder: ConnectionFrameEncoder?

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

    // MARK: - Back-pressure

    /// Pauses the operations while the socket is not writable or the server's outbound budget
    /// is spent; resumes them, after writing what waited, when both allow it again.
    private func updateProduction(context: ChannelHandlerContext) {
        let shouldPause = !context.channel.isWritable || (self.outbound?.shouldPause ?? false)
        guard shouldPause != self.isPaused else { return }
        self.isPaused = shouldPause
        if shouldPause {
            for operation in self.operations.values { operation.stream.pause() }
            return
        }
        self.writeDeferred(context: context)
        if self.isPaused { return }  // Writing what waited filled the socket again.
        for operation in self.operations.values { operation.stream.resume() }
    }

    /// Writes the events (and completions) that waited for the pause to end, stream by stream
    /// in the order they came, until the socket fills again.
    private func writeDeferred(context: ChannelHandlerContext) {
        while !self.isPaused, !self.deferredDrains.isEmpty {
            let streamID = self.deferredDrains.removeFirst()
            self.writeQueued(streamID: streamID, context: context)
            if let completion = self.deferredCompletions.removeValue(forKey: streamID) {
                self.finish(streamID: streamID, completion: completion, context: context)
            }
            // Hand each stream's batch to the socket before the next, so a socket that fills
            // up pauses production again before every stream has written.
            self.flushIfNeeded(context: context)
            if !context.channel.isWritable {
                self.updateProduction(context: context)
            }
        }
    }

    private func deferDrain(streamID: UInt64) {
        if !self.deferredDrains.contains(streamID) {
            self.deferredDrains.append(streamID)
        }
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

    // MARK: - Acting on the state machine

    private func handle(_ action: ConnectionStateMachine.ReceiveAction, context: ChannelHandlerContext) {
        switch action {
        case .none:
            break
        case .helloReceived(let hello):
            self.acceptHello(hello, context: context)
        case .openStream(let streamID, let open):
            // The merge rule applied once: what runs (and what a long-lived journal keeps) reads
            // effective values.
            self.startOperation(streamID: streamID, open: open.effective, context: context)
        case .resumeStream(let streamID, let resume):
            self.resumeOperation(streamID: streamID, resume: resume, context: context)
        case .refuseStream(let streamID, let code, let message):
            guard self.spendAbandonedStream(context: context) else { return }
            // Never admitted by the machine: written directly.
            let complete = Wire.Complete(lastSeq: 0, error: Wire.OperationError(code: code, message: message))
            self.write(Wire.Frame(streamID: streamID, kind: .complete(complete)), context: context)
        case .cancelStream(let streamID, _, let cancel):
            // The Cancel's flags, read once by the stream's state machine.
            if let key = self.operations[streamID]?.longLived, let registry = self.configuration.longLivedOperations {
                switch cancel {
                case .acknowledgeCompletion: Task { await registry.acknowledge(key) }
                case .confirm: Task { await registry.cancel(key) }
                case .detach, .ignore: break
                }
            }
            self.stopOperation(streamID: streamID)
            guard self.spendAbandonedStream(context: context) else { return }
            if case .confirm(let lastSeq) = cancel {
                // A plain Cancel: the stream ends with the one Complete that confirms it.
                let error = Wire.OperationError(code: .operationCancelled, message: "the operation was cancelled")
                let complete = Wire.Complete(lastSeq: lastSeq, error: error)
                self.send(Wire.Frame(streamID: streamID, kind: .complete(complete)), context: context)
            } else if self.machine.isDrained {
                self.close(context: context)
            }
        case .completionAcknowledged(let streamID):
            if let key = self.acknowledgeable.removeValue(forKey: streamID), let registry = self.configuration.longLivedOperations {
                Task { await registry.acknowledge(key) }
            }
        case .creditAvailable(let streamID, let granted):
            self.operations[streamID]?.stream.grant(granted)
        case .sendPong(let nonce):
            self.send(Wire.Frame(streamID: 0, kind: .pong(Wire.Pong(nonce: nonce))), context: context)
        case .deliver, .helloAckReceived:
            break
        case .peerGoingAway(_, let closeNow):
            if closeNow {
                self.close(context: context)
            }
        case .closeWithError(let code, let message):
            self.logger.info("closing connection: \(code): \(message)")
            self.writeErrorAndClose(code: code, message: message, context: context)
        case .peerClosed(let error):
            self.logger.debug("peer closed the connection: \(error.code): \(error.message)")
            self.close(context: context)
        }
    }

    /// Counts a cancelled or refused stream against the user across all their connections;
    /// false (and the connection closes) when they exceeded the rate.
    private func spendAbandonedStream(context: ChannelHandlerContext) -> Bool {
        guard let user = self.identity?.userRecordName,
            !self.configuration.peerLimits.spendAbandonedStream(user: user, now: .now())
        else { return true }
        let refusal = PeerLimits.Refusal.abandoningStreams(
            perSecond: self.configuration.peerLimits.configuration.abandonedStreamsPerUserPerSecond)
        self.logger.info("closing connection of \(user): \(refusal.message)")
        self.closeWithError(code: .rateLimited, message: refusal.message, context: context)
        return false
    }

    private func acceptHello(_ hello: Wire.Hello, context: ChannelHandlerContext) {
        guard let identity = self.authenticate(hello) else {
            self.closeWithError(
                code: .notAuthenticated,
                message: "present a client certificate from a trusted CA or a valid bearer token",
                context: context
            )
            return
        }
        // The client's max_frame_bytes binds what the server sends; 0 = no preference.
        var maximumFrameBytes = self.configuration.maximumFrameBytes
        if let requested = hello.limits?.maxFrameBytes, requested > 0 {
            guard requested >= FrameDecoder.minimumNegotiableFrameBytes else {
                self.closeWithError(
                    code: .protocolViolation,
                    message: "Hello.limits.max_frame_bytes \(requested) is below the minimum of "
                        + "\(FrameDecoder.minimumNegotiableFrameBytes) bytes",
                    context: context
                )
                return
            }
            maximumFrameBytes = min(maximumFrameBytes, Int(requested))
        }
        self.encoder?.maximumFrameBytes = maximumFrameBytes
        if let users = self.configuration.users, users.isDisabled(identity.userRecordName) {
            self.logger.info("refusing a connection of disabled user \(identity.userRecordName)")
            self.closeWithError(code: .notAuthenticated, message: "user \(identity.userRecordName) is disabled", context: context)
            return
        }
        if let refusal = self.configuration.peerLimits.admit(user: identity.userRecordName, now: .now()) {
            self.logger.info("refusing a connection of \(identity.userRecordName): \(refusal.message)")
            self.closeWithError(code: .rateLimited, message: refusal.message, context: context)
            return
        }
        self.admittedUser = identity.userRecordName
        self.identity = identity
        self.logger[metadataKey: "user"] = "\(identity.userRecordName)"
        self.configuration.users?.registerInBackground(identity)
        self.peerCertificate = nil  // Only needed to authenticate; idle connections stay small.
        let limits = Wire.Limits(
            maxFrameBytes: UInt32(clamping: maximumFrameBytes),
            maxConcurrentStreams: UInt32(clamping: self.configuration.connection.maximumConcurrentStreams),
            initialStreamWindow: self.configuration.connection.initialStreamWindow,
            pingIntervalMs: UInt32(clamping: self.configuration.connection.keepaliveInterval.nanoseconds / 1_000_000),
            idleTimeoutMs: UInt32(clamping: self.configuration.connection.idleTimeout.nanoseconds / 1_000_000),
            maxItemsPerOperation: UInt32(StorageExecutor.maximumItems)
        )
        let ack = Wire.HelloAck(
            protocolVersion: Wire.protocolVersion,
            serverName: self.configuration.serverName,
            userRecordName: identity.userRecordName,
            limits: limits
        )
        self.send(Wire.Frame(streamID: 0, kind: .helloAck(ack)), context: context)
        self.logger.debug("client \(hello.clientName) \(hello.clientVersion) authenticated as \(identity.userRecordName)")
    }

    private func authenticate(_ hello: Wire.Hello) -> ClientIdentity? {
        if let token = hello.bearerToken {
            if let identity = self.configuration.users?.authenticate(bearerToken: token) {
                return identity
            }
            return self.configuration.bearerTokenDigests[Wire.SHA256.hash(Array(token.utf8))]
                .map(ClientIdentity.init(userRecordName:))
        }
        return self.peerCertificate.flatMap(ClientIdentity.init(certificate:))
    }

    // MARK: - Operations

    private func startOperation(streamID: UInt64, open: Wire.Open, context: ChannelHandlerContext) {
        guard open.request != nil else {
            self.endStream(
                streamID: streamID,
                error: Wire.OperationError(code: .unknownFrameKind, message: "Open carries no request this server knows"),
                context: context
            )
            return
        }
        guard let caller = self.identity else {
            // The state machine admits Open only after HelloAck, which needs an identity.
            self.endStream(streamID: streamID, error: Wire.OperationError(code: .notAuthenticated, message: "no identity"), context: context)
            return
        }
        let stream = OperationStream(
            streamID: streamID,
            operationID: open.operationID,
            credit: self.machine.credit(streamID: streamID),
            handler: self,
            eventLoop: context.eventLoop,
            openStreams: self.openStreams
        )
        if self.isPaused { stream.pause() }
        self.configuration.metrics?.streamOpened(open.request)
        self.operations[streamID] = RunningOperation(stream: stream)
        let fields = self.logger.handler.metadata.merging(
            OperationLogContext.fields(of: open, user: caller.userRecordName, stream: streamID)) { _, new in new }
        let task: Task<Void, Never>
        if let registry = self.configuration.longLivedOperations, LongLivedOperations.answers(open) {
            task = Task {
                await OperationLogContext.withFields(fields) {
                    stream.complete(await registry.answer(open, caller: caller))
                }
            }
        } else if let registry = self.configuration.longLivedOperations, open.configuration?.isLongLived == true,
            registry.canRunDetached(open)
        {
            task = Task {
                await OperationLogContext.withFields(fields) {
                    switch await registry.register(open, caller: caller) {
                    case .failure(let refusal):
                        stream.complete(OperationCompletion(error: refusal.error))
                    case .success(let run):
                        // Persisted only once durable; a client gone by then never had the operation.
                        guard let attachment = run.attach() else {
                            // A run just registered has no follower yet.
                            stream.complete(.failure(.internalError, "operation \(run.key.operationID) attached before it ran"))
                            return
                        }
                        let release: @Sendable () -> Void = { run.release(attachment) }
                        guard await stream.persisted(key: run.key, release: release, then: { registry.start(run) }) else {
                            run.release(attachment)
                            await registry.abandon(run)
                            return
                        }
                        await LongLivedOperations.follow(run, attachment: attachment, after: 0, stream: stream)
                    }
                }
            }
        } else {
            let executor = self.configuration.executor
            let metrics = self.configuration.metrics
            task = Task {
                await OperationLogContext.withFields(fields) {
                    let started = ContinuousClock.now
                    let completion = await executor.run(open, caller: caller, stream: stream)
                    metrics?.operationFinished(open.request, duration: .now - started)
                    stream.complete(completion)
                }
            }
        }
        self.operations[streamID]?.task = task
    }

    /// Attaches `streamID` to a long-lived operation: `Persisted`, the journal after the
    /// client's last seq, live events, `Complete`.
    private func resumeOperation(streamID: UInt64, resume: Wire.Resume, context: ChannelHandlerContext) {
        guard let registry = self.configuration.longLivedOperations, let caller = self.identity else {
            self.endStream(
                streamID: streamID,
                error: Wire.OperationError(code: .unknownOperation, message: "no long-lived operation \(resume.operationID)"),
                context: context
            )
            return
        }
        let stream = OperationStream(
            streamID: streamID,
            operationID: resume.operationID,
            credit: self.machine.credit(streamID: streamID),
            handler: self,
            eventLoop: context.eventLoop,
            openStreams: self.openStreams
        )
        if self.isPaused { stream.pause() }
        // Seqs continue the operation's: the client has everything up to last_seq.
        self.operations[streamID] = RunningOperation(stream: stream, nextSeq: resume.lastSeq + 1)
        let task = Task {
            switch await registry.attach(operationID: resume.operationID, caller: caller, after: resume.lastSeq) {
            case .failure(let refusal):
                stream.complete(OperationCompletion(error: refusal.error))
            case .success(let (run, attachment)):
                guard await stream.persisted(key: run.key, release: { run.release(attachment) }, then: {}) else {
                    run.release(attachment)
                    return
                }
                await LongLivedOperations.follow(run, attachment: attachment, after: resume.lastSeq, stream: stream)
            }
        }
        self.operations[streamID]?.task = task
    }

    /// Sends `Persisted` on `streamID`, marks the stream as following `key` (`release` ends
    /// that when the stream stops) and runs `then` (before any `Cancel` of the stream is
    /// handled); false when the stream already ended.
    func persisted(
        streamID: UInt64, key: LongLivedOperationKey, release: @escaping @Sendable () -> Void, then: () -> Void
    ) -> Bool {
        guard let context = self.context, !self.isClosing, self.operations[streamID] != nil else { return false }
        self.operations[streamID]?.longLived = key
        self.operations[streamID]?.releaseFollower = release
        then()
        self.send(
            Wire.Frame(streamID: streamID, kind: .persisted(Wire.Persisted(operationID: key.operationID))),
            context: context)
        return true
    }

    /// Writes the events the operation on `streamID` queued, or, while production is paused,
    /// remembers to write them when it resumes.
    func drain(streamID: UInt64) {
        guard let context = self.context, self.operations[streamID] != nil else { return }
        if !self.isPaused, self.outbound?.shouldPause == true {
            // The shared budget ran out while this connection holds more than its share.
            self.updateProduction(context: context)
        }
        if self.isPaused {
            self.deferDrain(streamID: streamID)
            return
        }
        self.writeQueued(streamID: streamID, context: context)
    }

    /// Writes what the operation on `streamID` queued. The stream only queues what the client's
    /// credit allows, so the state machine accepts each.
    private func writeQueued(streamID: UInt64, context: ChannelHandlerContext) {
        guard var operation = self.operations[streamID] else { return }
        for queued in operation.stream.takeQueued() {
            let frame: OutboundFrame
            switch queued {
            case .payload(let payload):
                frame = .frame(Wire.Frame(streamID: streamID, kind: .event(Wire.Event(seq: operation.nextSeq, payload: payload))))
            case .encoded(let event) where event.seq == operation.nextSeq:
                frame = .event(streamID: streamID, event)
            case .assetChunk(let offset, let data):
                frame = .assetChunk(streamID: streamID, seq: operation.nextSeq, offset: offset, data: data)
            case .encoded(let event):
                // Journal seqs are the operation's seqs, so this does not happen; if it did, the
                // client must not see a gap or a repeat.
                self.logger.error("stream \(streamID) replays journaled event \(event.seq) where \(operation.nextSeq) is next")
                self.stopOperation(streamID: streamID)
                let error = Wire.OperationError(code: .internalError, message: "the operation's journal is out of order")
                let complete = Wire.Complete(lastSeq: operation.nextSeq - 1, error: error)
                self.send(Wire.Frame(streamID: streamID, kind: .complete(complete)), context: context)
                return
            }
            switch self.machine.sendEvent(streamID: streamID, seq: operation.nextSeq) {
            case .send, .sendAndClose:
                operation.nextSeq += 1
                self.write(frame, context: context)
                if let size = self.encoder?.takeRefusedSize() {
                    self.operations[streamID] = operation
                    self.endOversizeEvent(streamID: streamID, seq: operation.nextSeq - 1, size: size, context: context)
                    return
                }
            case .waitForCredit, .drop, .invalid:
                // The stream's credit mirrors the machine's; this means the stream is gone.
                self.logger.debug("dropping an event of stream \(streamID): the stream ended")
            }
        }
        self.operations[streamID] = operation
    }

    /// Ends the operation on `streamID` with its `Complete`, after what it queued (later, if
    /// production is paused: the events before it wait too).
    func complete(streamID: UInt64, completion: OperationCompletion) {
        guard let context = self.context, self.operations[streamID] != nil else { return }
        if self.isPaused {
            self.deferDrain(streamID: streamID)
            self.deferredCompletions[streamID] = completion
            return
        }
        self.writeQueued(streamID: streamID, context: context)
        self.finish(streamID: streamID, completion: completion, context: context)
    }

    private func finish(streamID: UInt64, completion: OperationCompletion, context: ChannelHandlerContext) {
        guard let operation = self.operations.removeValue(forKey: streamID) else { return }
        let complete = Wire.Complete(lastSeq: operation.nextSeq - 1, error: completion.error, result: completion.result)
        self.send(Wire.Frame(streamID: streamID, kind: .complete(complete)), context: context)
        if let key = operation.longLived {
            if self.acknowledgeable.count >= Self.maximumAcknowledgeable, let oldest = self.acknowledgeable.keys.min() {
                self.acknowledgeable.removeValue(forKey: oldest)
            }
            self.acknowledgeable[streamID] = key
        }
    }

    /// Event `seq` of the operation on `streamID` is larger than the client accepts (the
    /// encoder refused it; nothing was sent): the stream ends with `LIMIT_EXCEEDED` after
    /// `seq - 1`. A long-lived operation keeps running and can be resumed from there on a
    /// connection with a larger limit.
    private func endOversizeEvent(streamID: UInt64, seq: UInt64, size: Int, context: ChannelHandlerContext) {
        self.stopOperation(streamID: streamID)
        let error = self.frameTooLargeError("event \(seq)", size: size)
        let complete = Wire.Complete(lastSeq: seq - 1, error: error)
        self.send(Wire.Frame(streamID: streamID, kind: .complete(complete)), context: context)
    }

    private func frameTooLargeError(_ what: String, size: Int) -> Wire.OperationError {
        let limit = self.encoder?.maximumFrameBytes ?? self.configuration.maximumFrameBytes
        return Wire.OperationError(
            code: .limitExceeded,
            message: "\(what) is a frame of \(size) bytes, above this connection's max_frame_bytes of \(limit); "
                + "it was not sent"
        )
    }

    private func stopOperation(streamID: UInt64) {
        self.deferredCompletions.removeValue(forKey: streamID)
        guard let operation = self.operations.removeValue(forKey: streamID) else { return }
        // Before the next frame is read: a Resume right after this stream's Cancel attaches.
        operation.releaseFollower?()
        operation.stream.close()
        operation.task?.cancel()
    }

    private func stopAllOperations() {
        for streamID in Array(self.operations.keys) {
            self.stopOperation(streamID: streamID)
        }
    }

    private func endStream(streamID: UInt64, error: Wire.OperationError, context: ChannelHandlerContext) {
        let complete = Wire.Complete(lastSeq: 0, error: error)
        self.send(Wire.Frame(streamID: streamID, kind: .complete(complete)), context: context)
    }

    // MARK: - Timers and shutdown

    private func timerFired(context: ChannelHandlerContext) {
        // The outbound budget is shared: another connection's socket may have drained it.
        self.updateProduction(context: context)
        switch self.machine.timerFired(now: .now()) {
        case .none:
            break
        case .sendPing(let nonce):
            self.send(Wire.Frame(streamID: 0, kind: .ping(Wire.Ping(nonce: nonce))), context: context)
            self.flushIfNeeded(context: context)
        case .closeWithError(let code, let message):
            self.logger.info("closing connection: \(message)")
            self.writeErrorAndClose(code: code, message: message, context: context)
        case .closeIdle:
            let goAway = self.machine.makeGoAway(code: .idleTimeout, reason: "idle")
            self.write(goAway, context: context)
            self.close(context: context)
        }
    }

    private func beginGracefulShutdown(context: ChannelHandlerContext) {
        guard !self.isClosing else { return }
        if self.machine.phase == .handshaking {
            self.close(context: context)
            return
        }
        let goAway = self.machine.makeGoAway(code: .shuttingDown, reason: "server shutting down")
        self.send(goAway, context: context)
        self.flushIfNeeded(context: context)
    }

    // MARK: - Writing

    /// Sends `frame` if the state machine allows it now, and closes when it says so.
    private func send(_ frame: Wire.Frame, context: ChannelHandlerContext) {
        switch self.machine.send(frame) {
        case .send:
            self.write(frame, context: context)
            self.replaceIfTooLarge(frame, context: context)
        case .sendAndClose:
            self.write(frame, context: context)
            self.replaceIfTooLarge(frame, context: context)
            self.close(context: context)
        case .waitForCredit, .drop:
            break
        case .invalid(let reason):
            self.logger.error("not sending an invalid frame: \(reason)")
        }
    }

    /// When the encoder refused `frame` as above the connection's max_frame_bytes: a `Complete`
    /// (a result too large) is replaced by one with `LIMIT_EXCEEDED`, so the stream still ends.
    private func replaceIfTooLarge(_ frame: Wire.Frame, context: ChannelHandlerContext) {
        guard let size = self.encoder?.takeRefusedSize() else { return }
        guard case .complete(let complete) = frame.kind else {
            self.logger.error("a frame of \(size) bytes on stream \(frame.streamID) was too large to send")
            return
        }
        let error = self.frameTooLargeError("the operation's result", size: size)
        let small = Wire.Complete(lastSeq: complete.lastSeq, error: error)
        self.write(Wire.Frame(streamID: frame.streamID, kind: .complete(small)), context: context)
    }

    private func write(_ frame: Wire.Frame, context: ChannelHandlerContext) {
        self.write(.frame(frame), context: context)
    }

    private func write(_ frame: OutboundFrame, context: ChannelHandlerContext) {
        guard !self.isClosing else { return }
        if let metrics = self.configuration.metrics {
            self.count(frame, metrics: metrics)
        }
        context.write(self.wrapOutboundOut(frame), promise: nil)
        self.needsFlush = true
        if !self.inReadBurst, !self.flushScheduled {
            // Outside a read burst (operations emitting, timers): flush once at the end of
            // this event-loop tick, so events emitted together share TLS records.
            self.flushScheduled = true
            let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
            context.eventLoop.execute {
                let (handler, context) = loopBound.value
                handler.flushScheduled = false
                handler.flushIfNeeded(context: context)
            }
        }
    }

    private func flushIfNeeded(context: ChannelHandlerContext) {
        if self.needsFlush {
            self.needsFlush = false
            if self.eventsSinceFlush > 0 {
                self.configuration.metrics?.eventsSent.increment(by: self.eventsSinceFlush)
                self.eventsSinceFlush = 0
            }
            context.flush()
        }
    }

    /// Counts an event or an error going out (see ``ServerMetrics``).
    private func count(_ frame: OutboundFrame, metrics: ServerMetrics) {
        guard case .frame(let frame) = frame else {
            self.eventsSinceFlush += 1  // An event already in wire format (a replay, an asset chunk).
            return
        }
        switch frame.kind {
        case .event:
            self.eventsSinceFlush += 1
        case .complete(let complete):
            if let error = complete.error { metrics.errorSent(error.code, level: "stream") }
        case .error(let error):
            metrics.errorSent(error.code, level: "connection")
        default:
            break
        }
    }

    private func closeWithError(code: Wire.ErrorCode, message: String, context: ChannelHandlerContext) {
        _ = self.machine.send(Wire.Frame(streamID: 0, kind: .error(Wire.ConnectionError(code: code, message: message))))
        self.writeErrorAndClose(code: code, message: message, context: context)
    }

    private func writeErrorAndClose(code: Wire.ErrorCode, message: String, context: ChannelHandlerContext) {
        self.write(Wire.Frame(streamID: 0, kind: .error(Wire.ConnectionError(code: code, message: message))), context: context)
        self.close(context: context)
    }

    private func close(context: ChannelHandlerContext) {
        guard !self.isClosing else { return }
        self.flushIfNeeded(context: context)
        self.isClosing = true
        self.timer?.cancel()
        self.timer = nil
        context.close(promise: nil)
    }
}
