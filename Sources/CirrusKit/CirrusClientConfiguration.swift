public import CoreMetrics
import Foundation
import Logging

/// Where a container's server is and how to authenticate to it.
///
/// By default every `CKContainer` reads it from the environment
/// (``fromEnvironment(_:)``), so CloudKit code runs unchanged; pass one explicitly to
/// `CKContainer(identifier:configuration:)` to choose.
///
/// For example:
/// ```swift
/// let configuration = CirrusClientConfiguration(
///     host: "sync.example.com", port: 7443,
///     trustRootsPath: "Certs/ca.pem",
///     certificateChainPath: "Certs/alice.pem", privateKeyPath: "Certs/alice-key.pem")
/// let container = CKContainer(identifier: "iCloud.com.example.notes", configuration: configuration)
/// ```
public struct CirrusClientConfiguration: Sendable, Hashable {
    /// One server a container may connect to.
    public struct Server: Sendable, Hashable, CustomStringConvertible {
        /// The host name or IP address.
        public var host: String
        /// The TCP port.
        public var port: Int

        public init(host: String, port: Int = CirrusClientConfiguration.defaultPort) {
            self.host = host
            self.port = port
        }

        /// `host:port`, or `[v6]:port`.
        public var description: String { self.host.contains(":") ? "[\(self.host)]:\(self.port)" : "\(self.host):\(self.port)" }
    }

    /// The server's host name or IP address (the first of ``servers``).
    public var host: String
    /// The server's TCP port (the first of ``servers``).
    public var port: Int
    /// Servers to fail over to, in order, after ``host``:``port`` (see ``servers``).
    public var failoverServers: [Server] = []

    /// Every server the container may connect to: ``host``:``port`` first, then
    /// ``failoverServers``. Nodes of one deployment serving the same storage: a connection
    /// attempt that fails moves on to the next server at once (the reconnect backoff starts
    /// only once every server failed in a row, and grows from there), and the streams and
    /// long-lived operations of a lost connection are opened and resumed on whichever server
    /// answers. Setting it sets all three; it must not be empty.
    public var servers: [Server] {
        get { [Server(host: self.host, port: self.port)] + self.failoverServers }
        set {
            guard let first = newValue.first else { return }
            self.host = first.host
            self.port = first.port
            self.failoverServers = Array(newValue.dropFirst())
        }
    }
    /// PEM bundle of the CAs trusted to sign the server certificate; nil = the system's roots.
    public var trustRootsPath: String?
    /// PEM file with the client certificate (its subject names the user).
    public var certificateChainPath: String?
    /// PEM file with the client certificate's private key.
    public var privateKeyPath: String?
    /// A bearer token sent in `Hello` instead of authenticating by certificate.
    public var bearerToken: String?
    /// The name the server certificate must carry; nil = `host`.
    public var serverName: String?

    /// Event credit each operation stream starts with and keeps topped up; at most this many
    /// events of one operation are ever buffered on the client. The server's memory does not
    /// grow with it (it queues at most a small batch per stream, whatever the credit); a larger
    /// window means fewer waits for credit on long streams: at 1,024 a change feed of 10,000
    /// small records streams about 25 % faster than at 256 (the server and the client each
    /// wait less often for the other), and a callback that stalls lets at most 1,024 of the
    /// operation's events wait in memory.
    public var streamWindow: UInt32 = 1024
    /// Whether a new connection resumes the TLS session of the last one to the same server
    /// (a TLS 1.3 ticket, kept per server in a bounded cache this process's containers share,
    /// separately for each trust roots and client certificate): no certificates are sent,
    /// signed for or checked again, which saves about a third of the handshake's CPU.
    public var resumesTLSSessions = true
    /// Time allowed for TCP connect, TLS and `Hello` together.
    public var connectTimeout: TimeInterval = 10
    /// First delay before reconnecting after a failed attempt; doubles per failure.
    public var reconnectBaseDelay: TimeInterval = 0.1
    /// The longest delay between reconnect attempts.
    public var reconnectMaximumDelay: TimeInterval = 10
    /// Times in a row a long-lived operation whose connection dropped is resumed on a new one
    /// without receiving anything before it fails with `networkFailure` (its configuration's
    /// `timeoutIntervalForRequest` and `timeoutIntervalForResource` bound it too). Each
    /// attempt waits the reconnect backoff first. A `Resume` the server refuses because the
    /// old connection's stream still follows the operation (`OPERATION_ALREADY_ATTACHED`, until
    /// the server notices that connection is gone) is not a loss: up to three times this many
    /// such refusals in a row are retried.
    public var maximumResumeAttempts: Int = 10
    /// Sent as `Hello.client_name`.
    public var clientName: String = "CirrusKit"
    /// Sent as `Hello.client_version`.
    public var clientVersion: String = CirrusClientConfiguration.libraryVersion
    /// Where the connection logs what happens to it: connecting, failed attempts and the
    /// backoff before the next, a server draining the connection (GoAway), streams opened
    /// again, long-lived operations resumed after a dropped connection, and resumes given up.
    /// Silent by default; give it a `Logger` of your logging backend to see them. Not part of
    /// the configuration's equality.
    public var logger: Logger {
        get { self.loggerBox.logger }
        set { self.loggerBox = LoggerBox(logger: newValue) }
    }
    private var loggerBox = LoggerBox(logger: Logger(label: "CirrusKit", factory: { _ in SwiftLogNoOpLogHandler() }))
    /// Where the connection's counters go (``CirrusClientMetrics``: connections, failures,
    /// reconnects, resumes, retries, bytes); nil = the process's `MetricsSystem`, which counts
    /// nothing until the app bootstraps a backend. Not part of the configuration's equality.
    public var metricsFactory: (any MetricsFactory)? {
        get { self.metricsBox.factory }
        set { self.metricsBox = MetricsFactoryBox(factory: newValue) }
    }
    private var metricsBox = MetricsFactoryBox(factory: nil)

