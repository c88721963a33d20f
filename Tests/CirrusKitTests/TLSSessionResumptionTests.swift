import CirrusKit
import CirrusTestSupport
import Foundation
import Testing

/// CirrusKit resumes the TLS session of its last connection to a server: a
/// resumed handshake receives no server certificate, so it reads far fewer
/// bytes than a full one (the certificate, its signature and the CA names
/// requested of the client are several hundred bytes).
@Suite("TLS session resumption from CirrusKit")
struct TLSSessionResumptionTests {
    /// Bytes a fresh container reads to connect and authenticate.
    private func bytesToConnect(_ configuration: CirrusClientConfiguration) async throws -> UInt64 {
        let container = CKContainer(identifier: "iCloud.test", configuration: configuration)
        #expect(try await container.authenticatedUserRecordName() == "_alice")
        let statistics = container.transportStatistics
        #expect(statistics.connectionsEstablished == 1)
        return statistics.bytesReceived
    }

    @Test("A second connection to the same server resumes; with resumption off it does not")
    func secondConnectionResumes() async throws {
        try await withServer { _, port in
            let configuration = TestCertificates.client(port: port)
            let full = try await self.bytesToConnect(configuration)
            // The session cache is the process's and holds 64 servers: with the whole suite
            // running, other tests' servers may evict this one between two connections, so
            // the best of three reconnections is what resumption saves.
            var resumed = UInt64.max
            for _ in 0..<3 {
                resumed = min(resumed, try await self.bytesToConnect(configuration))
            }
            #expect(resumed + 400 < full, "full handshake read \(full) bytes, the resumed one \(resumed)")

            var off = configuration
            off.resumesTLSSessions = false
            let notResumed = try await self.bytesToConnect(off)
            #expect(notResumed > resumed + 400, "resumption off read \(notResumed) bytes, resumed \(resumed)")
        }
    }

    @Test("A session is not offered with another client certificate")
    func anotherIdentityHandshakesInFull() async throws {
        try await withServer { _, port in
            let alice = TestCertificates.client(port: port)
            let full = try await self.bytesToConnect(alice)
            // bob's first connection: his own full handshake, not alice's session.
            let bob = CKContainer(identifier: "iCloud.test", configuration: TestCertificates.client(port: port, user: "bob"))
            #expect(try await bob.authenticatedUserRecordName() == "_bob")
            let bobBytes = bob.transportStatistics.bytesReceived
            #expect(bobBytes + 400 > full, "bob read \(bobBytes) bytes, alice's full handshake \(full)")
        }
    }
}
