#if canImport(Glibc)
import Glibc
#endif
import CirrusTLS
import CirrusWire
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import Synchronization

/// The Cirrus server: accepts TLS connections and speaks the Cirrus protocol on each.
///
/// For example:
/// ```swift
/// let server = CirrusServer(configuration: configuration)
/// let address = try await server.start()
/// print("listening on \(address)")
/// try await server.run()           // until shutdownGracefully() is called
/// ```
public final class CirrusServer: Sendable {
    private struct State {
        var serverChannel: (any Channel)?
        /// What new connections handshake with; swapped by `reloadTLS()`.
        var tlsContext: TLSContext?
        var connections: [ObjectIdentifier: any Channel] = [:]
        var isShuttingDown = false
        /// Completed when a graceful shutdown has closed every connection.
        var shutdownComplete: EventLoopPromise<Void>?
        /// When freed memory was last handed back to the system.
        var lastTrim = NIODeadline.uptimeNanoseconds(0)
    }

    public let configuration: ServerConfiguration
    private let group: any EventLoopGroup
    private let logger: Logger
    private let state = NIOLockedValueBox(State())
    /// Numbers the connections in the order they are accepted, for their log lines.
    private let connectionNumbers = Atomic<UInt64>(0)

    public init(
        configuration: ServerConfiguration,
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        logger: Logger = Logger(label: "cirrusd")
    ) {
        self.configuration = configuration
        self.group = group
        self.logger = logger
    }

    /// The address the server listens on, once started.
    public var localAddress: SocketAddress? {
        self.state.withLockedValue { $0.serverChannel?.localAddress }
    }

    /// Whether the server listens and takes new connections (started, not shutting down).
    public var isAcceptingConnections: Bool {
        self.state.withLockedValue { $0.serverChannel != nil && !$0.isShuttingDown }
    }

    /// The number of connections open now.
    public var connectionCount: Int {
        self.state.withLockedValue { $0.connections.count }
    }

    /// Loads the TLS configuration and binds. Returns the bound address (useful with port 0).
    ///
    /// - throws: `TLSError` when a certificate, key or CA cannot be loaded; `IOError` when the
    ///   address cannot be bound.
    @discardableResult
    public func start() async throws -> SocketAddress {
        let tlsContext = try TLSContext(configuration: self.configuration.tls)
        self.state.withLockedValue { $0.tlsContext = tlsContext }
        let configuration = SharedServerConfiguration(self.configuration)
        let logger = self.logger
        let channel = try await ServerBootstrap(group: self.group)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelOption(.maxMessagesPerRead, value: 16)
            .childChannelOption(.writeBufferWaterMark, value: .init(low: 32 * 1024, high: 256 * 1024))
            // An idle connection keeps its last receive buffer: start it small (NIO's default is
            // 2 KiB); it grows while reads fill it.
            .childChannelOption(.recvAllocator, value: Self.receiveAllocator)
            .childChannelInitializer { [weak self] channel in
                guard let self, self.admit(channel) else {
                    return channel.close()
                }
                let current = self.state.withLockedValue { $0.tlsContext } ?? tlsContext
                // Every line about this connection says which one it is, and from where.
                var connectionLogger = logger
                connectionLogger[metadataKey: "connection"] = "\(self.connectionNumbers.add(1, ordering: .relaxed).newValue)"
                connectionLogger[metadataKey: "peer"] = "\(channel.remoteAddress.map { "\($0.ipAddress ?? "?"):\($0.port ?? 0)" } ?? "unknown")"
                return channel.eventLoop.makeCompletedFuture {
                    try Self.configurePipeline(
                        channel.pipeline.syncOperations,
                        tlsContext: current,
                        configuration: configuration,
                        logger: connectionLogger
                    )
                }
            }
            .bind(host: self.configuration.host, port: self.configuration.port)
            .get()
        let shutdownComplete = channel.eventLoop.makePromise(of: Void.self)
        self.state.withLockedValue {
            $0.serverChannel = channel
            $0.shutdownComplete = shutdownComplete
        }
        guard let address = channel.localAddress else {
            throw IOError(errnoCode: 0, reason: "listener has no local address")
        }
        return address
    }

    /// Reads the certificate chain, key, client CAs and revocation lists of
    /// `configuration.tls` again and makes new connections use them. Open
    /// connections keep the context they started with. Session tickets
    /// issued before the reload are no longer accepted (their keys belong to
    /// the old context), so every client's next handshake is checked against
    /// the new files.
    ///
    /// For example, on SIGHUP: `try server.reloadTLS()`.
    ///
    /// - throws: `TLSError` when a file cannot be loaded; the server then
    ///   goes on with the context it had.
    public func reloadTLS() throws {
        let fresh = try TLSContext(configuration: self.configuration.tls)
        self.state.withLockedValue { $0.tlsContext = fresh }
    }

    /// How each connection sizes its receive buffers: 512 bytes at first, doubling while reads
    /// fill them, up to 64 KiB.
    static let receiveAllocator = AdaptiveRecvByteBufferAllocator(minimum: 256, initial: 512, maximum: 65_536)

