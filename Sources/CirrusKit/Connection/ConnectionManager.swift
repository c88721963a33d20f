import CirrusTLS
import CirrusWire
import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// Keeps a container's one multiplexed connection: connects lazily when an operation needs it,
/// reconnects after it dropped or drained with jittered exponential backoff, re-opens streams
/// the server never saw (GoAway) on the next connection, and resumes long-lived operations
/// whose connection was lost. With several servers (``CirrusClientConfiguration/servers``) a
/// failed attempt moves on to the next one, round robin, and the backoff starts only once
/// each has failed in a row.
final class ConnectionManager: Sendable {
    private struct State {
        var tlsContext: TLSContext?
        /// The connection new streams go to.
        var current: ClientConnection?
        /// A connection attempt in progress (it may still be waiting out its backoff).
        var attempt: EventLoopFuture<ClientConnection>?
        var consecutiveFailures = 0
        var lastFailure: NIODeadline?
        /// The index in `servers` of the server connected to, or tried next.
        var serverIndex = 0
        var isShutDown = false
    }

    let configuration: CirrusClientConfiguration
    /// ``CirrusClientConfiguration/servers``, never empty.
    let servers: [CirrusClientConfiguration.Server]
    private let group: any EventLoopGroup
    /// Keepalive, handshake and idle timers of each connection.
    let machineConfiguration: ConnectionStateMachine.Configuration
    let timerInterval: TimeAmount
    /// Bytes and connections, for `CKContainer.transportStatistics` and swift-metrics.
    let counters: TransportCounters
    private let state = NIOLockedValueBox(State())

    /// - parameter container: the container identifier the metrics carry as their `container`
    ///   dimension.
    init(
        configuration: CirrusClientConfiguration,
        container: String = "",
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        machineConfiguration: ConnectionStateMachine.Configuration = .init(),
        timerInterval: TimeAmount = .seconds(1)
    ) {
        self.configuration = configuration
        self.servers = configuration.servers
        self.counters = TransportCounters(metrics: ClientMetrics(container: container, factory: configuration.metricsFactory))
        self.group = group
        var machine = machineConfiguration
        machine.handshakeTimeout = .nanoseconds(Int64(configuration.connectTimeout * 1e9))
        self.machineConfiguration = machine
        self.timerInterval = timerInterval
    }

    private var logger: Logger { self.configuration.logger }

    /// The server connected to, or tried next.
    var server: CirrusClientConfiguration.Server {
        let index = self.state.withLockedValue { $0.serverIndex }
        return self.servers[index % self.servers.count]
    }

    var serverDescription: String { self.server.description }

    // MARK: - Streams

    /// Hands `stream` to the current connection, connecting first when there is none. Failures
    /// reach the stream as `.failed`.
    func open(_ stream: ClientStream) {
        guard stream.beginAttempt() else {
            stream.fail(.network("\(self.serverDescription) kept refusing new streams"))
            return
        }
        // The usual case, a connection that is up, takes no future.
        if let connection = self.activeConnection() {
            self.open(stream, on: connection)
            return
        }
        self.connectionFailingOver().whenComplete { result in
            switch result {
            case .failure(let error):
                self.lost(stream, ConnectionFailure.from(error, beforeHelloAck: true, server: self.serverDescription))
            case .success(let connection):
                self.open(stream, on: connection)
            }
        }
    }

    private func open(_ stream: ClientStream, on connection: ClientConnection) {
        connection.open(stream) { opened in
            guard !opened else { return }
            self.counters.metrics.retries.increment()
            self.retire(connection)
            self.open(stream)
        }
    }

    /// The current connection, if it is up.
    private func activeConnection() -> ClientConnection? {
        self.state.withLockedValue { state in
            guard let current = state.current, current.channel.isActive else { return nil }
            return current
        }
    }

