import ArgumentParser
import CirrusCLI
import CirrusKit
import CirrusModel
import Foundation

/// Where the server is and who we are; shared by every command.
struct ConnectionOptions: ParsableArguments {
    @Option(
        name: .long,
        help: "The server as host:port, or several as host:port,host:port to fail over between (default: CIRRUS_SERVER, else 127.0.0.1:7443).")
    var server: String?

    @Option(name: .long, help: "PEM file of the CA that signs the server certificate (default: CIRRUS_CA, else Certs/ca.pem).")
    var ca: String?

    @Option(name: .long, help: "PEM client certificate (default: CIRRUS_CERT, else Certs/alice.pem).")
    var cert: String?

    @Option(name: .long, help: "PEM key of the client certificate (default: CIRRUS_KEY, else Certs/alice-key.pem).")
    var key: String?

    @Option(name: .long, help: "Authenticate with this bearer token instead of a certificate (default: CIRRUS_TOKEN).")
    var token: String?

    @Option(name: .long, help: "The container (default: CIRRUS_CONTAINER, else iCloud.cirrus.default).")
    var container: String?

    /// The client configuration the flags, the environment and ./Certs describe.
    ///
    /// - throws: `CLIError` (usage) for a bad address or a file that cannot be read.
    func clientConfiguration() throws(CLIError) -> CirrusClientConfiguration {
        let environment = ProcessInfo.processInfo.environment
        var configuration = CirrusClientConfiguration.fromEnvironment(environment)
        if let list = self.server {
            var servers: [CirrusClientConfiguration.Server] = []
            for server in list.split(separator: ",", omittingEmptySubsequences: false).map(String.init) {
                guard let (host, port) = Self.parse(server: server) else {
                    throw CLIError.usage("--server '\(server)': expected host:port")
                }
                servers.append(CirrusClientConfiguration.Server(host: host, port: port))
            }
            configuration.servers = servers
        }
        func development(_ name: String) -> String? {
            let path = "Certs/" + name
            return FileManager.default.fileExists(atPath: path) ? path : nil
        }
        configuration.trustRootsPath = self.ca ?? configuration.trustRootsPath ?? development("ca.pem")
        if let token = self.token {
            configuration.bearerToken = token
        }
        if self.cert != nil || self.key != nil {
            configuration.certificateChainPath = self.cert
            configuration.privateKeyPath = self.key
        } else if configuration.certificateChainPath == nil, configuration.bearerToken == nil {
            configuration.certificateChainPath = development("alice.pem")
            configuration.privateKeyPath = development("alice-key.pem")
        }
        if (configuration.certificateChainPath == nil) != (configuration.privateKeyPath == nil) {
            throw CLIError.usage("--cert and --key go together")
        }
        for (flag, path) in [("--ca", configuration.trustRootsPath), ("--cert", configuration.certificateChainPath), ("--key", configuration.privateKeyPath)] {
            if let path, !FileManager.default.isReadableFile(atPath: path) {
                throw CLIError.usage("\(flag) \(path): no such file or not readable")
            }
        }
        configuration.clientName = "cirrus"
        return configuration
    }

    var containerIdentifier: String {
        self.container ?? ProcessInfo.processInfo.environment["CIRRUS_CONTAINER"].flatMap { $0.isEmpty ? nil : $0 }
            ?? CKContainer.defaultContainerIdentifier
    }

    func makeContainer() throws(CLIError) -> CKContainer {
        CKContainer(identifier: self.containerIdentifier, configuration: try self.clientConfiguration())
    }

    /// `host:port` or `[v6]:port`.
    static func parse(server: String) -> (String, Int)? {
        if server.hasPrefix("["), let close = server.firstIndex(of: "]") {
            let host = String(server[server.index(after: server.startIndex)..<close])
            let rest = server[server.index(after: close)...]
            guard rest.hasPrefix(":"), let port = Int(rest.dropFirst()), (1...65535).contains(port) else { return nil }
            return (host, port)
        }
        let parts = server.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 2, !parts[0].isEmpty, let port = Int(parts[1]), (1...65535).contains(port) else { return nil }
        return (String(parts[0]), port)
    }
}

/// `--database private|public` and `--zone`.
struct LocationOptions: ParsableArguments {
    @Option(name: .long, help: "private or public.")
    var database: DatabaseChoice = .private

    @Option(name: .long, help: "The zone (default: the default zone).")
    var zone: String = CKRecordZone.ID.defaultZoneName

    var zoneID: CKRecordZone.ID { CKRecordZone.ID(zoneName: self.zone) }

    func database(of container: CKContainer) -> CKDatabase {
        container.database(with: self.database == .public ? .public : .private)
    }
}

enum DatabaseChoice: String, ExpressibleByArgument, CaseIterable, Sendable {
    case `private`, `public`
}

/// Runs `body`, turning any error into a `CLIError` with `context`.
func cli<T>(_ context: String, _ body: () async throws -> T) async throws(CLIError) -> T {
    do {
        return try await body()
    } catch {
        throw CLIError.from(error, context: context)
    }
}