    /// The handlers of one connection, in order: TLS, frame decoding and encoding, protocol.
    static func configurePipeline(
        _ pipeline: ChannelPipeline.SynchronousOperations,
        tlsContext: TLSContext,
        configuration shared: SharedServerConfiguration,
        logger: Logger
    ) throws {
        let configuration = shared.configuration
        if let metrics = configuration.metrics {
            try pipeline.addHandler(TrafficCountingHandler(metrics: metrics))
        }
        let accounting = configuration.outboundBudget.map(OutboundAccountingHandler.init(budget:))
        if let accounting {
            try pipeline.addHandler(accounting)
        }
        // The connection handler takes the client's certificate from the handshake event and
        // drops it after Hello; the TLS handler need not keep it for the connection's life.
        try pipeline.addHandler(TLSHandler(context: tlsContext, keepsPeerCertificate: false))
        try pipeline.addHandler(
            ByteToMessageHandler(FrameDecoder(maximumFrameBytes: configuration.maximumFrameBytes))
        )
        let encoder = ConnectionFrameEncoder(maximumFrameBytes: configuration.maximumFrameBytes)
        try pipeline.addHandler(encoder)
        try pipeline.addHandler(ConnectionHandler(configuration: shared, outbound: accounting, logger: logger, encoder: encoder))
    }

    private func admit(_ channel: any Channel) -> Bool {
        if let address = channel.remoteAddress?.ipAddress,
            !self.configuration.peerLimits.admitHandshake(from: address, now: .now())
        {
            self.configuration.metrics?.refusedForHandshakeRate.increment()
            self.logger.info("refusing connection from \(address): handshakes faster than \(self.configuration.peerLimits.configuration.handshakesPerAddressPerSecond) per second")
            return false
        }
        let id = ObjectIdentifier(channel)
        let admitted = self.state.withLockedValue { state -> Bool in
            guard !state.isShuttingDown, state.connections.count < self.configuration.maximumConnections else {
                return false
            }
            state.connections[id] = channel
            return true
        }
        if admitted {
            self.configuration.metrics?.connectionsAccepted.increment()
            channel.closeFuture.whenComplete { [weak self] _ in
                let trim = self?.state.withLockedValue { state -> Bool in
                    state.connections.removeValue(forKey: id)
                    let now = NIODeadline.now()
                    guard state.connections.isEmpty || now - state.lastTrim > Self.trimInterval else { return false }
                    state.lastTrim = now
                    return true
                }
                if trim == true {
                    Self.returnFreedMemory()
                }
            }
        } else {
            self.configuration.metrics?.refusedAtLimit.increment()
            self.logger.warning("refusing connection: at the connection limit or shutting down")
        }
        return admitted
    }

    /// How often, at most, a closing connection hands freed memory back to the system (and
    /// always when the last one closes).
    static let trimInterval = TimeAmount.seconds(10)

    /// Hands the memory the allocator keeps after a burst back to the system: glibc keeps
    /// freed memory in its per-thread arenas, so a server that served a burst of connections
    /// would otherwise stay near its peak (the hostile-client tests measure it).
    static func returnFreedMemory() {
        #if canImport(Glibc)
        // `malloc_trim` is glibc's (malloc.h, which Swift's Glibc module does not import);
        // found at run time so another C library simply skips this.
        typealias MallocTrim = @convention(c) (Int) -> Int32
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "malloc_trim") else { return }
        let trim = unsafeBitCast(symbol, to: MallocTrim.self)
        Task.detached(priority: .background) { _ = trim(0) }
        #endif
    }

    /// Waits until the server has stopped: the listener closed and, after
    /// `shutdownGracefully()`, every connection drained and closed.
    public func run() async throws {
        let (channel, shutdownComplete) = self.state.withLockedValue { ($0.serverChannel, $0.shutdownComplete) }
        guard let channel else { return }
        try await channel.closeFuture.get()
        try await shutdownComplete?.futureResult.get()
    }

    /// Closes every connection of `user` with `NOT_AUTHENTICATED` (an administrator disabled
    /// them); streams on them end as when the client disconnects.
    public func closeConnections(of user: String, reason: String = "the user was disabled") {
        self.broadcast(CloseUserEvent(match: .user(user), reason: reason))
    }

    /// Closes every connection that authenticated with the directory token `id` with
    /// `NOT_AUTHENTICATED` (it was revoked or expired).
    public func closeConnections(usingToken id: String, reason: String = "the bearer token was revoked or expired") {
        self.broadcast(CloseUserEvent(match: .token(id), reason: reason))
    }

    private func broadcast(_ event: CloseUserEvent) {
        let connections = self.state.withLockedValue { Array($0.connections.values) }
        for connection in connections {
            connection.triggerUserOutboundEvent(event, promise: nil)
        }
    }

    /// Stops accepting, sends `GoAway` on every connection, lets open streams finish for up to
    /// the grace period, then closes what is left.
    public func shutdownGracefully() async {
        self.configuration.users?.beginShutdown()
        let (listener, connections, shutdownComplete) = self.state.withLockedValue { state in
            state.isShuttingDown = true
            return (state.serverChannel, Array(state.connections.values), state.shutdownComplete)
        }
        defer { shutdownComplete?.succeed(()) }
        try? await listener?.close()
        for connection in connections {
            connection.triggerUserOutboundEvent(GracefulShutdownEvent(), promise: nil)
        }
        let deadline = NIODeadline.now() + self.configuration.shutdownGracePeriod
        for connection in connections {
            let remaining = deadline - .now()
            let closed = connection.eventLoop.scheduleTask(in: max(remaining, .zero)) {
                connection.close(promise: nil)
            }
            try? await connection.closeFuture.get()
            closed.cancel()
        }
    }
}
