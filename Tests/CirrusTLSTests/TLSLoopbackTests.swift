import CirrusTLS
import NIOCore
import NIOPosix
import NIOTLS
import Testing

/// What one side of a loopback connection saw by the time it closed.
struct Outcome: Sendable {
    var handshake: TLSHandshakeCompleted?
    var tlsErrors: [TLSError]
    var otherErrors: [String]
    var received: [UInt8]
    var sawShutdownCompleted: Bool

    var firstError: TLSError? {
        self.tlsErrors.first
    }
}

struct TimedOut: Error {}

/// Records one connection and completes `outcome` when it closes. A server
/// echoes; a client sends `payload` after the handshake and closes once it
/// has it back.
final class LoopbackPeer: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    enum Role {
        case echoServer
        case client(payload: [UInt8])
    }

    private let role: Role
    private let outcome: EventLoopPromise<Outcome>
    private var recorded = Outcome(handshake: nil, tlsErrors: [], otherErrors: [], received: [], sawShutdownCompleted: false)

    init(role: Role, outcome: EventLoopPromise<Outcome>) {
        self.role = role
        self.outcome = outcome
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let handshake = event as? TLSHandshakeCompleted {
            self.recorded.handshake = handshake
            if case .client(let payload) = self.role, !payload.isEmpty {
                context.writeAndFlush(self.wrapOutboundOut(context.channel.allocator.buffer(bytes: payload)), promise: nil)
            }
        }
        if case .shutdownCompleted? = event as? TLSUserEvent {
            self.recorded.sawShutdownCompleted = true
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = self.unwrapInboundIn(data)
        self.recorded.received.append(contentsOf: buffer.readableBytesView)
        switch self.role {
        case .echoServer:
            context.write(self.wrapOutboundOut(buffer), promise: nil)
        case .client(let payload):
            if self.recorded.received.count >= payload.count {
                context.close(promise: nil)
            }
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        context.flush()
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        if let error = error as? TLSError {
            self.recorded.tlsErrors.append(error)
        } else {
            self.recorded.otherErrors.append(String(describing: error))
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.outcome.succeed(self.recorded)
    }
}

/// Whether this machine has the IPv6 loopback address.
let ipv6LoopbackAvailable: Bool = {
    let devices = (try? System.enumerateDevices()) ?? []
    return devices.contains { $0.address?.ipAddress == "::1" }
}()

/// One server and one client on loopback, with every wait bounded.
struct LoopbackConnection {
    static let timeout = TimeAmount.seconds(60)

    static func run(
        server serverConfiguration: TLSConfiguration,
        client clientConfiguration: TLSConfiguration,
        serverHostname: String = "localhost",
        host: String = "127.0.0.1",
        payload: [UInt8] = []
    ) async throws -> (client: Outcome, server: Outcome) {
        try await Self.run(
            serverContext: TLSContext(configuration: serverConfiguration),
            clientContext: TLSContext(configuration: clientConfiguration),
            serverHostname: serverHostname,
            host: host,
            payload: payload
        )
    }

    /// One connection between contexts made beforehand, so several
    /// connections can share them (session resumption).
    static func run(
        serverContext: TLSContext,
        clientContext: TLSContext,
        serverHostname: String = "localhost",
        host: String = "127.0.0.1",
        sessionCacheKey: String? = nil,
        payload: [UInt8] = []
    ) async throws -> (client: Outcome, server: Outcome) {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 2)
        do {
            let outcomes = try await Self.run(
                group: group,
                serverContext: serverContext,
                clientContext: clientContext,
                serverHostname: serverHostname,
                host: host,
                sessionCacheKey: sessionCacheKey,
                payload: payload
            )
            try await group.shutdownGracefully()
            return outcomes
        } catch {
            try? await group.shutdownGracefully()
            throw error
        }
    }

    private static func run(
        group: MultiThreadedEventLoopGroup,
        serverContext: TLSContext,
        clientContext: TLSContext,
        serverHostname: String,
        host: String,
        sessionCacheKey: String?,
        payload: [UInt8]
    ) async throws -> (client: Outcome, server: Outcome) {

        let serverOutcome = Self.boundedPromise(on: group.next())
        let clientOutcome = Self.boundedPromise(on: group.next())

        let listener = try await ServerBootstrap(group: group)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandlers([
                        TLSHandler(context: serverContext),
                        LoopbackPeer(role: .echoServer, outcome: serverOutcome),
                    ])
                }
            }
            .bind(host: host, port: 0)
            .get()
        let port = try #require(listener.localAddress?.port)

        let client = try await ClientBootstrap(group: group)
            .connectTimeout(Self.timeout)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandlers([
                        TLSHandler(context: clientContext, serverHostname: serverHostname, sessionCacheKey: sessionCacheKey),
                        LoopbackPeer(role: .client(payload: payload), outcome: clientOutcome),
                    ])
                }
            }
            .connect(host: host, port: port)
            .get()

        let clientResult: Outcome
        let serverResult: Outcome
        do {
            clientResult = try await clientOutcome.futureResult.get()
            serverResult = try await serverOutcome.futureResult.get()
        } catch {
            try? await client.close()
            try? await listener.close()
            throw error
        }
        try await listener.close()
        return (clientResult, serverResult)
    }

    /// A promise that fails with `TimedOut` if nothing completes it in time.
    private static func boundedPromise(on eventLoop: any EventLoop) -> EventLoopPromise<Outcome> {
        let promise = eventLoop.makePromise(of: Outcome.self)
        let timeout = eventLoop.scheduleTask(in: Self.timeout) { promise.fail(TimedOut()) }
        promise.futureResult.whenComplete { _ in timeout.cancel() }
        return promise
    }
}

