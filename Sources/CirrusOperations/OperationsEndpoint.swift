public import NIOCore
import NIOHTTP1
import NIOPosix
public import Prometheus
import Synchronization

/// The HTTP endpoint `cirrusd --metrics-address` serves, plain HTTP/1.1 meant for loopback or
/// a private network: `/metrics` (Prometheus text format), `/healthz` (the process answers),
/// `/readyz` (the storage is reachable and the server accepts connections; otherwise 503
/// with the reasons, one a line) and, when given an ``OnlineBackup``, `POST /backup`.
///
/// For example:
/// ```swift
/// let endpoint = OperationsEndpoint(registry: registry, beforeScrape: { … }, readiness: { [] })
/// let address = try await endpoint.start(host: "127.0.0.1", port: 9090)
/// …
/// await endpoint.shutdown()
/// ```
public final class OperationsEndpoint: Sendable {
    /// The reasons the server is not ready; empty when it is.
    public typealias Readiness = @Sendable () async -> [String]

    let registry: PrometheusCollectorRegistry
    let beforeScrape: @Sendable () -> Void
    let readiness: Readiness
    /// Answers `POST /backup`; nil = backups are off (404).
    let backup: OnlineBackup?
    private let group: any EventLoopGroup
    private let channel = Mutex<(any Channel)?>(nil)

    /// - parameter beforeScrape: called before each `/metrics` answer, to set sampled gauges.
    /// - parameter readiness: asked on each `/readyz`.
    /// - parameter backup: takes the backups `POST /backup` asks for; nil turns that path off.
    public init(
        registry: PrometheusCollectorRegistry,
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        beforeScrape: @escaping @Sendable () -> Void = {},
        readiness: @escaping Readiness,
        backup: OnlineBackup? = nil
    ) {
        self.registry = registry
        self.backup = backup
        self.group = group
        self.beforeScrape = beforeScrape
        self.readiness = readiness
    }

    /// Binds and starts answering; returns the bound address (useful with port 0).
    ///
    /// - throws: `IOError` when the address cannot be bound.
    @discardableResult
    public func start(host: String, port: Int) async throws -> SocketAddress {
        let channel = try await ServerBootstrap(group: self.group)
            .serverChannelOption(.backlog, value: 64)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                    try channel.pipeline.syncOperations.addHandler(OperationsRequestHandler(endpoint: self))
                }
            }
            .bind(host: host, port: port)
            .get()
        self.channel.withLock { $0 = channel }
        guard let address = channel.localAddress else {
            throw IOError(errnoCode: 0, reason: "the metrics listener has no local address")
        }
        return address
    }

    /// Stops listening. Requests being answered finish on their own connections.
    public func shutdown() async {
        let channel = self.channel.withLock { channel in
            defer { channel = nil }
            return channel
        }
        try? await channel?.close()
    }
}
