import CirrusTLS
import CirrusWire
import NIOCore

/// The client end of one Cirrus connection: says `Hello`, opens operation streams, delivers
/// their frames, answers pings and keeps the connection alive, all by feeding every frame
/// through `ConnectionStateMachine(role: .client)`. Protocol work only; event loop only.
final class ClientConnectionHandler: ChannelInboundHandler {
    typealias InboundIn = Wire.Frame
    typealias OutboundOut = ClientOutboundFrame

    /// What the handler tells the connection's owner. Called on the event loop.
    struct Callbacks: Sendable {
        /// No new streams may be opened on this connection any more.
        var draining: @Sendable () -> Void = {}
        /// The server never saw these streams (GoAway) or they could not be opened: open them elsewhere.
        var retry: @Sendable ([ClientStream]) -> Void = { _ in }
        /// The connection ended under these streams before their `Complete`: resume or fail them.
        var lost: @Sendable ([ClientStream], ConnectionFailure) -> Void = { streams, failure in
            streams.forEach { $0.fail(failure) }
        }
    }

    private let server: String
    private let hello: Wire.Hello
    private let callbacks: Callbacks
    private let timerInterval: TimeAmount
    private var machine: ConnectionStateMachine
    private var context: ChannelHandlerContext?
    private var streams: [UInt64: ClientStream] = [:]
    /// Streams whose plain `Cancel` of a long-lived operation went out here, until the server's
    /// `Complete` confirms it. If the connection ends first they are lost like open streams
    /// and say `Cancel` again on the next one: the server's operation must not keep running.
    private var cancelling: [UInt64: ClientStream] = [:]
    /// Streams waiting for a free slot under `max_concurrent_streams`.
    private var waiting: [(ClientStream, ClientConnection)] = []
    private var nextStreamID: UInt64 = 1
    private var maximumConcurrentStreams = Int.max
    /// The encoder below, whose frame limit follows the server's `HelloAck`.
    private let encoder: ClientFrameEncoder?
    private var timer: RepeatedTask?
    private var pings: [UInt64: EventLoopPromise<Void>] = [:]
    /// User pings use nonces from the top half so they never meet the keepalive's.
    private var nextPingNonce: UInt64 = 1 << 63
    private var failure: ConnectionFailure?
    private var isClosed = false
    /// Events of the current read burst, per stream, handed over together at its end (one hop
    /// to each stream's queue and one credit update per burst instead of per event).
    private var burst: [ObjectIdentifier: (stream: ClientStream, deliveries: [StreamDelivery])] = [:]
    private var inReadBurst = false
    /// Something was written and not flushed yet; `Window`s wait for the next flush (the end of
    /// the read burst, or of this event-loop tick).
    private var needsFlush = false
    private var flushScheduled = false

    /// Succeeds with the server's `HelloAck`; fails if the connection ends first.
    let ready: EventLoopPromise<Wire.HelloAck>

    init(
        hello: Wire.Hello,
        server: String,
        machine: ConnectionStateMachine.Configuration,
        timerInterval: TimeAmount,
        ready: EventLoopPromise<Wire.HelloAck>,
        callbacks: Callbacks,
        encoder: ClientFrameEncoder? = nil
    ) {
        self.encoder = encoder
        self.hello = hello
        self.server = server
        self.callbacks = callbacks
        self.timerInterval = timerInterval
        self.ready = ready
        self.machine = ConnectionStateMachine(role: .client, configuration: machine, now: .now())
    }