/// Real sockets: one success and every refusal the server and client make.
@Suite struct TLSLoopbackTests {
    @Test func handshakeAndEcho() async throws {
        let payload = pattern(100_000)
        let (client, server) = try await LoopbackConnection.run(
            server: Certs.serverConfiguration(),
            client: Certs.clientConfiguration(user: "alice"),
            payload: payload
        )

        #expect(client.tlsErrors.isEmpty && client.otherErrors.isEmpty)
        #expect(server.tlsErrors.isEmpty && server.otherErrors.isEmpty)
        #expect(client.received == payload)
        #expect(server.received == payload)
        #expect(client.handshake?.negotiatedProtocol == "cirrus/1")
        #expect(client.handshake?.protocolVersion == "TLSv1.3")
        #expect(server.handshake?.peerCertificate?.subjectCommonName == "alice")
        #expect(server.sawShutdownCompleted)
    }

    @Test func ipAddressIsVerifiedAgainstTheCertificate() async throws {
        let (client, server) = try await LoopbackConnection.run(
            server: Certs.serverConfiguration(),
            client: Certs.clientConfiguration(),
            serverHostname: "127.0.0.1",
            payload: Array("hello".utf8)
        )

        #expect(client.tlsErrors.isEmpty)
        #expect(server.tlsErrors.isEmpty)
        #expect(client.received == Array("hello".utf8))
    }

    @Test(.enabled(if: ipv6LoopbackAvailable))
    func ipv6AddressIsVerifiedAgainstTheCertificate() async throws {
        let (client, server) = try await LoopbackConnection.run(
            server: Certs.serverConfiguration(),
            client: Certs.clientConfiguration(),
            serverHostname: "::1",
            host: "::1",
            payload: Array("hello".utf8)
        )

        #expect(client.tlsErrors.isEmpty)
        #expect(server.tlsErrors.isEmpty)
        #expect(client.received == Array("hello".utf8))
    }

    @Test func ipAddressNotInTheCertificateIsRefused() async throws {
        let (client, _) = try await LoopbackConnection.run(
            server: Certs.serverConfiguration(),
            client: Certs.clientConfiguration(),
            serverHostname: "127.0.0.2",
            payload: Array("hello".utf8)
        )

        let error = try #require(client.firstError)
        #expect(error.code == .certificateVerificationFailed)
        #expect(error.verifyResult == "IP address mismatch")
    }

    @Test func untrustedServerCertificateIsRefusedByTheClient() async throws {
        let (client, server) = try await LoopbackConnection.run(
            server: Certs.serverConfiguration(),
            client: Certs.clientConfiguration(trusting: "other-ca"),
            payload: Array("hello".utf8)
        )

        let error = try #require(client.firstError)
        #expect(error.code == .certificateVerificationFailed)
        let reason = try #require(error.verifyResult)
        #expect(reason == "unable to get local issuer certificate")
        #expect(error.description.contains(reason))
        #expect(client.handshake == nil)
        #expect(server.firstError?.code == .handshakeFailed)
        #expect(server.firstError?.message.contains("unknown ca") == true)
        #expect(server.received.isEmpty)
    }

