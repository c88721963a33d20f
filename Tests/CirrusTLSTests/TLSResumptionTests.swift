import CirrusTLS
import NIOCore
import Testing

/// Session resumption: a server issues tickets, a client keeps them per
/// server and offers one on its next connection.
@Suite struct TLSResumptionTests {
    private static let key = "localhost@127.0.0.1:443"

    /// Handshakes a fresh in-memory pair over the given contexts and returns it.
    private func connect(
        _ server: TLSContext,
        _ client: TLSContext,
        key: String? = Self.key
    ) throws -> InMemoryPair {
        let pair = try InMemoryPair(serverContext: server, clientContext: client, sessionCacheKey: key)
        try pair.handshake()
        #expect(pair.serverRecorder.tlsErrors.isEmpty, "\(pair.serverRecorder.errors)")
        #expect(pair.clientRecorder.tlsErrors.isEmpty, "\(pair.clientRecorder.errors)")
        return pair
    }

    @Test func secondHandshakeResumesWithTheSameClientCertificate() throws {
        let server = try TLSContext(configuration: Certs.serverConfiguration(verification: .required))
        let client = try TLSContext(configuration: Certs.clientConfiguration(user: "alice"))

        let first = try self.connect(server, client)
        let full = try #require(first.serverRecorder.handshake)
        #expect(!full.isResumed)
        #expect(first.clientRecorder.handshake?.isResumed == false)
        // The server's tickets arrive right after the handshake.
        #expect(client.sessionCache?.count(for: Self.key) == TLSSessionCache.maximumSessionsPerKey)

        let second = try self.connect(server, client)
        let resumed = try #require(second.serverRecorder.handshake)
        #expect(resumed.isResumed)
        #expect(second.clientRecorder.handshake?.isResumed == true)
        #expect(resumed.protocolVersion == "TLSv1.3")
        #expect(resumed.negotiatedProtocol == "cirrus/1")
        // The identity checked at the full handshake comes with the session.
        #expect(resumed.peerCertificate?.subjectCommonName == "alice")

        // Data flows over the resumed connection.
        second.clientWrite(Array("hello".utf8))
        try interactInMemory(second.client, second.server)
        #expect(second.serverRecorder.received == Array("hello".utf8))
    }

    @Test func eachSessionIsOfferedOnceAndReplacedByFreshTickets() throws {
        let server = try TLSContext(configuration: Certs.serverConfiguration())
        let client = try TLSContext(configuration: Certs.clientConfiguration())
        _ = try self.connect(server, client)
        for _ in 0..<3 {
            let pair = try self.connect(server, client)
            #expect(pair.serverRecorder.handshake?.isResumed == true)
            #expect(client.sessionCache?.count(for: Self.key) == TLSSessionCache.maximumSessionsPerKey)
        }
    }

    @Test func aSessionIsOnlyOfferedToItsOwnServer() throws {
        let server = try TLSContext(configuration: Certs.serverConfiguration())
        let client = try TLSContext(configuration: Certs.clientConfiguration())
        _ = try self.connect(server, client, key: "localhost@127.0.0.1:1")

        let other = try self.connect(server, client, key: "localhost@127.0.0.1:2")
        #expect(other.serverRecorder.handshake?.isResumed == false)
    }

    @Test func noKeyMeansNoResumption() throws {
        let server = try TLSContext(configuration: Certs.serverConfiguration())
        let client = try TLSContext(configuration: Certs.clientConfiguration())
        _ = try self.connect(server, client, key: nil)
        let second = try self.connect(server, client, key: nil)
        #expect(second.serverRecorder.handshake?.isResumed == false)
    }

    @Test func aReloadedServerContextRefusesOldTicketsAndHandshakesInFull() throws {
        let configuration = Certs.serverConfiguration()
        let client = try TLSContext(configuration: Certs.clientConfiguration())
        _ = try self.connect(try TLSContext(configuration: configuration), client)
        #expect(client.sessionCache?.count(for: Self.key) ?? 0 > 0)

        let reloaded = try TLSContext(configuration: configuration)
        let pair = try self.connect(reloaded, client)
        #expect(pair.serverRecorder.handshake?.isResumed == false)
        #expect(pair.serverRecorder.handshake?.peerCertificate?.subjectCommonName == "alice")
    }

    @Test func anEmptyCacheHasAtLeastOneSlot() {
        let cache = TLSSessionCache(maximumKeys: 2)
        #expect(cache.maximumKeys == 2)
        #expect(TLSSessionCache(maximumKeys: 0).maximumKeys == 1)
        #expect(cache.count(for: "a") == 0)
        cache.removeAll()
        #expect(cache.count(for: "a") == 0)
    }

    @Test func aFullClientCacheEvictsTheOldestServer() throws {
        let server = try TLSContext(configuration: Certs.serverConfiguration())
        let client = try TLSContext(configuration: Certs.clientConfiguration())
        let cache = try #require(client.sessionCache)
        for port in 1...(cache.maximumKeys + 1) {
            _ = try self.connect(server, client, key: "localhost@127.0.0.1:\(port)")
        }
        #expect(cache.count(for: "localhost@127.0.0.1:1") == 0)
        #expect(cache.count(for: "localhost@127.0.0.1:2") > 0)
        #expect(cache.count(for: "localhost@127.0.0.1:\(cache.maximumKeys + 1)") > 0)
    }

    @Test func resumesOverLoopback() async throws {
        let server = try TLSContext(configuration: Certs.serverConfiguration())
        let client = try TLSContext(configuration: Certs.clientConfiguration(user: "bob"))
        let payload = Array("resumed".utf8)
        let (firstClient, _) = try await LoopbackConnection.run(
            serverContext: server, clientContext: client, sessionCacheKey: Self.key, payload: payload)
        #expect(firstClient.handshake?.isResumed == false)
        #expect(firstClient.received == payload)

        let (secondClient, secondServer) = try await LoopbackConnection.run(
            serverContext: server, clientContext: client, sessionCacheKey: Self.key, payload: payload)
        #expect(secondClient.tlsErrors.isEmpty && secondServer.tlsErrors.isEmpty)
        #expect(secondClient.handshake?.isResumed == true)
        #expect(secondServer.handshake?.isResumed == true)
        #expect(secondServer.handshake?.peerCertificate?.subjectCommonName == "bob")
        #expect(secondClient.received == payload)
    }
}
