import CirrusTLS
import CirrusTestSupport
import NIOCore
import NIOEmbedded
import NIOTLS

/// The development certificates (CirrusTestSupport's `TestCertificates`) as TLS configurations,
/// with the defaults these tests want.
enum Certs {
    static var directory: String { TestCertificates.directory }

    static func path(_ name: String) -> String { TestCertificates.path(name) }

    static func serverConfiguration(
        verification: ClientCertificateVerification = .required,
        certificate: String = "server"
    ) -> TLSConfiguration {
        .server(
            certificateChainPath: path("\(certificate).pem"),
            privateKeyPath: path("\(certificate)-key.pem"),
            clientCATrustRootsPath: path("ca.pem"),
            clientCertificateVerification: verification
        )
    }

    static func clientConfiguration(user: String? = "alice", trusting ca: String = "ca") -> TLSConfiguration {
        .client(
            trustRootsPath: path("\(ca).pem"),
            certificateChainPath: user.map { path("\($0).pem") },
            privateKeyPath: user.map { path("\($0)-key.pem") }
        )
    }
}

/// Records what reaches the top of a pipeline.
final class Recorder: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer

    var handshake: TLSHandshakeCompleted?
    var sawNIOHandshakeEvent = false
    var sawShutdownCompleted = false
    var received: [UInt8] = []
    var readCount = 0
    var readCompleteCount = 0
    var errors: [Error] = []
    var isInactive = false

    var tlsErrors: [TLSError] {
        self.errors.compactMap { $0 as? TLSError }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? TLSHandshakeCompleted {
            self.handshake = event
        }
        switch event as? TLSUserEvent {
        case .handshakeCompleted?:
            self.sawNIOHandshakeEvent = true
        case .shutdownCompleted?:
            self.sawShutdownCompleted = true
        case nil:
            break
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        self.readCount += 1
        self.received.append(contentsOf: self.unwrapInboundIn(data).readableBytesView)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        self.readCompleteCount += 1
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        self.errors.append(error)
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.isInactive = true
    }
}

/// A client and a server `EmbeddedChannel`, each a TLSHandler and a Recorder.
/// Both channels are finished when the pair goes away, so nothing leaks.
final class InMemoryPair {
    let client: EmbeddedChannel
    let server: EmbeddedChannel
    let clientRecorder = Recorder()
    let serverRecorder = Recorder()
    let clientTLS: TLSHandler
    let serverTLS: TLSHandler

    convenience init(
        server serverConfiguration: TLSConfiguration = Certs.serverConfiguration(),
        client clientConfiguration: TLSConfiguration = Certs.clientConfiguration(),
        serverHostname: String = "localhost",
        keepsPeerCertificate: Bool = true
    ) throws {
        try self.init(
            serverContext: TLSContext(configuration: serverConfiguration),
            clientContext: TLSContext(configuration: clientConfiguration),
            serverHostname: serverHostname,
            keepsPeerCertificate: keepsPeerCertificate
        )
    }

    /// A pair over contexts made beforehand, so pairs can share them
    /// (session resumption); the client offers and keeps sessions under
    /// `sessionCacheKey`.
    init(
        serverContext: TLSContext,
        clientContext: TLSContext,
        serverHostname: String = "localhost",
        sessionCacheKey: String? = nil,
        keepsPeerCertificate: Bool = true
    ) throws {
        self.serverTLS = TLSHandler(context: serverContext, keepsPeerCertificate: keepsPeerCertificate)
        self.clientTLS = TLSHandler(context: clientContext, serverHostname: serverHostname, sessionCacheKey: sessionCacheKey)
        self.server = EmbeddedChannel()
        self.client = EmbeddedChannel()
        try self.server.pipeline.syncOperations.addHandlers([self.serverTLS, self.serverRecorder])
        try self.client.pipeline.syncOperations.addHandlers([self.clientTLS, self.clientRecorder])
    }

    deinit {
        _ = try? self.client.finish(acceptAlreadyClosed: true)
        _ = try? self.server.finish(acceptAlreadyClosed: true)
    }

    /// Makes both channels active; the client sends its ClientHello.
    func connect() throws {
        let address = try SocketAddress(ipAddress: "127.0.0.1", port: 443)
        self.server.connect(to: address, promise: nil)
        self.client.connect(to: address, promise: nil)
    }

    func handshake() throws {
        try self.connect()
        try interactInMemory(self.client, self.server)
    }

    func clientWrite(_ bytes: [UInt8], flush: Bool = true) {
        Self.write(bytes, to: self.client, flush: flush)
    }

    func serverWrite(_ bytes: [UInt8], flush: Bool = true) {
        Self.write(bytes, to: self.server, flush: flush)
    }

    private static func write(_ bytes: [UInt8], to channel: EmbeddedChannel, flush: Bool) {
        let buffer = channel.allocator.buffer(bytes: bytes)
        if flush {
            channel.writeAndFlush(buffer, promise: nil)
        } else {
            channel.write(buffer, promise: nil)
        }
    }
}

struct InMemoryInteractionDidNotSettle: Error {}

/// Moves bytes between two channels until neither has anything to send.
func interactInMemory(_ first: EmbeddedChannel, _ second: EmbeddedChannel) throws {
    for _ in 0..<100_000 {
        var moved = false
        if let bytes = try first.readOutbound(as: ByteBuffer.self) {
            moved = true
            if second.isActive {
                try second.writeInbound(bytes)
            }
        }
        if let bytes = try second.readOutbound(as: ByteBuffer.self) {
            moved = true
            if first.isActive {
                try first.writeInbound(bytes)
            }
        }
        if !moved {
            return
        }
    }
    throw InMemoryInteractionDidNotSettle()
}

/// `count` bytes of a repeating pattern.
func pattern(_ count: Int) -> [UInt8] {
    (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 8) }
}