    // MARK: - Life cycle

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        self.machine = ConnectionStateMachine(role: .client, configuration: self.machine.configuration, now: .now())
        let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
        self.timer = context.eventLoop.scheduleRepeatedTask(initialDelay: self.timerInterval, delay: self.timerInterval) { _ in
            bound.value.timerFired()
        }
        if context.channel.isActive {
            self.sayHello()
        }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.connectionEnded()
        self.context = nil
    }

    func channelActive(context: ChannelHandlerContext) {
        self.sayHello()
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.connectionEnded()
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if self.failure == nil {
            self.failure = ConnectionFailure.from(error, beforeHelloAck: self.machine.phase == .handshaking, server: self.server)
        }
        context.close(promise: nil)
    }

    private func sayHello() {
        let frame = Wire.Frame(streamID: 0, kind: .hello(self.hello))
        guard case .send = self.machine.send(frame) else { return }  // Already said.
        // TLSHandler holds writes made before its handshake completes.
        self.write(frame)
        self.context?.flush()
    }

    // MARK: - Reading

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = self.unwrapInboundIn(data)
        self.inReadBurst = true
        if case .pong(let pong) = frame.kind, let promise = self.pings.removeValue(forKey: pong.nonce) {
            promise.succeed(())
        }
        if case .complete(let complete) = frame.kind, let stream = self.cancelling.removeValue(forKey: frame.streamID) {
            // The machine forgot the stream at its `Cancel` and drops this `Complete`.
            self.cancelConfirmed(stream, by: complete)
        }
        switch self.machine.receive(frame, now: .now()) {
        case .none:
            break
        case .helloAckReceived(let ack):
            if let limits = ack.limits {
                self.machine.adoptPeerTimers(limits)
            }
            if let limits = ack.limits, limits.maxConcurrentStreams > 0 {
                self.maximumConcurrentStreams = Int(limits.maxConcurrentStreams)
            }
            if let encoder = self.encoder, let limits = ack.limits, limits.maxFrameBytes > 0 {
                encoder.maximumFrameBytes = min(encoder.maximumFrameBytes, Int(limits.maxFrameBytes))
            }
            self.ready.succeed(ack)
        case .deliver(let frame):
            self.deliver(frame)
        case .sendPong(let nonce):
            self.write(Wire.Frame(streamID: 0, kind: .pong(Wire.Pong(nonce: nonce))))
            context.flush()
        case .peerGoingAway(let lastStreamID, let closeNow):
            self.peerGoingAway(lastStreamID: lastStreamID, closeNow: closeNow)
        case .closeWithError(let code, let message):
            self.failure =
                self.failure
                ?? ConnectionFailure(
                    code: code == .unsupportedVersion ? .incompatibleVersion : .networkFailure,
                    message: "protocol error with \(self.server): \(code): \(message)"
                )
            self.writeErrorAndClose(code: code, message: message)
        case .peerClosed(let error):
            self.failure = self.failure ?? ConnectionFailure.from(error, server: self.server)
            context.close(promise: nil)
        case .helloReceived, .openStream, .resumeStream, .refuseStream, .cancelStream, .completionAcknowledged,
            .creditAvailable:
            // Server-side actions; the client machine never answers with them.
            break
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        self.inReadBurst = false
        self.deliverBurst()
        self.flushIfNeeded()
        context.fireChannelReadComplete()
    }

    private func deliver(_ frame: Wire.Frame) {
        guard let stream = self.streams[frame.streamID] else { return }
        switch frame.kind {
        case .event(let event):
            self.burst[ObjectIdentifier(stream), default: (stream, [])].deliveries.append(.event(event))
        case .persisted(let persisted):
            // At once (after what came before it): the stream must know the server has the
            // operation before anything else on this connection is decided for it.
            self.deliverBurst(of: stream)
            stream.deliver(.persisted(persisted))
        case .complete(let complete):
            self.streams.removeValue(forKey: frame.streamID)
            let key = ObjectIdentifier(stream)
            if stream.isTakenOverAfterDuplicate(complete) || stream.isRetriedAfterAlreadyAttached(complete) {
                // What the stream received before its Complete goes first.
                self.deliverBurst(of: stream)
                let reason = complete.error?.code == .duplicateOperationID
                    ? "\(self.server) has the long-lived operation already; resuming it"
                    : "\(self.server) still streams the operation elsewhere; resuming it later"
                self.callbacks.lost([stream], .network(reason))
            } else {
                // With the events before it, in one hop (a one-record fetch: its result and
                // its Complete together).
                let deliveries = (self.burst.removeValue(forKey: key)?.deliveries ?? []) + [.complete(complete)]
                stream.deliver(contentsOf: deliveries)
            }
            self.streamEnded()
        default:
            break
        }
    }

    /// Hands each stream what the read burst brought it.
    private func deliverBurst() {
        guard !self.burst.isEmpty else { return }
        let burst = self.burst
        self.burst.removeAll(keepingCapacity: true)
        for (stream, deliveries) in burst.values {
            stream.deliver(contentsOf: deliveries)
        }
    }

    /// Hands `stream` what the read burst brought it so far.
    private func deliverBurst(of stream: ClientStream) {
        if let (stream, deliveries) = self.burst.removeValue(forKey: ObjectIdentifier(stream)) {
            stream.deliver(contentsOf: deliveries)
        }
    }

    private func peerGoingAway(lastStreamID: UInt64, closeNow: Bool) {
        self.callbacks.draining()
        let unseen = self.streams.filter { $0.key > lastStreamID }.sorted { $0.key < $1.key }.map(\.value)
        for (id, _) in self.streams where id > lastStreamID {
            self.streams.removeValue(forKey: id)
        }
        let retry = unseen + self.waiting.map(\.0)
        self.waiting.removeAll()
        if !retry.isEmpty {
            self.callbacks.retry(retry)
        }
        if closeNow || self.streams.isEmpty {
            self.context?.close(promise: nil)
        }
    }

    // MARK: - Streams

    /// Opens `stream` now, or when a slot frees up. False: this connection takes no new streams.
    func open(_ stream: ClientStream, on connection: ClientConnection) -> Bool {
        guard !self.isClosed, self.machine.phase == .active else { return false }
        guard stream.wantsAttachment else { return true }
        guard self.streams.count < self.maximumConcurrentStreams else {
            self.waiting.append((stream, connection))
            return true
        }
        let streamID = self.nextStreamID
        let frame = Wire.Frame(streamID: streamID, kind: stream.startFrame())
        switch self.machine.send(frame) {
        case .send, .sendAndClose:
            self.nextStreamID += 1
            self.streams[streamID] = stream
            if let context = self.context {
                let written = context.eventLoop.makePromise(of: Void.self)
                // Opens of the same read burst or event-loop tick (operations started together)
                // share one flush and TLS record, like `Window`s.
                let outbound: ClientOutboundFrame
                if case .open = frame.kind, let records = stream.recordsToSave {
                    outbound = .open(frame, recordsToSave: records)
                } else {
                    outbound = .frame(frame)
                }
                context.write(self.wrapOutboundOut(outbound), promise: written)
                self.flushSoon()
                written.futureResult.whenFailure { [server = self.server] error in
                    // Never sent (e.g. larger than a frame may be): end the stream here; the
                    // server never saw it.
                    stream.fail(Self.openFailure(error, server: server))
                    connection.cancel(streamID: streamID, reason: "Open could not be sent")
                }
            }
            if !stream.attached(to: connection, streamID: streamID) {
                self.cancel(streamID: streamID, reason: "cancelled by the client", detach: stream.cancelDetaches)
            }
            return true
        case .invalid(let message):
            stream.fail(.network("cannot open a stream: \(message)"))
            return true
        case .drop, .waitForCredit:
            return false
        }
    }

    private static func openFailure(_ error: any Error, server: String) -> ConnectionFailure {
        if let error = error as? WireError, error.code == .messageTooLarge || error.code == .frameTooLarge {
            return ConnectionFailure(code: .limitExceeded, message: "the request is too large for one frame: \(error.message)")
        }
        return ConnectionFailure.from(error, beforeHelloAck: false, server: server)
    }

    func grant(credit: UInt32, streamID: UInt64) {
        guard self.streams[streamID] != nil else { return }
        let frame = Wire.Frame(streamID: streamID, kind: .window(Wire.Window(credit: credit)))
        if case .send = self.machine.send(frame) {
            self.write(frame)
            self.flushSoon()
        }
    }

    /// Flushes at the end of the read burst, or of this event-loop tick: `Window`s, `Open`s and
    /// `Cancel`s written together (several operations starting, several streams' callbacks
    /// returning) share one flush and TLS record.
    private func flushSoon() {
        self.needsFlush = true
        guard !self.inReadBurst, !self.flushScheduled, let context = self.context else { return }
        self.flushScheduled = true
        let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
        context.eventLoop.execute {
            bound.value.flushScheduled = false
            bound.value.flushIfNeeded()
        }
    }

    private func flushIfNeeded() {
        guard self.needsFlush else { return }
        self.needsFlush = false
        self.context?.flush()
    }

    func cancel(streamID: UInt64, reason: String, detach: Bool = false) {
        if let index = self.waiting.firstIndex(where: { $0.0.streamID == streamID && streamID != 0 }) {
            self.waiting.remove(at: index)
        }
        guard let stream = self.streams.removeValue(forKey: streamID) else { return }
        if stream.owesCancel {
            self.cancelling[streamID] = stream
        }
        let frame = Wire.Frame(streamID: streamID, kind: .cancel(Wire.Cancel(reason: reason, detach: detach)))
        switch self.machine.send(frame) {
        case .send:
            self.write(frame)
            self.flushSoon()
        case .sendAndClose:
            self.write(frame)
            self.context?.flush()
            self.context?.close(promise: nil)
        case .drop, .waitForCredit, .invalid:
            break
        }
        self.streamEnded()
    }

    /// The server answered the `Cancel` of `stream` with `complete`. `OPERATION_ALREADY_ATTACHED`
    /// refused the `Resume` the `Cancel` followed (an old connection still holds the
    /// operation): the stream tries again later. Anything else ends the operation.
    private func cancelConfirmed(_ stream: ClientStream, by complete: Wire.Complete) {
        if stream.isRetriedAfterAlreadyAttached(complete) {
            self.callbacks.lost([stream], .network("\(self.server) still streams the operation elsewhere; cancelling it later"))
        } else {
            stream.cancelConfirmed()
        }
    }

    /// Tells the server the client has the result of the long-lived operation whose `Complete`
    /// ended `streamID`, so it stops listing it.
    func acknowledgeCompletion(streamID: UInt64) {
        let frame = Wire.Frame(
            streamID: streamID,
            kind: .cancel(Wire.Cancel(reason: "completion acknowledged", completionAcknowledged: true))
        )
        guard case .send = self.machine.send(frame) else { return }
        self.write(frame)
        self.flushSoon()
    }

    /// A stream ended: start a waiting one, or close a drained connection.
    private func streamEnded() {
        self.waiting.removeAll { !$0.0.wantsAttachment }
        while self.streams.count < self.maximumConcurrentStreams, !self.waiting.isEmpty {
            let (stream, connection) = self.waiting.removeFirst()
            if !self.open(stream, on: connection) {
                self.callbacks.retry([stream])
            }
        }
        if self.machine.phase == .draining, self.streams.isEmpty {
            self.context?.close(promise: nil)
        }
    }

    // MARK: - Ping, GoAway, timers

    func ping() -> EventLoopFuture<Void> {
        guard let context = self.context, !self.isClosed else {
            return self.ready.futureResult.eventLoop.makeFailedFuture(
                self.failure ?? .network("the connection to \(self.server) is closed")
            )
        }
        let nonce = self.nextPingNonce
        self.nextPingNonce &+= 1
        let promise = context.eventLoop.makePromise(of: Void.self)
        self.pings[nonce] = promise
        self.write(Wire.Frame(streamID: 0, kind: .ping(Wire.Ping(nonce: nonce))))
        context.flush()
        return promise.futureResult
    }

    func goAway() {
        guard !self.isClosed, self.machine.phase == .active else { return }
        let frame = self.machine.makeGoAway(code: .shuttingDown, reason: "client closing")
        let action = self.machine.send(frame)
        self.write(frame)
        self.context?.flush()
        self.callbacks.draining()
        if case .sendAndClose = action {
            self.context?.close(promise: nil)
        }
    }

    private func timerFired() {
        switch self.machine.timerFired(now: .now()) {
        case .none:
            break
        case .sendPing(let nonce):
            self.write(Wire.Frame(streamID: 0, kind: .ping(Wire.Ping(nonce: nonce))))
            self.context?.flush()
        case .closeWithError(let code, let message):
            self.failure = self.failure ?? .network("\(self.server): \(message)")
            self.writeErrorAndClose(code: code, message: message)
        case .closeIdle:
            let frame = self.machine.makeGoAway(code: .idleTimeout, reason: "idle")
            self.write(frame)
            self.context?.flush()
            self.callbacks.draining()
            self.context?.close(promise: nil)
        }
    }

    // MARK: - Writing and ending

    private func write(_ frame: Wire.Frame) {
        guard let context = self.context, !self.isClosed else { return }
        context.write(self.wrapOutboundOut(.frame(frame)), promise: nil)
    }

    private func writeErrorAndClose(code: Wire.ErrorCode, message: String) {
        guard let context = self.context else { return }
        let frame = Wire.Frame(streamID: 0, kind: .error(Wire.ConnectionError(code: code, message: message)))
        let channel = context.channel
        context.writeAndFlush(self.wrapOutboundOut(.frame(frame))).whenComplete { _ in channel.close(promise: nil) }
    }

    private func connectionEnded() {
        guard !self.isClosed else { return }
        // Events that arrived before the end go first.
        self.deliverBurst()
        self.isClosed = true
        self.timer?.cancel()
        self.timer = nil
        let failure = self.failure ?? .network("the connection to \(self.server) was closed")
        self.callbacks.draining()
        self.ready.fail(failure)
        let streams = self.streams.merging(self.cancelling) { open, _ in open }.sorted { $0.key < $1.key }.map(\.value)
            + self.waiting.map(\.0)
        self.streams.removeAll()
        self.cancelling.removeAll()
        self.waiting.removeAll()
        if !streams.isEmpty {
            self.callbacks.lost(streams, .network("connection lost while the operation was running: \(failure.message)"))
        }
        let pings = self.pings
        self.pings.removeAll()
        for promise in pings.values {
            promise.fail(failure)
        }
    }
}
