import CirrusTLS
import Testing

/// TLSContext loads everything up front and names what it could not use.
@Suite struct TLSContextTests {
    @Test func loadsTheDevelopmentCertificates() throws {
        _ = try TLSContext(configuration: Certs.serverConfiguration())
        _ = try TLSContext(configuration: Certs.clientConfiguration())
        _ = try TLSContext(configuration: .client(trustRootsPath: Certs.path("ca.pem")))
    }

    @Test func missingCertificateFileIsNamed() throws {
        let missing = Certs.path("does-not-exist.pem")
        let configuration = TLSConfiguration.server(certificateChainPath: missing, privateKeyPath: Certs.path("server-key.pem"))

        let error = try #require(throws: TLSError.self) { try TLSContext(configuration: configuration) }
        #expect(error.code == .configuration)
        #expect(error.message.contains(missing))
        #expect(!error.openSSLErrors.isEmpty)
        #expect(error.description.contains(missing))
    }

    @Test func missingPrivateKeyFileIsNamed() throws {
        let missing = Certs.path("no-key.pem")
        let configuration = TLSConfiguration.server(certificateChainPath: Certs.path("server.pem"), privateKeyPath: missing)

        let error = try #require(throws: TLSError.self) { try TLSContext(configuration: configuration) }
        #expect(error.code == .configuration)
        #expect(error.message.contains(missing))
    }

    @Test func missingTrustRootsAreNamed() throws {
        let missing = Certs.path("no-ca.pem")

        let error = try #require(throws: TLSError.self) { try TLSContext(configuration: .client(trustRootsPath: missing)) }
        #expect(error.code == .configuration)
        #expect(error.message.contains(missing))
    }

    @Test func keyNotMatchingTheCertificateIsNamed() throws {
        let configuration = TLSConfiguration.server(
            certificateChainPath: Certs.path("server.pem"),
            privateKeyPath: Certs.path("alice-key.pem")
        )

        let error = try #require(throws: TLSError.self) { try TLSContext(configuration: configuration) }
        #expect(error.code == .configuration)
        #expect(error.message.contains("alice-key.pem"))
        #expect(error.message.contains("server.pem"))
        #expect(!error.openSSLErrors.isEmpty)
    }

    @Test func certificateWithoutKeyIsRefused() throws {
        var configuration = Certs.clientConfiguration()
        configuration.privateKeyPath = nil

        let error = try #require(throws: TLSError.self) { try TLSContext(configuration: configuration) }
        #expect(error.code == .configuration)
    }

    @Test func serverWithoutCertificateIsRefused() throws {
        let error = try #require(throws: TLSError.self) { try TLSContext(configuration: TLSConfiguration(role: .server)) }
        #expect(error.code == .configuration)
    }

    @Test func requiringClientCertificatesNeedsClientCAs() throws {
        var configuration = Certs.serverConfiguration(verification: .required)
        configuration.trustRootsPath = nil

        let error = try #require(throws: TLSError.self) { try TLSContext(configuration: configuration) }
        #expect(error.code == .configuration)
    }

    @Test func versionRangeMustNotBeEmpty() throws {
        var configuration = Certs.clientConfiguration()
        configuration.maximumTLSVersion = .v1_2

        let error = try #require(throws: TLSError.self) { try TLSContext(configuration: configuration) }
        #expect(error.code == .configuration)
    }

    @Test(arguments: ["", String(repeating: "x", count: 256)])
    func invalidApplicationProtocolIsRefused(name: String) throws {
        var configuration = Certs.clientConfiguration()
        configuration.applicationProtocols = [name]

        let error = try #require(throws: TLSError.self) { try TLSContext(configuration: configuration) }
        #expect(error.code == .configuration)
    }

    @Test func configurationDefaults() {
        let configuration = TLSConfiguration.client()
        #expect(configuration.role == .client)
        #expect(configuration.minimumTLSVersion == .v1_3)
        #expect(configuration.maximumTLSVersion == nil)
        #expect(configuration.applicationProtocols == ["cirrus/1"])
        #expect(configuration.verifyHostname)
        #expect(configuration.clientCertificateVerification == .none)
    }
}