    /// The version of this library.
    public static let libraryVersion = "0.1.0"
    /// The server address used when `CIRRUS_SERVER` is not set.
    public static let defaultHost = "127.0.0.1"
    public static let defaultPort = 7443

    public init(
        host: String = CirrusClientConfiguration.defaultHost,
        port: Int = CirrusClientConfiguration.defaultPort,
        trustRootsPath: String? = nil,
        certificateChainPath: String? = nil,
        privateKeyPath: String? = nil,
        bearerToken: String? = nil,
        serverName: String? = nil
    ) {
        self.host = host
        self.port = port
        self.trustRootsPath = trustRootsPath
        self.certificateChainPath = certificateChainPath
        self.privateKeyPath = privateKeyPath
        self.bearerToken = bearerToken
        self.serverName = serverName
    }

    /// The configuration the environment describes: `CIRRUS_SERVER=host:port` (default
    /// `127.0.0.1:7443`; `[v6]:port` for IPv6; several separated by commas, the first tried
    /// first: ``servers``), `CIRRUS_CA`, `CIRRUS_CERT`, `CIRRUS_KEY`, `CIRRUS_TOKEN` and
    /// `CIRRUS_SERVER_NAME`. Empty variables count as unset.
    public static func fromEnvironment(
        _ environment: [String: String] = ProcessInfo.processInfo.environment
    ) -> CirrusClientConfiguration {
        func value(_ name: String) -> String? {
            guard let value = environment[name], !value.isEmpty else { return nil }
            return value
        }
        var configuration = CirrusClientConfiguration(
            trustRootsPath: value("CIRRUS_CA"),
            certificateChainPath: value("CIRRUS_CERT"),
            privateKeyPath: value("CIRRUS_KEY"),
            bearerToken: value("CIRRUS_TOKEN"),
            serverName: value("CIRRUS_SERVER_NAME")
        )
        if let list = value("CIRRUS_SERVER") {
            let servers = list.split(separator: ",").compactMap { entry -> Server? in
                let entry = entry.trimmingCharacters(in: .whitespaces)
                guard !entry.isEmpty, let (host, port) = Self.parse(server: entry) else { return nil }
                return Server(host: host, port: port ?? Self.defaultPort)
            }
            if !servers.isEmpty { configuration.servers = servers }
        }
        return configuration
    }

    /// Splits `host:port`, `host`, `[v6]:port` or `[v6]`; nil when the port is not a number.
    package static func parse(server: String) -> (host: String, port: Int?)? {
        if server.hasPrefix("[") {
            guard let close = server.firstIndex(of: "]") else { return nil }
            let host = String(server[server.index(after: server.startIndex)..<close])
            let rest = server[server.index(after: close)...]
            if rest.isEmpty { return (host, nil) }
            guard rest.hasPrefix(":"), let port = Int(rest.dropFirst()), (0...65535).contains(port) else { return nil }
            return (host, port)
        }
        let parts = server.split(separator: ":", omittingEmptySubsequences: false)
        switch parts.count {
        case 1:
            return (server, nil)
        case 2:
            guard let port = Int(parts[1]), (0...65535).contains(port) else { return nil }
            return (String(parts[0]), port)
        default:
            return (server, nil)  // a bare IPv6 literal
        }
    }

    /// The name checked against `server`'s certificate.
    func verifiedServerName(for server: Server) -> String { self.serverName ?? server.host }
}

/// A `Logger` that every other one equals, so a configuration's equality and hash are those of
/// its connection settings.
private struct LoggerBox: Sendable, Hashable {
    let logger: Logger
    static func == (lhs: LoggerBox, rhs: LoggerBox) -> Bool { true }
    func hash(into hasher: inout Hasher) {}
}

/// A metrics factory that every other one equals, like ``LoggerBox``.
private struct MetricsFactoryBox: Sendable, Hashable {
    let factory: (any MetricsFactory)?
    static func == (lhs: MetricsFactoryBox, rhs: MetricsFactoryBox) -> Bool { true }
    func hash(into hasher: inout Hasher) {}
}