    /// `stream` has no connection any more (it dropped, or none could be made): a long-lived
    /// operation's stream is attached again after the reconnect backoff (which grows with the
    /// attempts that brought nothing); any other fails.
    func lost(_ stream: ClientStream, _ failure: ConnectionFailure) {
        if self.state.withLockedValue({ $0.isShutDown }) {
            stream.fail(.network("the container's connection was shut down; \(failure.message)"))
            return
        }
        let operationID = stream.open.operationID
        switch stream.connectionLost(failure, maximumAttempts: self.configuration.maximumResumeAttempts) {
        case .ended:
            if stream.isLongLived {
                self.logger.debug(
                    "long-lived operation not resumed after its connection was lost",
                    metadata: ["operation": "\(operationID)", "reason": "\(failure.message)"])
            }
            return
        case .resume(let attempt):
            let delay = Self.backoff(
                failures: attempt,
                base: self.configuration.reconnectBaseDelay,
                maximum: self.configuration.reconnectMaximumDelay
            )
            self.counters.metrics.resumes.increment()
            self.logger.info(
                "resuming long-lived operation after its connection was lost",
                metadata: [
                    "operation": "\(operationID)", "attempt": "\(attempt)",
                    "delay": "\(String(format: "%.3f", delay))s", "reason": "\(failure.message)",
                ])
            self.group.next().scheduleTask(in: .nanoseconds(Int64(delay * 1e9))) {
                self.open(stream)
            }
        }
    }

    /// The connection new streams go to, connecting if needed.
    func connection() -> EventLoopFuture<ClientConnection> {
        let (future, start) = self.state.withLockedValue { state -> (EventLoopFuture<ClientConnection>, EventLoopPromise<ClientConnection>?) in
            if let current = state.current, current.channel.isActive {
                return (current.eventLoop.makeSucceededFuture(current), nil)
            }
            state.current = nil
            if let attempt = state.attempt {
                return (attempt, nil)
            }
            let promise = self.group.next().makePromise(of: ClientConnection.self)
            state.attempt = promise.futureResult
            return (promise.futureResult, promise)
        }
        if let start {
            self.startAttempt(start)
        }
        return future
    }

    /// ``connection()``, tried on the next server when an attempt fails while some server has
    /// not been tried since the last connection (those attempts wait no backoff). One call
    /// waits for at most one attempt per server.
    func connectionFailingOver() -> EventLoopFuture<ClientConnection> {
        self.connectionFailingOver(attemptsLeft: self.servers.count)
    }

    private func connectionFailingOver(attemptsLeft: Int) -> EventLoopFuture<ClientConnection> {
        let attempt = self.connection()
        return attempt.flatMapError { error in
            let failuresInARow = self.state.withLockedValue { $0.consecutiveFailures }
            guard attemptsLeft > 1, failuresInARow < self.servers.count else {
                return attempt.eventLoop.makeFailedFuture(error)
            }
            return self.connectionFailingOver(attemptsLeft: attemptsLeft - 1)
        }
    }

    /// The delay before the next attempt after `failures` failures in a row: exponential,
    /// capped, with full jitter in its upper half.
    static func backoff(failures: Int, base: TimeInterval, maximum: TimeInterval) -> TimeInterval {
        guard failures > 0 else { return 0 }
        let exponential = min(maximum, base * pow(2, Double(min(failures - 1, 30))))
        return exponential * Double.random(in: 0.5...1.0)
    }

