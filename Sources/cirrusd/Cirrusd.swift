import ArgumentParser
import CMimalloc
import CirrusOperations
import CirrusServer
import CirrusStore
import CirrusTLS
import Foundation
import Logging
import NIOCore
import ServiceLifecycle

@main
struct Cirrusd: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cirrusd",
        abstract: "The Cirrus server: CloudKit-style operations over TLS.",
        discussion: "With no flags it listens on 127.0.0.1:7443 with the development certificates in Certs/.",
        subcommands: [Backup.self, Restore.self, CheckConfig.self, UsersCommand.self, TokensCommand.self]
    )

    /// Runs a subcommand (`backup`, `restore`, `check-config`) on its own, so that its options
    /// are not taken for the server's flags of the same name (`--data-dir`); anything else runs
    /// the server with its configuration file and `CIRRUSD_*` variables beneath the flags.
    static func main() async {
        let arguments = Array(CommandLine.arguments.dropFirst())
        if let name = arguments.first,
            let command = Self.configuration.subcommands.first(where: { $0._commandName == name })
        {
            do {
                var parsed = try command.parseAsRoot(Array(arguments.dropFirst()))
                if var asyncCommand = parsed as? any AsyncParsableCommand {
                    try await asyncCommand.run()
                } else {
                    try parsed.run()
                }
            } catch {
                command.exit(withError: error)
            }
            return
        }
        do {
            let layers = try Self.configurationLayers(commandLine: arguments, environment: ProcessInfo.processInfo.environment)
            var command = try Self.parseAsRoot(layers.arguments + arguments)
            if let server = command as? Cirrusd, server.printConfig {
                // The JSON alone on standard output (a configuration file); the sources beside it.
                let (json, sources) = Self.renderConfiguration(layers.effective(commandLine: arguments))
                FileHandle.standardOutput.write(Data(json.utf8))
                FileHandle.standardError.write(Data(sources.utf8))
                return
            }
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch let problems as ConfigurationProblems {
            Self.report(problems)
            Self.exit(withError: ExitCode(Self.configurationErrorStatus))
        } catch {
            Self.exit(withError: error)
        }
    }

    @Option(
        help: ArgumentHelp(
            "A configuration file (JSON) whose keys are these flags' names, e.g. {\"port\": 7443, \"allow-tls12\": true}.",
            discussion: "Default: $CIRRUSD_CONFIG. CIRRUSD_* environment variables (CIRRUSD_DATA_DIR …) override the file; flags override both.",
            valueName: "file"))
    var config: String?

    @Flag(help: "Print the effective configuration (file, environment and flags; secrets masked) and exit.")
    var printConfig = false

    @Option(help: "The address to listen on.")
    var host = "127.0.0.1"

    @Option(help: "The port to listen on; 0 picks a free port.")
    var port = 7443

    @Option(help: "The server certificate chain (PEM). Default: Certs/server.pem.")
    var cert: String?

    @Option(help: "The server private key (PEM). Default: Certs/server-key.pem.")
    var key: String?

    @Option(help: "CA bundle (PEM) whose client certificates are accepted. Default: Certs/ca.pem.")
    var clientCA: String?

    @Option(
        help: ArgumentHelp(
            "Certificate revocation lists (PEM), one per client CA; a revoked client certificate is refused.",
            discussion: "Reloaded with the certificates, key and CAs on SIGHUP.",
            valueName: "file"
        )
    )
    var clientCrl: String?

    @Option(help: "Client certificates: required, optional (a bearer token may stand in), or none.")
    var clientAuth: ClientAuth = .optional

    @Option(help: "A file of static bearer tokens, one 'TOKEN USER_RECORD_NAME' per line (see also 'cirrusd tokens').")
    var tokens: String?

    /// `--data-dir`, shared with the `users` subcommands (which see the value wherever it is
    /// written on the command line).
    @OptionGroup var storageLocation: StorageLocation
    var dataDir: String { self.storageLocation.dataDir }

    @Option(help: "Connections to the PostgreSQL server (--database) this node keeps at most.")
    var databaseConnections = 20

    @Option(
        help: ArgumentHelp(
            "This node's ID among the nodes sharing a database: the owner of the long-lived operations it runs.",
            discussion: """
                Unique among running nodes, and the same across a node's restarts, so a restarted node \
                continues its operations at once instead of after their leases expire (9 s). Default: \
                'local' on SQLite (one process serves a data directory); with --database, this host's \
                name and --port (a random ID with --port 0).
                """))
    var nodeID: String?

    @Option(
        help: ArgumentHelp(
            "How long deletions stay visible to change feeds (e.g. 30d, 12h, 90m).",
            discussion: "A change token older than the oldest kept deletion gets changeTokenExpired."))
    var tombstoneRetention: DurationArgument = DurationArgument(seconds: StorageMaintenance.defaultTombstoneRetentionSeconds)

    @Option(help: "How long a query cursor can be continued (e.g. 1h).")
    var queryCursorLifetime: DurationArgument = DurationArgument(seconds: StorageMaintenance.defaultQueryCursorLifetimeSeconds)

    @Option(
        help: ArgumentHelp(
            "How long a completed long-lived operation stays listed and resumable (e.g. 24h).",
            discussion: "Until its client acknowledges its completion, or this long after it completed."))
    var longLivedRetention: DurationArgument = DurationArgument(seconds: LongLivedOperations.defaultRetentionSeconds)

    @Option(
        help: ArgumentHelp(
            "How long notifications stay in their user's feed (e.g. 7d).",
            discussion: "A notification change token older than the oldest kept notification gets changeTokenExpired."))
    var notificationRetention: DurationArgument = DurationArgument(
        seconds: StorageMaintenance.defaultNotificationRetentionSeconds)

    @Option(
        help: "How often expired tombstones, query cursors, long-lived operations, notifications and unreferenced assets are pruned (e.g. 1h).")
    var maintenanceInterval: DurationArgument = DurationArgument(seconds: 3600)

    @Option(
        help: ArgumentHelp(
            "How often the user directory is read for users an administrator disabled (e.g. 2s).",
            discussion: "`cirrusd users disable` changes the data directory; within this interval the server closes the user's connections."))
    var userRefreshInterval = DurationArgument(seconds: 2)

    @Option(
        help: ArgumentHelp(
            "How long a token of CKFetchWebAuthTokenOperation is valid (e.g. 1h).",
            discussion: "`cirrusd tokens revoke ID` ends one before."))
    var webAuthTokenLifetime = DurationArgument(seconds: UserDirectory.defaultWebAuthTokenLifetime)

    @Option(help: "The largest frame accepted, in bytes.")
    var maxFrameBytes = 4 * 1024 * 1024

    @Option(help: "Concurrent streams allowed per connection.")
    var maxStreams = 128

    @Option(help: "Connections one user may hold open at once (0: no limit).")
    var maxConnectionsPerUser = PeerLimits.Configuration().maximumConnectionsPerUser

    @Option(help: "TLS connections accepted per second from one IP address, after a burst of twice as many (0: no limit).")
    var handshakesPerAddress = PeerLimits.Configuration().handshakesPerAddressPerSecond

    @Option(
        help: ArgumentHelp(
            "Streams one user may cancel or have refused per second across all connections (0: no limit).",
            discussion: "Beyond it the connection closes with RATE_LIMITED and the user's new connections are refused until half the burst (five seconds' worth) has refilled."))
    var abandonedStreamsPerUser = PeerLimits.Configuration().abandonedStreamsPerUserPerSecond

    @Option(help: "Bytes all connections together may leave waiting for slow readers before those over their share pause.")
    var maxOutboundBytes = OutboundBudget().limit

    @Option(help: "The largest asset (CKAsset file) accepted, in bytes; larger uploads get limitExceeded.")
    var maxAssetBytes: UInt64 = AssetStore.Limits().maxAssetBytes

    @Option(help: "Bytes of asset content one user's records and unfinished uploads may hold (0 = no limit); beyond it uploads get quotaExceeded.")
    var maxUserBytes: UInt64 = 0

    @Option(help: "Ping a peer that has sent nothing for this long (e.g. 30s).")
    var keepaliveInterval = DurationArgument(seconds: 30)

    @Option(help: "Close a connection whose Ping stays unanswered this long (e.g. 20s).")
    var keepaliveTimeout = DurationArgument(seconds: 20)

    @Option(help: "Close a connection that has not finished its TLS handshake and Hello this long after it opened (e.g. 10s).")
    var handshakeTimeout = DurationArgument(seconds: 10)

    @Flag(help: "Also accept TLS 1.2 (TLS 1.3 only by default).")
    var allowTLS12 = false

    @Option(
        help: ArgumentHelp(
            "Serve /metrics (Prometheus), /healthz and /readyz over plain HTTP on this HOST:PORT (e.g. 127.0.0.1:9464).",
            discussion: "Off when not given. Keep it on loopback or a private network: it has no TLS and no authentication.",
            valueName: "host:port"))
    var metricsAddress: EndpointAddress?

    @Option(
        help: ArgumentHelp(
            "Let POST /backup on the --metrics-address endpoint write a backup of the data directory into this directory.",
            discussion: "Off when not given. Each backup is a new file named by the time (cirrus-YYYYMMDDTHHMMSSZ.backup); one runs at a time.",
            valueName: "directory"))
    var backupDir: String?

    @Option(help: "Log level: trace, debug, info, notice, warning, error, critical.")
    var logLevel: String = "info"

    @Option(help: "Log lines as text, or as json: one object a line with connection, peer and user fields.")
    var logFormat: LogFormat = .text

    enum LogFormat: String, ExpressibleByArgument, CaseIterable {
        case text, json
    }

    enum ClientAuth: String, ExpressibleByArgument, CaseIterable {
        case required, optional, none
    }

    func validate() throws {
        for (flag, value) in [
            ("--max-connections-per-user", self.maxConnectionsPerUser), ("--handshakes-per-address", self.handshakesPerAddress),
            ("--abandoned-streams-per-user", self.abandonedStreamsPerUser),
        ] where value < 0 {
            throw ValidationError("\(flag) must be 0 (no limit) or more, not \(value)")
        }
        if self.backupDir != nil, self.metricsAddress == nil {
            throw ValidationError("--backup-dir needs --metrics-address: backups are asked for with POST /backup there")
        }
        if let nodeID = self.nodeID, nodeID.isEmpty || nodeID.utf8.count > 128 {
            throw ValidationError("--node-id must be 1 to 128 bytes, not \"\(nodeID)\"")
        }
        guard self.databaseConnections >= 2 else {
            throw ValidationError("--database-connections must be at least 2, not \(self.databaseConnections)")
        }
        guard self.maxOutboundBytes >= 1 << 20 else {
            throw ValidationError("--max-outbound-bytes must be at least 1048576 (1 MiB), not \(self.maxOutboundBytes)")
        }
    }

    func run() async throws {
        // A file-size limit (ulimit -f) or a full disk must fail the one write, with EFBIG or
        // ENOSPC, not kill the server: SIGXFSZ's default action is to end the process.
        signal(SIGXFSZ, SIG_IGN)
        // Every line written while an operation runs names it (OperationLogContext).
        switch self.logFormat {
        case .json:
            LoggingSystem.bootstrap(
                { label, provider in JSONLogHandler(label: label, metadataProvider: provider) },
                metadataProvider: OperationLogContext.metadataProvider)
        case .text:
            LoggingSystem.bootstrap(
                { label, provider in StreamLogHandler.standardError(label: label, metadataProvider: provider) },
                metadataProvider: OperationLogContext.metadataProvider)
        }
        let logger = {
            var logger = Logger(label: "cirrusd")
            logger.logLevel = Logger.Level(rawValue: self.logLevel) ?? .info
            return logger
        }()

        let certs = DevelopmentCertificates.locate()
        var tls = TLSConfiguration.server(
            certificateChainPath: try self.cert ?? certs.path("server.pem"),
            privateKeyPath: try self.key ?? certs.path("server-key.pem"),
            clientCATrustRootsPath: self.clientAuth == .none ? nil : try self.clientCA ?? certs.path("ca.pem"),
            clientCertificateVerification: self.clientAuth.verification,
            clientCRLPath: self.clientCrl
        )
        if self.allowTLS12 {
            tls.minimumTLSVersion = .v1_2
        }
        var configuration = ServerConfiguration(tls: tls)
        configuration.host = self.host
        configuration.port = self.port
        configuration.maximumFrameBytes = self.maxFrameBytes
        configuration.connection.maximumConcurrentStreams = self.maxStreams
        configuration.connection.keepaliveInterval = .seconds(self.keepaliveInterval.seconds)
        configuration.connection.keepaliveTimeout = .seconds(self.keepaliveTimeout.seconds)
        configuration.connection.handshakeTimeout = .seconds(self.handshakeTimeout.seconds)
        configuration.peerLimits = PeerLimits(
            configuration: .init(
                maximumConnectionsPerUser: self.maxConnectionsPerUser,
                handshakesPerAddressPerSecond: self.handshakesPerAddress,
                handshakeBurstPerAddress: 2 * self.handshakesPerAddress,
                abandonedStreamsPerUserPerSecond: self.abandonedStreamsPerUser,
                abandonedStreamBurstPerUser: 5 * self.abandonedStreamsPerUser
            ))
        configuration.outboundBudget = OutboundBudget(limit: self.maxOutboundBytes)
        if let tokens = self.tokens {
            configuration.bearerTokens = try BearerTokenFile.load(path: tokens)
        }

        let served: ServedStorage
        let cursorLifetime = Double(self.queryCursorLifetime.seconds)
        if let url = try self.storageLocation.postgresURL(
            commandLine: Array(CommandLine.arguments.dropFirst()), environment: ProcessInfo.processInfo.environment)
        {
            guard self.backupDir == nil else {
                throw ValidationError("--backup-dir backs up --data-dir's SQLite storage; back a PostgreSQL database up with pg_dump or its base backups")
            }
            served = try await ServedStorage.openPostgres(
                url: url, maximumConnections: self.databaseConnections, queryCursorLifetime: cursorLifetime,
                logLevel: logger.logLevel)
        } else {
            served = .sqlite(try SQLiteStorage(directory: self.dataDir, queryCursorLifetime: cursorLifetime))
        }
        logger.notice("storage: \(served.description)")
        logger.notice("allocator: \(String(cString: cirrus_allocator_description()))")
        let storage = served.records
        let metrics = self.metricsAddress.map { _ in CirrusMetrics() }
        if let metrics {
            configuration.metrics = metrics.server
            metrics.observe(commitsOf: served.observeCommits)
        }
        let secret = try await served.serverSecret(dataDirectory: self.dataDir)
        let users = UserDirectory(storage: storage, webAuthTokenLifetime: self.webAuthTokenLifetime.seconds, logger: logger)
        try await users.load()
        configuration.users = users
        let assets = try AssetStore(
            directory: (self.dataDir as NSString).appendingPathComponent("assets"), storage: storage, secret: secret,
            limits: AssetStore.Limits(maxAssetBytes: self.maxAssetBytes, maxUserBytes: self.maxUserBytes == 0 ? nil : self.maxUserBytes))
        let executor = StorageExecutor(
            storage: storage, tokens: ChangeTokenSealer(secret: secret), users: users, assets: assets,
            metrics: metrics?.server,
            shareURLBase: "https://\(configuration.host.contains(":") ? "[\(configuration.host)]" : configuration.host):\(configuration.port)",
            logger: logger)
        configuration.executor = executor
        let nodeID = self.nodeID ?? served.defaultNodeID(port: self.port)
        logger.notice("node \(nodeID)")
        let longLived = LongLivedOperations(
            journal: storage, executor: executor, retentionSeconds: self.longLivedRetention.seconds,
            leasing: LongLivedOperations.Leasing(nodeID: nodeID), logger: logger)
        // Before serving, so a client resuming finds what was running.
        let continued = try await longLived.resumeUnfinished()
        if continued > 0 {
            logger.notice("continuing \(continued) long-lived operations")
        }
        configuration.longLivedOperations = longLived
        let maintenance = StorageMaintenance(
            storage: storage, tombstoneRetentionSeconds: self.tombstoneRetention.seconds,
            queryCursorLifetimeSeconds: self.queryCursorLifetime.seconds,
            longLivedRetentionSeconds: self.longLivedRetention.seconds,
            notificationRetentionSeconds: self.notificationRetention.seconds, assets: assets, logger: logger,
            metrics: metrics?.server)
        let server = CirrusServer(configuration: configuration, logger: logger)
        // New connections use the reloaded files; open ones keep theirs.
        let reload = SignalWatcher(signals: [SIGHUP]) {
            do {
                try server.reloadTLS()
                logger.notice("SIGHUP: reloaded the TLS certificate, key, client CAs and revocation lists")
            } catch {
                logger.error("SIGHUP: TLS reload failed, still serving the previous certificates: \(error)")
            }
        }
        let address = try await server.start()
        let endpoint = try await self.startOperationsEndpoint(
            metrics: metrics, server: server, storage: served, longLived: longLived, executor: executor, logger: logger)
        var announcement = "listening on \(address.ipAddress ?? self.host):\(address.port ?? self.port)\n"
        if let endpoint {
            announcement += "metrics on http://\(endpoint.address)/metrics\n"
        }

        // SIGTERM and SIGINT shut the group down in reverse order: the listener drains first,
        // then maintenance stops, then the metrics endpoint closes.
        var services: [ServiceGroupConfiguration.ServiceConfiguration] = []
        if let endpoint {
            services.append(.init(service: OperationsEndpointService(endpoint: endpoint.endpoint), serviceName: "metrics endpoint"))
        }
        services.append(
            .init(
                service: MaintenanceService(maintenance: maintenance, interval: .seconds(self.maintenanceInterval.seconds)),
                serviceName: "maintenance"))
        services.append(
            .init(
                service: UserDirectoryService(
                    users: users, server: server, interval: .seconds(self.userRefreshInterval.seconds)),
                serviceName: "user directory"))
        services.append(
            .init(
                // Unbuffered, so a supervisor or test reading a pipe sees it at once.
                service: ListenerService(server: server, logger: logger) { [announcement] in
                    FileHandle.standardOutput.write(Data(announcement.utf8))
                },
                successTerminationBehavior: .gracefullyShutdownGroup,
                serviceName: "listener"))
        let group = ServiceGroup(
            configuration: ServiceGroupConfiguration(services: services, gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        try await group.run()
        reload.cancel()
        // Long-lived operations stop where they are and continue on the next start.
        await longLived.shutdown()
        try await served.close()
        logger.notice("stopped")
    }
}

extension Cirrusd.ClientAuth {
    var verification: TLSConfiguration.ClientCertificateVerification {
        switch self {
        case .required: .required
        case .optional: .optional
        case .none: .none
        }
    }
}
