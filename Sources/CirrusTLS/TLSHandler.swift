import NIOCore
import NIOTLS

/// A channel handler that speaks TLS over OpenSSL: ciphertext below it,
/// plaintext above it. Put it first in the pipeline of a server's child
/// channel or a client's channel.
///
/// For example:
///
/// ```swift
/// let context = try TLSContext(configuration: .client(trustRootsPath: "Certs/ca.pem"))
/// ClientBootstrap(group: group).channelInitializer { channel in
///     channel.eventLoop.makeCompletedFuture {
///         try channel.pipeline.syncOperations.addHandler(TLSHandler(context: context, serverHostname: "localhost"))
///     }
/// }
/// ```
///
/// When the handshake completes it fires ``TLSHandshakeCompleted`` and then
/// NIOTLS's `TLSUserEvent.handshakeCompleted(negotiatedProtocol:)`. Writes
/// made before then are held and sent after it. Writes are encrypted on
/// `flush`, coalesced into records of up to 16 KiB. `close` sends
/// close_notify first; a peer's close_notify is answered and the channel
/// closed (`TLSUserEvent.shutdownCompleted` is fired). Failures are fired as
/// ``TLSError`` through `errorCaught`, after any alert is sent, and then the
/// channel is closed.
public final class TLSHandler: ChannelDuplexHandler {
    public typealias InboundIn = ByteBuffer
    public typealias InboundOut = ByteBuffer
    public typealias OutboundIn = ByteBuffer
    public typealias OutboundOut = ByteBuffer

    private let tlsContext: TLSContext
    private let serverHostname: String?
    private let sessionCacheKey: String?
    private var connection: TLSConnection?
    private var stateMachine = TLSHandlerStateMachine()
    private var pendingWrites = PendingWrites()
    private var plaintextBuffers = RecyclingBuffer()
    private var ciphertextBuffers = RecyclingBuffer()
    /// Ciphertext was written downstream and not flushed yet.
    private var hasUnflushedNetworkWrites = false

    /// What the handshake settled; nil until it completes. Event loop only. Without the peer
    /// certificate when the handler was made with `keepsPeerCertificate: false`.
    public private(set) var handshakeResult: TLSHandshakeCompleted?
    /// Whether ``handshakeResult`` keeps the peer's certificate (the fired event always has it).
    private let keepsPeerCertificate: Bool

    /// A handler playing the role of `context`'s configuration.
    ///
    /// - parameter serverHostname: client only: the name sent as SNI and,
    ///   when `verifyHostname` is on (the default), checked against the
    ///   server certificate (an IP literal is checked as an IP address and
    ///   not sent as SNI). Required while `verifyHostname` is on: without it
    ///   the handshake fails with a `configuration` ``TLSError``.
    /// - parameter sessionCacheKey: client only: the server's key in the
    ///   context's ``TLSContext/sessionCache``, such as "host:port". A session
    ///   stored under it is offered, and the tickets this connection receives
    ///   are stored under it. Nil: every handshake is a full one.
    /// - parameter keepsPeerCertificate: false: ``handshakeResult`` forgets the peer's certificate
    ///   once the ``TLSHandshakeCompleted`` event carrying it was fired, so a long-lived idle
    ///   connection does not hold it (a server that authenticates once, at the start).
    public init(
        context: TLSContext, serverHostname: String? = nil, sessionCacheKey: String? = nil,
        keepsPeerCertificate: Bool = true
    ) {
        self.tlsContext = context
        self.serverHostname = serverHostname
        self.sessionCacheKey = sessionCacheKey
        self.keepsPeerCertificate = keepsPeerCertificate
    }

    // MARK: Lifecycle