    private func startAttempt(_ promise: EventLoopPromise<ClientConnection>) {
        let (failures, lastFailure, serverIndex) = self.state.withLockedValue {
            ($0.consecutiveFailures, $0.lastFailure, $0.serverIndex % self.servers.count)
        }
        let target = self.servers[serverIndex]
        // Each other server gets one attempt at once before the backoff begins.
        let delay = Self.backoff(
            failures: max(0, failures - (self.servers.count - 1)),
            base: self.configuration.reconnectBaseDelay,
            maximum: self.configuration.reconnectMaximumDelay
        )
        var wait = TimeAmount.nanoseconds(Int64(delay * 1e9))
        if let lastFailure {
            wait = wait - (NIODeadline.now() - lastFailure)
        }
        let loop = promise.futureResult.eventLoop
        // The attempt's outcome is recorded (`attempt` cleared, the failures counted) before
        // the future callers wait on completes. Recording it in a callback on that future raced
        // with callers: one that joined the attempt before this callback was added (a caller on
        // the event loop adds its callback at once; this one, added off the loop, is queued)
        // ran first, still saw the failed attempt as the one in progress, and joined it again,
        // at once, recursing until its thread's stack overflowed (SIGSEGV).
        let outcome = loop.makePromise(of: ClientConnection.self)
        outcome.futureResult.whenComplete { result in
            defer { promise.completeWith(result) }
            let failures = self.state.withLockedValue { state -> Int in
                state.attempt = nil
                switch result {
                case .success(let connection):
                    state.current = connection
                    state.consecutiveFailures = 0
                    state.lastFailure = nil
                case .failure:
                    state.consecutiveFailures += 1
                    state.lastFailure = .now()
                    state.serverIndex = (serverIndex + 1) % self.servers.count
                }
                return state.consecutiveFailures
            }
            switch result {
            case .success:
                self.logger.debug("connected", metadata: ["server": "\(target)"])
            case .failure(let error):
                self.counters.metrics.connectionFailures.increment()
                self.logger.warning(
                    "connection attempt failed",
                    metadata: [
                        "server": "\(target)", "failuresInARow": "\(failures)",
                        "error": "\(ConnectionFailure.from(error, beforeHelloAck: true, server: target.description).message)",
                    ])
            }
        }
        if wait > .zero {
            self.logger.debug(
                "waiting before connecting again",
                metadata: ["server": "\(target)", "delay": "\(wait.nanoseconds / 1_000_000)ms"])
        }
        if wait > .zero {
            loop.scheduleTask(in: wait) { self.connect(to: target, on: loop, promise: outcome) }
        } else {
            loop.execute { self.connect(to: target, on: loop, promise: outcome) }
        }
    }

    /// TLS sessions of every container in this process, by ``tlsSessionKey(for:)``.
    private static let tlsSessions = TLSSessionCache(maximumKeys: 64)

    /// Where this container's TLS sessions are kept: by server, and by the trust and identity
    /// that checked it, so a session is only offered with the certificates that made it. Nil
    /// when the configuration turns resumption off.
    private func tlsSessionKey(for server: CirrusClientConfiguration.Server) -> String? {
        let configuration = self.configuration
        guard configuration.resumesTLSSessions else { return nil }
        return "\(configuration.verifiedServerName(for: server))@\(server)"
            + " trust=\(configuration.trustRootsPath ?? "system") identity=\(configuration.certificateChainPath ?? "none")"
    }

    private func tlsContext() throws -> TLSContext {
        try self.state.withLockedValue { state in
            if let context = state.tlsContext { return context }
            let context = try TLSContext(
                configuration: TLSConfiguration.client(
                    trustRootsPath: self.configuration.trustRootsPath,
                    certificateChainPath: self.configuration.certificateChainPath,
                    privateKeyPath: self.configuration.privateKeyPath
                ),
                sessionCache: Self.tlsSessions
            )
            state.tlsContext = context
            return context
        }
    }

