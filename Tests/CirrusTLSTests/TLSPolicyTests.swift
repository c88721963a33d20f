import CirrusTLS
import NIOCore
import Testing

/// Mozilla's "modern" profile: key-exchange groups, TLS 1.2 suites, and
/// certificate revocation.
@Suite struct TLSPolicyTests {
    private func handshake(server: TLSConfiguration = Certs.serverConfiguration(), client: TLSConfiguration) throws -> InMemoryPair {
        let pair = try InMemoryPair(server: server, client: client)
        try pair.handshake()
        return pair
    }

    @Test(arguments: ["X448", "P-521"])
    func aClientOfferingOnlyGroupsOutsideTheProfileIsRefused(group: String) throws {
        var client = Certs.clientConfiguration()
        client.keyExchangeGroups = [group]
        let pair = try self.handshake(client: client)

        #expect(pair.serverRecorder.handshake == nil)
        #expect(pair.clientRecorder.handshake == nil)
        let error = try #require(pair.serverRecorder.tlsErrors.first)
        #expect(error.code == .handshakeFailed)
        #expect(pair.serverRecorder.isInactive)
    }

    @Test(arguments: ["X25519", "P-256", "P-384"])
    func eachGroupOfTheProfileIsAccepted(group: String) throws {
        var client = Certs.clientConfiguration()
        client.keyExchangeGroups = [group]
        let pair = try self.handshake(client: client)

        #expect(pair.serverRecorder.tlsErrors.isEmpty, "\(pair.serverRecorder.errors)")
        #expect(pair.serverRecorder.handshake?.protocolVersion == "TLSv1.3")
        #expect(pair.clientRecorder.handshake != nil)
    }

    @Test func theDefaultsAreTheProfile() {
        let configuration = Certs.serverConfiguration()
        #expect(configuration.keyExchangeGroups == ["X25519", "P-256", "P-384"])
        #expect(configuration.tls12CipherSuites.allSatisfy { $0.hasPrefix("ECDHE-") })
        #expect(configuration.tls12CipherSuites.allSatisfy { $0.contains("GCM") || $0.contains("CHACHA20-POLY1305") })
    }

    @Test func anUnknownGroupIsAConfigurationError() {
        var configuration = Certs.serverConfiguration()
        configuration.keyExchangeGroups = ["P-999"]
        #expect {
            try TLSContext(configuration: configuration)
        } throws: { error in
            (error as? TLSError)?.code == .configuration
        }
    }

    private static func tls12Client(suite: String) -> TLSConfiguration {
        var client = Certs.clientConfiguration()
        client.minimumTLSVersion = .v1_2
        client.maximumTLSVersion = .v1_2
        client.tls12CipherSuites = [suite]
        return client
    }

    private static var tls12Server: TLSConfiguration {
        var server = Certs.serverConfiguration()
        server.minimumTLSVersion = .v1_2
        return server
    }

    @Test(arguments: ["ECDHE-ECDSA-AES128-SHA256", "ECDHE-ECDSA-AES256-SHA"])
    func withTLS12AllowedACBCSuiteIsRefused(suite: String) throws {
        let pair = try self.handshake(server: Self.tls12Server, client: Self.tls12Client(suite: suite))

        #expect(pair.serverRecorder.handshake == nil)
        #expect(pair.clientRecorder.handshake == nil)
        #expect(pair.serverRecorder.tlsErrors.first?.code == .handshakeFailed)
    }

    @Test(arguments: ["ECDHE-ECDSA-AES128-GCM-SHA256", "ECDHE-ECDSA-AES256-GCM-SHA384", "ECDHE-ECDSA-CHACHA20-POLY1305"])
    func withTLS12AllowedAnECDHEAEADSuiteIsAccepted(suite: String) throws {
        let pair = try self.handshake(server: Self.tls12Server, client: Self.tls12Client(suite: suite))

        #expect(pair.serverRecorder.tlsErrors.isEmpty, "\(pair.serverRecorder.errors)")
        #expect(pair.serverRecorder.handshake?.protocolVersion == "TLSv1.2")
        #expect(pair.serverRecorder.handshake?.cipherSuite == suite)
    }

    // MARK: Revocation

    private static func revoking(_ crl: String) -> TLSConfiguration {
        var server = Certs.serverConfiguration(verification: .required)
        server.certificateRevocationListPath = Certs.path(crl)
        return server
    }

    @Test func aRevokedClientCertificateIsRefusedAtTheHandshake() throws {
        let pair = try self.handshake(server: Self.revoking("ca-crl-carol.pem"), client: Certs.clientConfiguration(user: "carol"))

        let error = try #require(pair.serverRecorder.tlsErrors.first)
        #expect(error.code == .certificateVerificationFailed)
        #expect(error.verifyResult == "certificate revoked")
        #expect(pair.serverRecorder.handshake == nil)
        #expect(pair.serverRecorder.isInactive)
    }

    @Test func aClientNotOnTheListIsAccepted() throws {
        let pair = try self.handshake(server: Self.revoking("ca-crl-carol.pem"), client: Certs.clientConfiguration(user: "alice"))
        #expect(pair.serverRecorder.tlsErrors.isEmpty, "\(pair.serverRecorder.errors)")
        #expect(pair.serverRecorder.handshake?.peerCertificate?.subjectCommonName == "alice")
    }

    @Test func anEmptyListRevokesNobody() throws {
        let pair = try self.handshake(server: Self.revoking("ca-crl.pem"), client: Certs.clientConfiguration(user: "carol"))
        #expect(pair.serverRecorder.tlsErrors.isEmpty, "\(pair.serverRecorder.errors)")
        #expect(pair.serverRecorder.handshake?.peerCertificate?.subjectCommonName == "carol")
    }

    @Test(arguments: ["missing-crl.pem", "ca.pem", "ca-key.pem"])
    func aFileThatIsNotARevocationListIsAConfigurationError(file: String) {
        #expect {
            try TLSContext(configuration: Self.revoking(file))
        } throws: { error in
            guard let error = error as? TLSError else { return false }
            return error.code == .configuration && error.message.contains(file)
        }
    }

    @Test func aRevocationListWithoutClientVerificationIsAConfigurationError() {
        var server = Certs.serverConfiguration(verification: .none)
        server.certificateRevocationListPath = Certs.path("ca-crl.pem")
        #expect {
            try TLSContext(configuration: server)
        } throws: { error in
            (error as? TLSError)?.code == .configuration
        }
    }
}