    @Test func serverCertificateFromAnotherCAIsRefused() async throws {
        let (client, _) = try await LoopbackConnection.run(
            server: Certs.serverConfiguration(verification: .none, certificate: "other-server"),
            client: Certs.clientConfiguration(),
            payload: Array("hello".utf8)
        )

        let error = try #require(client.firstError)
        #expect(error.code == .certificateVerificationFailed)
        #expect(error.verifyResult != nil)
    }

    @Test func wrongHostNameIsRefused() async throws {
        let (client, server) = try await LoopbackConnection.run(
            server: Certs.serverConfiguration(),
            client: Certs.clientConfiguration(),
            serverHostname: "example.com",
            payload: Array("hello".utf8)
        )

        let error = try #require(client.firstError)
        #expect(error.code == .certificateVerificationFailed)
        #expect(error.verifyResult == "hostname mismatch")
        #expect(error.description.contains("hostname mismatch"))
        #expect(server.firstError?.code == .handshakeFailed)
        #expect(server.received.isEmpty)
    }

    @Test func missingClientCertificateIsRefusedWhenRequired() async throws {
        let (client, server) = try await LoopbackConnection.run(
            server: Certs.serverConfiguration(verification: .required),
            client: Certs.clientConfiguration(user: nil)
        )

        let serverError = try #require(server.firstError)
        #expect(serverError.code == .handshakeFailed)
        #expect(serverError.message.contains("peer did not return a certificate"))
        #expect(server.handshake == nil)
        // With TLS 1.3 the client's handshake is over before the server
        // checks; it learns of the refusal from the server's alert.
        let clientError = try #require(client.firstError)
        #expect(clientError.code == .alertReceived)
        #expect(clientError.message.contains("certificate required"))
    }

    @Test func missingClientCertificateIsAcceptedWhenOptional() async throws {
        let (client, server) = try await LoopbackConnection.run(
            server: Certs.serverConfiguration(verification: .optional),
            client: Certs.clientConfiguration(user: nil),
            payload: Array("hello".utf8)
        )

        #expect(client.tlsErrors.isEmpty)
        #expect(server.tlsErrors.isEmpty)
        #expect(server.handshake != nil)
        #expect(server.handshake?.peerCertificate == nil)
        #expect(client.received == Array("hello".utf8))
    }

    @Test func clientCertificateFromAnotherCAIsRefused() async throws {
        let (client, server) = try await LoopbackConnection.run(
            server: Certs.serverConfiguration(verification: .required),
            client: Certs.clientConfiguration(user: "mallory")
        )

        let serverError = try #require(server.firstError)
        #expect(serverError.code == .certificateVerificationFailed)
        let reason = try #require(serverError.verifyResult)
        #expect(reason == "unable to get local issuer certificate")
        #expect(server.handshake == nil)
        let clientError = try #require(client.firstError)
        #expect(clientError.code == .alertReceived)
        #expect(clientError.message.contains("unknown ca"))
    }

    @Test func tls12OnlyClientIsRefusedByATLS13Server() async throws {
        var clientConfiguration = Certs.clientConfiguration()
        clientConfiguration.minimumTLSVersion = .v1_2
        clientConfiguration.maximumTLSVersion = .v1_2
        let (client, server) = try await LoopbackConnection.run(
            server: Certs.serverConfiguration(),
            client: clientConfiguration
        )

        let serverError = try #require(server.firstError)
        #expect(serverError.code == .handshakeFailed)
        #expect(serverError.message.contains("unsupported protocol"))
        let clientError = try #require(client.firstError)
        #expect(clientError.code == .handshakeFailed)
        #expect(clientError.message.contains("protocol version"))
    }

    @Test func tls12WorksWhenBothSidesAllowIt() async throws {
        var serverConfiguration = Certs.serverConfiguration()
        serverConfiguration.minimumTLSVersion = .v1_2
        var clientConfiguration = Certs.clientConfiguration()
        clientConfiguration.minimumTLSVersion = .v1_2
        clientConfiguration.maximumTLSVersion = .v1_2
        let (client, server) = try await LoopbackConnection.run(
            server: serverConfiguration,
            client: clientConfiguration,
            payload: Array("hello".utf8)
        )

        #expect(client.tlsErrors.isEmpty)
        #expect(server.tlsErrors.isEmpty)
        #expect(client.handshake?.protocolVersion == "TLSv1.2")
        #expect(client.handshake?.negotiatedProtocol == "cirrus/1")
        #expect(server.handshake?.peerCertificate?.subjectCommonName == "alice")
        #expect(client.received == Array("hello".utf8))
    }
}