    private func connect(
        to target: CirrusClientConfiguration.Server, on loop: any EventLoop, promise: EventLoopPromise<ClientConnection>
    ) {
        if self.state.withLockedValue({ $0.isShutDown }) {
            promise.fail(ConnectionFailure.network("the container's connection was shut down"))
            return
        }
        let tls: TLSContext
        do {
            tls = try self.tlsContext()
        } catch {
            promise.fail(ConnectionFailure.from(error, beforeHelloAck: true, server: target.description))
            return
        }
        let hello = Wire.Hello(
            protocolVersion: Wire.protocolVersion,
            clientName: self.configuration.clientName,
            clientVersion: self.configuration.clientVersion,
            bearerToken: self.configuration.bearerToken,
            limits: Wire.Limits(maxFrameBytes: UInt32(FrameDecoder.defaultMaximumFrameBytes))
        )
        let ready = loop.makePromise(of: Wire.HelloAck.self)
        let server = target.description
        let serverName = self.configuration.verifiedServerName(for: target)
        let sessionCacheKey = self.tlsSessionKey(for: target)
        let machine = self.machineConfiguration
        let timerInterval = self.timerInterval
        let counters = self.counters
        let callbacksBox = NIOLockedValueBox<(any Channel)?>(nil)
        let callbacks = ClientConnectionHandler.Callbacks(
            draining: { [weak self] in
                guard let self, let channel = callbacksBox.withLockedValue({ $0 }) else { return }
                self.logger.info("the server is draining the connection (GoAway); new operations go to a new one",
                                 metadata: ["server": "\(server)"])
                self.retire(channel: channel)
            },
            retry: { [weak self] streams in
                guard let self else {
                    streams.forEach { $0.fail(.network("the container is gone")) }
                    return
                }
                if !streams.isEmpty {
                    self.counters.metrics.retries.increment(by: streams.count)
                    self.logger.info(
                        "opening again on a new connection the streams the server never ran",
                        metadata: ["server": "\(server)", "streams": "\(streams.count)"])
                }
                streams.forEach { self.open($0) }
            },
            lost: { [weak self] streams, failure in
                guard let self else {
                    streams.forEach { $0.fail(failure) }
                    return
                }
                streams.forEach { self.lost($0, failure) }
            }
        )
        let timeout = TimeAmount.nanoseconds(Int64(self.configuration.connectTimeout * 1e9))
        ClientBootstrap(group: loop)
            .connectTimeout(timeout)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                callbacksBox.withLockedValue { $0 = channel }
                return channel.eventLoop.makeCompletedFuture {
                    let encoder = ClientFrameEncoder()
                    let handler = ClientConnectionHandler(
                        hello: hello,
                        server: server,
                        machine: machine,
                        timerInterval: timerInterval,
                        ready: ready,
                        callbacks: callbacks,
                        encoder: encoder
                    )
                    let sync = channel.pipeline.syncOperations
                    try sync.addHandler(TransportCountingHandler(counters: counters))
                    try sync.addHandler(TLSHandler(context: tls, serverHostname: serverName, sessionCacheKey: sessionCacheKey))
                    try sync.addHandler(ByteToMessageHandler(FrameDecoder()))
                    try sync.addHandler(encoder)
                    try sync.addHandler(handler)
                }
            }
            .connect(host: target.host, port: target.port)
            .whenComplete { result in
                switch result {
                case .failure(let error):
                    ready.fail(error)
                    promise.fail(ConnectionFailure.from(error, beforeHelloAck: true, server: server))
                case .success(let channel):
                    // Bound the TLS handshake and Hello as a whole.
                    let deadline = loop.scheduleTask(in: timeout) {
                        ready.fail(ConnectionFailure.network("\(server) did not answer Hello within \(timeout)"))
                        channel.close(promise: nil)
                    }
                    ready.futureResult.whenComplete { _ in deadline.cancel() }
                    channel.pipeline.handler(type: ClientConnectionHandler.self).whenComplete { found in
                        guard case .success(let handler) = found else {
                            promise.fail(ConnectionFailure.network("\(server): connection closed during setup"))
                            return
                        }
                        let bound = NIOLoopBound(handler, eventLoop: loop)
                        ready.futureResult.whenComplete { answer in
                            switch answer {
                            case .success(let ack):
                                counters.connected()
                                promise.succeed(ClientConnection(channel: channel, handler: bound, helloAck: ack))
                            case .failure(let error):
                                channel.close(promise: nil)
                                promise.fail(ConnectionFailure.from(error, beforeHelloAck: true, server: server))
                            }
                        }
                    }
                }
            }
    }

    /// New streams no longer go to `connection`.
    private func retire(_ connection: ClientConnection) {
        self.retire(channel: connection.channel)
    }

    private func retire(channel: any Channel) {
        self.state.withLockedValue { state in
            if let current = state.current, current.channel === channel {
                state.current = nil
            }
        }
    }

    /// Runs a `Ping` round trip on the connection (connecting first if needed).
    func ping() -> EventLoopFuture<Void> {
        self.connectionFailingOver().flatMap { $0.ping() }
    }

    /// Closes the connection gracefully; later operations fail.
    func shutdown() {
        let current = self.state.withLockedValue { state -> ClientConnection? in
            state.isShutDown = true
            defer { state.current = nil }
            return state.current
        }
        current?.close()
    }
}
