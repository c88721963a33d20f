import CirrusTLS
import CirrusWire
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

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
        var connections: [ObjectIdentifier: any Channel] = [:]
        var isShuttingDown = false
        /// Completed when a graceful shutdown has closed every connection.
        var shutdownComplete: EventLoopPromise<Void>?
    }

    public let configuration: ServerConfiguration
    private let group: any EventLoopGroup
    private let logger: Logger
    private let state = NIOLockedValueBox(State())

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
        let configuration = self.configuration
        let logger = self.logger
        let channel = try await ServerBootstrap(group: self.group)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelOption(.maxMessagesPerRead, value: 16)
            .childChannelOption(.writeBufferWaterMark, value: .init(low: 32 * 1024, high: 256 * 1024))
            .childChannelInitializer { [weak self] channel in
                guard let self, self.admit(channel) else {
                    return channel.close()
                }
                return channel.eventLoop.makeCompletedFuture {
                    try Self.configurePipeline(
                        channel.pipeline.syncOperations,
                        tlsContext: tlsContext,
                        configuration: configuration,
                        logger: logger
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

    /// The handlers of one connection, in order: TLS, frame decoding and encoding, protocol.
    static func configurePipeline(
        _ pipeline: ChannelPipeline.SynchronousOperations,
        tlsContext: TLSContext,
        configuration: ServerConfiguration,
        logger: Logger
    ) throws {
        try pipeline.addHandler(TLSHandler(context: tlsContext))
        try pipeline.addHandler(
            ByteToMessageHandler(FrameDecoder(maximumFrameBytes: configuration.maximumFrameBytes))
        )
        let encoder = ConnectionFrameEncoder(maximumFrameBytes: configuration.maximumFrameBytes)
        try pipeline.addHandler(encoder)
        try pipeline.addHandler(ConnectionHandler(configuration: configuration, logger: logger, encoder: encoder))
    }

    private func admit(_ channel: any Channel) -> Bool {
        let id = ObjectIdentifier(channel)
        let admitted = self.state.withLockedValue { state -> Bool in
            guard !state.isShuttingDown, state.connections.count < self.configuration.maximumConnections else {
                return false
            }
            state.connections[id] = channel
            return true
        }
        if admitted {
            channel.closeFuture.whenComplete { [weak self] _ in
                self?.state.withLockedValue { _ = $0.connections.removeValue(forKey: id) }
            }
        } else {
            self.logger.warning("refusing connection: at the connection limit or shutting down")
        }
        return admitted
    }

    /// Waits until the server has stopped: the listener closed and, after
    /// `shutdownGracefully()`, every connection drained and closed.
    public func run() async throws {
        let (channel, shutdownComplete) = self.state.withLockedValue { ($0.serverChannel, $0.shutdownComplete) }
        guard let channel else { return }
        try await channel.closeFuture.get()
        try await shutdownComplete?.futureResult.get()
    }

    /// Stops accepting, sends `GoAway` on every connection, lets open streams finish for up to
    /// the grace period, then closes what is left.
    public func shutdownGracefully() async {
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
