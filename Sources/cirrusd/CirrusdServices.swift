import CirrusOperations
import CirrusServer
import Logging
import ServiceLifecycle

/// The listener as a service: serves until a graceful shutdown, then sends `GoAway`, drains
/// and returns once every connection closed (at most the grace period later).
struct ListenerService: Service {
    let server: CirrusServer
    let logger: Logger
    /// Called as the service starts: the group traps SIGTERM and SIGINT by then, so whoever
    /// it tells that the server is up may signal it at once.
    let announce: @Sendable () -> Void

    func run() async throws {
        self.announce()
        try await withGracefulShutdownHandler {
            try await self.server.run()
        } onGracefulShutdown: {
            self.logger.notice("shutting down: draining connections")
            let server = self.server
            Task { await server.shutdownGracefully() }
        }
    }
}

/// Storage maintenance as a service: a pass every `interval`, stopped at shutdown.
struct MaintenanceService: Service {
    let maintenance: StorageMaintenance
    let interval: Duration

    func run() async {
        let (maintenance, interval) = (self.maintenance, self.interval)
        await cancelWhenGracefulShutdown { await maintenance.run(every: interval) }
    }
}

/// The user directory's watch as a service: it re-reads disabled users and revoked tokens every
/// `interval` and closes their connections, until the group shuts down.
struct UserDirectoryService: Service {
    let users: UserDirectory
    let server: CirrusServer
    let interval: Duration

    func run() async {
        let (users, server, interval) = (self.users, self.server, self.interval)
        await cancelWhenGracefulShutdown { await users.watch(every: interval, server: server) }
    }
}

/// The `/metrics`, `/healthz` and `/readyz` endpoint as a service: it stays up while the
/// listener drains (so `/readyz` says why the server is not ready) and closes last.
struct OperationsEndpointService: Service {
    let endpoint: OperationsEndpoint

    func run() async {
        try? await gracefulShutdown()
        await self.endpoint.shutdown()
    }
}