    public func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive, self.stateMachine.channelActive() == .startHandshake {
            self.startHandshake(context: context)
        }
    }

    public func handlerRemoved(context: ChannelHandlerContext) {
        self.stateMachine.handlerRemoved()
        self.failPendingWrites(ChannelError.ioOnClosedChannel)
        // Releases the SSL object and its BIOs (TLSConnection.deinit).
        self.connection = nil
    }

    public func channelActive(context: ChannelHandlerContext) {
        if self.stateMachine.channelActive() == .startHandshake {
            self.startHandshake(context: context)
        }
        context.fireChannelActive()
    }

    public func channelInactive(context: ChannelHandlerContext) {
        switch self.stateMachine.channelInactive() {
        case .fireUnexpectedEOF(let duringHandshake):
            let error = TLSError(
                code: .unexpectedEOF,
                message: duringHandshake
                    ? "the connection closed during the TLS handshake"
                    : "the connection closed without a TLS close_notify"
            )
            self.failPendingWrites(error)
            context.fireErrorCaught(error)
        case .none:
            self.failPendingWrites(ChannelError.ioOnClosedChannel)
        }
        context.fireChannelInactive()
    }

    /// Makes the SSL object and sends the first flight (a client's ClientHello).
    /// Returns whether the handshake is still under way (a failure has been
    /// handled).
    @discardableResult
    private func startHandshake(context: ChannelHandlerContext) -> Bool {
        do {
            // Made here, not in handlerAdded, so a configuration error reaches
            // the handlers added after this one.
            self.connection = try TLSConnection(
                context: self.tlsContext,
                serverHostname: self.serverHostname,
                sessionCacheKey: self.sessionCacheKey
            )
        } catch {
            self.fail(context: context, error: error)
            return false
        }
        self.continueHandshake(context: context)
        return self.stateMachine.state == .handshaking
    }

    /// Runs the handshake as far as the bytes received allow.
    /// Returns whether it is complete.
    @discardableResult
    private func continueHandshake(context: ChannelHandlerContext) -> Bool {
        guard let connection = self.connection else {
            return false
        }
        switch connection.handshake() {
        case .needsMoreData:
            self.writeNetworkOutput(context: context, flush: .ifWritten)
            return false
        case .failed(let error):
            self.fail(context: context, error: error)
            return false
        case .complete:
            guard self.stateMachine.handshakeCompleted() else {
                return false
            }
            let result = connection.handshakeCompleted()
            self.handshakeResult = result
            if !self.keepsPeerCertificate {
                self.handshakeResult?.peerCertificate = nil
            }
            context.fireUserInboundEventTriggered(result)
            context.fireUserInboundEventTriggered(TLSUserEvent.handshakeCompleted(negotiatedProtocol: result.negotiatedProtocol))
            guard self.stateMachine.canSend else {
                return false  // the events closed the channel
            }
            // Sends the handshake's last flight and what the application
            // wrote and flushed while it ran, in one flushed write.
            self.encryptFlushedWrites(context: context)
            return true
        }
    }

    // MARK: Inbound

    public func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch self.stateMachine.channelRead() {
        case .startHandshakeAndContinue:
            // Bytes before channelActive: a handler added to an active channel.
            guard self.startHandshake(context: context), let connection = self.connection else {
                return
            }
            connection.receiveFromNetwork(self.unwrapInboundIn(data))
            guard self.continueHandshake(context: context) else {
                return
            }
            self.readPlaintext(context: context, connection: connection)
        case .continueHandshake:
            guard let connection = self.connection else {
                return
            }
            connection.receiveFromNetwork(self.unwrapInboundIn(data))
            guard self.continueHandshake(context: context) else {
                return
            }
            self.readPlaintext(context: context, connection: connection)
        case .decrypt:
            guard let connection = self.connection else {
                return
            }
            connection.receiveFromNetwork(self.unwrapInboundIn(data))
            self.readPlaintext(context: context, connection: connection)
        case .ignore:
            return
        }
    }

    public func channelReadComplete(context: ChannelHandlerContext) {
        if self.stateMachine.state == .handshaking {
            // The handshake needs the peer's answer even if the application
            // turned auto-read off.
            context.read()
        }
        context.fireChannelReadComplete()
    }

    /// Decrypts everything received so far and passes it on as one buffer.
    private func readPlaintext(context: ChannelHandlerContext, connection: TLSConnection) {
        // Plaintext is never longer than the ciphertext it came from, so one
        // buffer, sized by what arrived, holds the whole burst.
        var plaintext = self.plaintextBuffers.take(capacity: connection.pendingInboundBytes, allocator: context.channel.allocator)
        var outcome = TLSConnection.ReadResult.needsMoreData
        reading: while true {
            switch connection.read(into: &plaintext) {
            case .data:
                continue
            case let result:
                outcome = result
                break reading
            }
        }
        if plaintext.readableBytes > 0 {
            context.fireChannelRead(self.wrapInboundOut(plaintext))
        }
        self.plaintextBuffers.giveBack(plaintext)
        switch outcome {
        case .data, .needsMoreData:
            // Session tickets, key updates: whatever OpenSSL wants to answer.
            self.writeNetworkOutput(context: context, flush: .ifWritten)
        case .closeNotify:
            self.peerSentCloseNotify(context: context)
        case .failed(let error):
            self.fail(context: context, error: error)
        }
    }

    private func peerSentCloseNotify(context: ChannelHandlerContext) {
        guard self.stateMachine.closeNotifyReceived() == .replyAndClose, let connection = self.connection else {
            return
        }
        self.failPendingWrites(ChannelError.outputClosed)
        connection.shutdown()
        self.writeNetworkOutput(context: context, flush: .ifWritten)
        context.fireUserInboundEventTriggered(TLSUserEvent.shutdownCompleted)
        context.close(promise: nil)
    }

    // MARK: Outbound

    public func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch self.stateMachine.write() {
        case .buffer:
            self.pendingWrites.append(self.unwrapOutboundIn(data), promise: promise)
        case .fail:
            promise?.fail(ChannelError.ioOnClosedChannel)
        }
    }

    public func flush(context: ChannelHandlerContext) {
        self.pendingWrites.markFlushed()
        if self.stateMachine.canSend {
            self.encryptFlushedWrites(context: context)
        }
    }

    public func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        switch self.stateMachine.close(mode: mode) {
        case .sendCloseNotifyAndClose:
            // Written-and-flushed data goes out before close_notify; data
            // written and never flushed is dropped, as on a plain channel.
            self.encryptFlushedWrites(context: context)
            self.failPendingWrites(ChannelError.ioOnClosedChannel)
            self.connection?.shutdown()
            self.writeNetworkOutput(context: context, flush: .ifWritten)
        case .failPendingAndClose:
            self.failPendingWrites(ChannelError.ioOnClosedChannel)
        case .forward:
            break
        }
        context.close(mode: mode, promise: promise)
    }

    /// Fails every write not yet encrypted. The promises are failed once `pendingWrites` is
    /// empty and no longer being modified: a promise's callback may close the channel, which
    /// re-enters this handler (`close`, `channelInactive`), and both fail pending writes too.
    private func failPendingWrites(_ error: any Error) {
        for promise in self.pendingWrites.removeAll() {
            promise.fail(error)
        }
    }

    /// Encrypts the flushed writes, coalescing small ones, and writes the
    /// ciphertext downstream with one flush.
    private func encryptFlushedWrites(context: ChannelHandlerContext) {
        guard let connection = self.connection else {
            return
        }
        var promises: [EventLoopPromise<Void>] = []
        var coalesced: ByteBuffer?
        var failure: TLSError?

        func encrypt(_ buffer: ByteBuffer) {
            // Hands big bursts downstream as they go, a slice of a large buffer at a time,
            // so the memory BIO stays small and is reused through the burst (letting it
            // grow to a multi-megabyte buffer's size cost a realloc and a zeroing free of
            // each size it passed through); the last piece always waits for the final
            // write, which carries the promises.
            buffer.withUnsafeReadableBytes { bytes in
                var offset = 0
                repeat {
                    guard failure == nil else {
                        return
                    }
                    if connection.pendingNetworkBytes >= Self.outputChunk {
                        self.writeNetworkOutput(context: context, flush: .never)
                    }
                    let end = min(bytes.count, offset + Self.outputChunk)
                    failure = connection.write(UnsafeRawBufferPointer(rebasing: bytes[offset..<end]))
                    offset = end
                } while offset < bytes.count
            }
        }

        while let (buffer, promise) = self.pendingWrites.popFlushed() {
            if let promise {
                promises.append(promise)
            }
            if buffer.readableBytes >= TLSConnection.maximumRecordSize {
                if let pending = coalesced.take() {
                    encrypt(pending)
                }
                encrypt(buffer)
            } else if var pending = coalesced.take() {
                if pending.readableBytes + buffer.readableBytes > TLSConnection.maximumRecordSize {
                    encrypt(pending)
                    pending.clear()
                }
                var buffer = buffer
                pending.writeBuffer(&buffer)
                coalesced = pending
            } else if self.pendingWrites.hasFlushed {
                // More small writes follow: gather them into full records.
                let capacity = min(buffer.readableBytes + self.pendingWrites.bytes, TLSConnection.maximumRecordSize)
                var pending = context.channel.allocator.buffer(capacity: capacity)
                var buffer = buffer
                pending.writeBuffer(&buffer)
                coalesced = pending
            } else {
                encrypt(buffer)
            }
        }
        if let pending = coalesced.take() {
            encrypt(pending)
        }
        if let failure {
            promises.forEach { $0.fail(failure) }
            self.fail(context: context, error: failure)
            return
        }
        self.writeNetworkOutput(context: context, flush: .always, promises: promises)
    }

    /// Bytes of ciphertext after which a long flush hands some downstream.
    private static let outputChunk = 256 * 1_024

    /// When ``writeNetworkOutput(context:flush:promises:)`` flushes.
    private enum NetworkFlush {
        /// The application flushed: pass the flush on even with nothing new.
        case always
        /// Flush if this or an earlier unflushed call wrote something.
        case ifWritten
        /// More output follows in this burst.
        case never
    }

    /// Writes what OpenSSL produced for the network as one buffer.
    private func writeNetworkOutput(context: ChannelHandlerContext, flush: NetworkFlush, promises: [EventLoopPromise<Void>] = []) {
        guard let connection = self.connection, connection.pendingNetworkBytes > 0 else {
            // Nothing new to send; earlier writes of this flush carry the data.
            self.connection?.releaseIdleBIOs()
            promises.forEach { $0.succeed() }
            switch flush {
            case .always:
                self.flushNetwork(context: context)
            case .ifWritten where self.hasUnflushedNetworkWrites:
                self.flushNetwork(context: context)
            case .ifWritten, .never:
                break
            }
            return
        }
        var output = self.ciphertextBuffers.take(capacity: connection.pendingNetworkBytes, allocator: context.channel.allocator)
        connection.readNetworkOutput(into: &output)
        if flush != .never {
            // Mid-burst the BIO is about to fill again: keep it until the burst ends.
            connection.releaseIdleBIOs()
        }
        let promise: EventLoopPromise<Void>?
        switch promises.count {
        case 0:
            promise = nil
        case 1:
            promise = promises[0]
        default:
            let combined = context.eventLoop.makePromise(of: Void.self)
            combined.futureResult.whenComplete { result in
                promises.forEach { $0.completeWith(result) }
            }
            promise = combined
        }
        context.write(self.wrapOutboundOut(output), promise: promise)
        self.ciphertextBuffers.giveBack(output)
        switch flush {
        case .always, .ifWritten:
            self.flushNetwork(context: context)
        case .never:
            self.hasUnflushedNetworkWrites = true
        }
    }

    private func flushNetwork(context: ChannelHandlerContext) {
        self.hasUnflushedNetworkWrites = false
        context.flush()
    }

    // MARK: Failure

    /// Sends any alert OpenSSL produced, reports the error, and closes.
    private func fail(context: ChannelHandlerContext, error: Error) {
        guard self.stateMachine.failed() == .reportAndClose else {
            return
        }
        self.writeNetworkOutput(context: context, flush: .ifWritten)
        self.failPendingWrites(error)
        context.fireErrorCaught(error)
        context.close(promise: nil)
    }
}

@available(*, unavailable)
extension TLSHandler: Sendable {}
