import ArgumentParser
import CirrusOperations
import CirrusServer
import CirrusStore
import Foundation
import Logging

extension Cirrusd {
    /// Starts the `--metrics-address` endpoint, when one is given; returns it and where it listens.
    func startOperationsEndpoint(
        metrics: CirrusMetrics?, server: CirrusServer, storage: ServedStorage, longLived: LongLivedOperations,
        executor: StorageExecutor, logger: Logger
    ) async throws -> (endpoint: OperationsEndpoint, address: EndpointAddress)? {
        guard let address = self.metricsAddress, let metrics else { return nil }
        var backup: OnlineBackup?
        if let backupDir = self.backupDir {
            do {
                backup = try OnlineBackup(dataDirectory: self.dataDir, backupDirectory: backupDir)
            } catch {
                throw ValidationError(error.description)
            }
        }
        let endpoint = OperationsEndpoint(
            registry: metrics.registry,
            beforeScrape: {
                metrics.server.sample(
                    connectionsOpen: server.connectionCount, longLivedRunning: longLived.runningCount,
                    watchesOpen: executor.notifications.watchCount)
            },
            readiness: {
                var problems: [String] = []
                if !server.isAcceptingConnections {
                    problems.append("not accepting connections: starting or shutting down")
                }
                do {
                    try await storage.checkHealth()
                } catch {
                    problems.append("storage: \(error)")
                }
                return problems
            },
            backup: backup)
        let bound = try await endpoint.start(host: address.host, port: address.port)
        let shown = EndpointAddress(host: bound.ipAddress ?? address.host, port: bound.port ?? address.port)
        logger.notice("serving /metrics, /healthz and /readyz\(backup == nil ? "" : " and POST /backup") on \(shown)")
        return (endpoint, shown)
    }
}

extension EndpointAddress: ExpressibleByArgument {
    public init?(argument: String) {
        self.init(parsing: argument)
    }
}
