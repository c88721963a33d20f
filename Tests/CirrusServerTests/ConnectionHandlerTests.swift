import CirrusTLS
import CirrusWire
import NIOCore
import NIOEmbedded
import Testing

@testable import CirrusServer

/// Counts the `read()` requests that reach the head of the pipeline.
private final class ReadCounter: ChannelOutboundHandler {
    typealias OutboundIn = OutboundFrame
    var reads = 0

    func read(context: ChannelHandlerContext) {
        self.reads += 1
        context.read()
    }
}

private func makeChannel() throws -> (EmbeddedChannel, ReadCounter) {
    let configuration = ServerConfiguration(tls: .server(certificateChainPath: "unused", privateKeyPath: "unused"))
    let counter = ReadCounter()
    let channel = EmbeddedChannel()
    try channel.pipeline.syncOperations.addHandler(counter)
    try channel.pipeline.syncOperations.addHandler(ConnectionHandler(configuration: configuration, logger: .init(label: "test")))
    return (channel, counter)
}

private func certificate(commonName: String) -> TLSHandshakeCompleted {
    TLSHandshakeCompleted(
        negotiatedProtocol: "cirrus/1",
        protocolVersion: "TLSv1.3",
        cipherSuite: "TLS_AES_128_GCM_SHA256",
        peerCertificate: TLSPeerCertificate(subject: "CN=\(commonName)", subjectCommonName: commonName, derBytes: [])
    )
}

@Suite("Connection handler on an EmbeddedChannel")
struct ConnectionHandlerTests {
    @Test func stopsReadingWhileThePeerDoesNotRead() throws {
        let (channel, counter) = try makeChannel()
        channel.read()
        #expect(counter.reads == 1)

        channel.isWritable = false
        channel.pipeline.fireChannelWritabilityChanged()
        channel.read()
        channel.read()
        #expect(counter.reads == 1, "no read while the outbound side is full")

        channel.isWritable = true
        channel.pipeline.fireChannelWritabilityChanged()
        #expect(counter.reads == 2, "the held read goes out once writable again")
        _ = try? channel.finish()
    }

    @Test func noHelloInTimeIsAHandshakeTimeout() async throws {
        var configuration = ServerConfiguration(tls: .server(certificateChainPath: "unused", privateKeyPath: "unused"))
        configuration.connection.handshakeTimeout = .milliseconds(50)
        configuration.timerInterval = .milliseconds(10)
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.addHandler(ConnectionHandler(configuration: configuration, logger: .init(label: "test")))
        // The handler reads the wall clock: let it pass the deadline (a lower bound only).
        try await Task.sleep(for: .milliseconds(100))
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(20))
        let frame = try channel.readOutbound(as: OutboundFrame.self)?.decoded()
        guard case .error(let error) = frame?.kind else {
            Issue.record("expected a ConnectionError, got \(String(describing: frame))")
            return
        }
        #expect(error.code == .handshakeTimeout)
        #expect(!channel.isActive, "the connection closes")
        _ = try? channel.finish()
    }

    @Test func helloIsAnsweredWithTheCertificatesUser() throws {
        let (channel, _) = try makeChannel()
        channel.pipeline.fireUserInboundEventTriggered(certificate(commonName: "alice"))
        try channel.writeInbound(Wire.Frame(streamID: 0, kind: .hello(Wire.Hello(protocolVersion: Wire.protocolVersion))))
        let reply = try #require(try channel.readOutbound(as: OutboundFrame.self)?.decoded())
        guard case .helloAck(let ack) = reply.kind else {
            Issue.record("expected HelloAck, got \(reply)")
            return
        }
        #expect(ack.userRecordName == "_alice")
        _ = try? channel.finish()
    }

    @Test func certificateWithAnUnusableNameIsNotAuthenticated() throws {
        let (channel, _) = try makeChannel()
        channel.pipeline.fireUserInboundEventTriggered(certificate(commonName: "alice smith/../"))
        try channel.writeInbound(Wire.Frame(streamID: 0, kind: .hello(Wire.Hello(protocolVersion: Wire.protocolVersion))))
        let reply = try #require(try channel.readOutbound(as: OutboundFrame.self)?.decoded())
        #expect(reply.kind == .error(Wire.ConnectionError(code: .notAuthenticated, message: "present a client certificate from a trusted CA or a valid bearer token")))
        #expect(!channel.isActive)
    }

    @Test func pongsAreFlushedOncePerReadBurst() throws {
        let (channel, _) = try makeChannel()
        channel.pipeline.fireUserInboundEventTriggered(certificate(commonName: "alice"))
        try channel.writeInbound(Wire.Frame(streamID: 0, kind: .hello(Wire.Hello(protocolVersion: Wire.protocolVersion))))
        _ = try channel.readOutbound(as: OutboundFrame.self)?.decoded()
        // Three Pings in one burst: nothing is flushed until channelReadComplete.
        for nonce in 1...3 {
            channel.pipeline.fireChannelRead(Wire.Frame(streamID: 0, kind: .ping(Wire.Ping(nonce: UInt64(nonce)))))
        }
        #expect(try channel.readOutbound(as: OutboundFrame.self)?.decoded() == nil)
        channel.pipeline.fireChannelReadComplete()
        for nonce in 1...3 {
            #expect(try channel.readOutbound(as: OutboundFrame.self)?.decoded().kind == .pong(Wire.Pong(nonce: UInt64(nonce))))
        }
        _ = try? channel.finish()
    }

    @Test func decoderErrorsBecomeAConnectionError() throws {
        let (channel, _) = try makeChannel()
        channel.pipeline.fireErrorCaught(WireError.frameTooLarge(length: 1 << 30, maximum: 1 << 22))
        let reply = try #require(try channel.readOutbound(as: OutboundFrame.self)?.decoded())
        guard case .error(let error) = reply.kind else {
            Issue.record("expected an Error frame")
            return
        }
        #expect(error.code == .frameTooLarge)
        #expect(!channel.isActive)
    }
}

@Suite("Client identity and bearer tokens")
struct ClientIdentityTests {
    @Test(arguments: ["alice", "bob.smith", "user-1@example.com"])
    func usableNames(name: String) {
        let certificate = TLSPeerCertificate(subject: "CN=\(name)", subjectCommonName: name, derBytes: [])
        #expect(ClientIdentity(certificate: certificate)?.userRecordName == "_" + name)
    }

    @Test(arguments: ["", "a b", "ä", String(repeating: "x", count: 129), "a/b"])
    func unusableNames(name: String) {
        let certificate = TLSPeerCertificate(subject: "CN=\(name)", subjectCommonName: name, derBytes: [])
        #expect(ClientIdentity(certificate: certificate) == nil)
    }

    @Test func tokenFileParses() throws {
        let tokens = try BearerTokenFile.parse("# comment\n\nabc _alice\n  def\t_bob  \n")
        #expect(tokens == ["abc": "_alice", "def": "_bob"])
    }

    @Test(arguments: [
        ("abc", 1), ("abc _alice extra", 1), ("abc alice", 1), ("abc _alice\nabc _bob", 2),
    ])
    func tokenFileErrorsNameTheLine(text: String, line: Int) {
        let error = #expect(throws: BearerTokenFile.FormatError.self) { try BearerTokenFile.parse(text) }
        #expect(error?.line == line)
    }
}
