import CirrusTLS
import CirrusWire
import NIOCore

/// Everything a `CirrusServer` needs to listen: address, TLS, and per-connection limits.
///
/// For example:
/// ```swift
/// var configuration = ServerConfiguration(tls: .server(
///     certificateChainPath: "Certs/server.pem", privateKeyPath: "Certs/server-key.pem",
///     clientCATrustRootsPath: "Certs/ca.pem", clientCertificateVerification: .optional))
/// configuration.port = 0  // any free port
/// ```
public struct ServerConfiguration: Sendable {
    /// The address to bind, `127.0.0.1` by default.
    public var host: String = "127.0.0.1"
    /// The port to bind; 0 picks a free one.
    public var port: Int = 7443
    /// TLS for every connection.
    public var tls: TLSConfiguration
    /// The largest frame body accepted or sent, in bytes.
    public var maximumFrameBytes: Int = FrameDecoder.defaultMaximumFrameBytes
    /// Limits and timers of each connection.
    public var connection: ConnectionStateMachine.Configuration = .init()
    /// How often each connection checks its timers.
    public var timerInterval: TimeAmount = .seconds(1)
    /// How long a graceful shutdown waits for open streams before closing connections anyway.
    public var shutdownGracePeriod: TimeAmount = .seconds(10)
    /// Connections accepted at most at once; more are closed right after accept.
    public var maximumConnections: Int = 10_000
    /// Bearer tokens a client may present in `Hello` instead of a client certificate, each
    /// mapped to the user record name it authenticates (e.g. `"s3cret": "_alice"`). A token is
    /// looked up by its SHA-256, so how long a lookup takes says nothing about the secrets.
    public var bearerTokens: [String: String] = [:] {
        didSet {
            self.bearerTokenDigests = Dictionary(
                self.bearerTokens.map { (Wire.SHA256.hash(Array($0.key.utf8)), $0.value) },
                uniquingKeysWith: { first, _ in first })
        }
    }
    /// ``bearerTokens`` by the SHA-256 of each token.
    private(set) var bearerTokenDigests: [[UInt8]: String] = [:]
    /// Runs the operations clients open. The default runs none and refuses each `Open` on its
    /// stream.
    public var executor: any OperationExecutor = NoOperations()
    /// Runs long-lived operations (`isLongLived` in an `Open`'s configuration), answers
    /// `Resume` and the long-lived container methods. Without it an `Open` runs attached to its
    /// stream whatever its configuration says, and `Resume` gets `UNKNOWN_OPERATION`.
    public var longLivedOperations: LongLivedOperations?
    /// The user directory: a disabled user's connections are refused, and every authenticated
    /// user is registered in it. Nil: no directory (every authenticated user is served).
    public var users: UserDirectory?
    /// Limits that hold across connections: per user and per client address.
    public var peerLimits = PeerLimits()
    /// Bytes all connections together may leave waiting for their sockets before every
    /// connection pauses its operations; `nil` bounds each connection alone (by its socket's
    /// write buffer).
    public var outboundBudget: OutboundBudget? = OutboundBudget()
    /// Where connections, streams, events, bytes and errors are counted; nil counts nothing.
    public var metrics: ServerMetrics?
    /// The name sent in `HelloAck`.
    public var serverName: String = "cirrusd"

    public init(tls: TLSConfiguration) {
        self.tls = tls
    }
}
