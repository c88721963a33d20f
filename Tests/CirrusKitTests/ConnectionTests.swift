import CirrusKit
import CirrusModel
import CirrusServer
import CirrusTestSupport
import Foundation
import Testing

/// The client connection against a real in-process `CirrusServer` over TLS on loopback.
@Suite("Connection to a live server")
struct ConnectionTests {
    @Test("Hello authenticates alice by her certificate; Ping round-trips")
    func helloAndPing() async throws {
        try await withServer { _, port in
            let container = CKContainer(identifier: "iCloud.test", configuration: TestCertificates.client(port: port))
            #expect(try await container.authenticatedUserRecordName() == "_alice")
            try await container.ping()
            try await container.ping()
        }
    }

    @Test("A bearer token authenticates without a client certificate")
    func bearerToken() async throws {
        try await withServer(configure: { $0.bearerTokens = ["s3cret": "_bob"] }) { _, port in
            var configuration = TestCertificates.client(port: port, user: nil)
            configuration.bearerToken = "s3cret"
            let container = CKContainer(identifier: "iCloud.test", configuration: configuration)
            let user = try await container.authenticatedUserRecordName()
            #expect(user == "_bob")
        }
    }

    @Test("An operation the server rejects ends with its CKError; completionBlock runs after the result block")
    func operationRejected() async throws {
        try await withServer { _, port in
            let container = CKContainer(identifier: "iCloud.test", configuration: TestCertificates.client(port: port))
            let operation = CKFetchRecordsOperation(recordIDs: [CKRecord.ID(recordName: "a")])
            let order = Recorder<String>()
            let result = Recorder<Result<Void, any Error>>()
            operation.fetchRecordsResultBlock = {
                result.append($0)
                order.append("result")
            }
            operation.completionBlock = { order.append("completion") }
            container.privateCloudDatabase.add(operation)
            await waitUntilFinished(operation)
            try await eventually { order.count == 2 }
            #expect(result.values.first?.failureCode == .serverRejectedRequest)
            #expect(order.values == ["result", "completion"])
            #expect(operation.isFinished)
            #expect(!operation.isExecuting)
        }
    }

    @Test("No client certificate: notAuthenticated")
    func noCertificate() async throws {
        try await withServer { _, port in
            let container = CKContainer(identifier: "iCloud.test", configuration: TestCertificates.client(port: port, user: nil))
            let error = await #expect(throws: CKError.self) { try await container.authenticatedUserRecordName() }
            #expect(error?.code == .notAuthenticated)
        }
    }

    @Test("Client certificate required and missing (TLS 1.3 alert after the handshake): notAuthenticated")
    func certificateRequired() async throws {
        try await withServer(verification: .required) { _, port in
            let container = CKContainer(identifier: "iCloud.test", configuration: TestCertificates.client(port: port, user: nil))
            let error = await #expect(throws: CKError.self) { try await container.authenticatedUserRecordName() }
            #expect(error?.code == .notAuthenticated)
        }
    }

    @Test("A certificate from an untrusted CA: notAuthenticated")
    func untrustedClientCertificate() async throws {
        try await withServer(verification: .required) { _, port in
            let container = CKContainer(identifier: "iCloud.test", configuration: TestCertificates.client(port: port, user: "mallory"))
            let error = await #expect(throws: CKError.self) { try await container.authenticatedUserRecordName() }
            #expect(error?.code == .notAuthenticated)
        }
    }

    @Test("A server certificate the client does not trust: networkFailure naming verification")
    func wrongCA() async throws {
        try await withServer { _, port in
            let configuration = TestCertificates.client(port: port, trust: "other-ca.pem")
            let container = CKContainer(identifier: "iCloud.test", configuration: configuration)
            let error = await #expect(throws: CKError.self) { try await container.authenticatedUserRecordName() }
            #expect(error?.code == .networkFailure)
            #expect(error?.message?.contains("did not verify") == true)
        }
    }

    @Test("A server name the certificate does not carry: networkFailure")
    func wrongServerName() async throws {
        try await withServer { _, port in
            var configuration = TestCertificates.client(port: port)
            configuration.serverName = "sync.example.com"
            let container = CKContainer(identifier: "iCloud.test", configuration: configuration)
            let error = await #expect(throws: CKError.self) { try await container.authenticatedUserRecordName() }
            #expect(error?.code == .networkFailure)
        }
    }

    @Test("Nothing listening: the operation's result block gets networkFailure")
    func serverGone() async throws {
        let port = try await withServer { _, port in port }
        let container = CKContainer(identifier: "iCloud.test", configuration: TestCertificates.client(port: port))
        let operation = CKModifyRecordZonesOperation(recordZonesToSave: [CKRecordZone(zoneName: "Z")])
        let result = Recorder<Result<Void, any Error>>()
        operation.modifyRecordZonesResultBlock = { result.append($0) }
        await runToCompletion(operation, on: container.privateCloudDatabase)
        #expect(result.values.first?.failureCode == .networkFailure)
    }

    @Test("After the server restarts on the same port, the next operation reconnects")
    func reconnectAfterRestart() async throws {
        var port = 0
        let container: CKContainer = try await withServer { _, serverPort in
            port = serverPort
            let container = CKContainer(identifier: "iCloud.test", configuration: TestCertificates.client(port: serverPort))
            let user = try await container.authenticatedUserRecordName()
            #expect(user == "_alice")
            return container
        }
        // The server is gone: an operation fails with networkFailure.
        let down = CKFetchRecordZonesOperation.fetchAllRecordZonesOperation()
        let downResult = Recorder<Result<Void, any Error>>()
        down.fetchRecordZonesResultBlock = { downResult.append($0) }
        await runToCompletion(down, on: container.privateCloudDatabase)
        #expect(downResult.values.first?.failureCode == .networkFailure)

        try await withServer(port: port) { _, _ in
            try await container.ping()
            let up = CKFetchRecordZonesOperation.fetchAllRecordZonesOperation()
            let upResult = Recorder<Result<Void, any Error>>()
            up.fetchRecordZonesResultBlock = { upResult.append($0) }
            await runToCompletion(up, on: container.privateCloudDatabase)
            // Reached the server, which does not run operations yet.
            #expect(upResult.values.first?.failureCode == .serverRejectedRequest)
        }
    }

    @Test("Many operations share one connection")
    func multiplexed() async throws {
        try await withServer { server, port in
            let container = CKContainer(identifier: "iCloud.test", configuration: TestCertificates.client(port: port))
            let results = Recorder<CKError.Code?>()
            let operations = (0..<50).map { index -> CKFetchRecordsOperation in
                let operation = CKFetchRecordsOperation(recordIDs: [CKRecord.ID(recordName: "r\(index)")])
                operation.fetchRecordsResultBlock = { results.append($0.failureCode) }
                return operation
            }
            for operation in operations {
                container.privateCloudDatabase.add(operation)
            }
            for operation in operations {
                await waitUntilFinished(operation)
            }
            try await eventually { results.count == 50 }
            #expect(results.values.allSatisfy { $0 == .serverRejectedRequest })
            #expect(server.connectionCount == 1)
        }
    }
}

@Suite("Client configuration")
struct ClientConfigurationTests {
    @Test("The environment gives server, CA, certificate, key and token")
    func environment() {
        let configuration = CirrusClientConfiguration.fromEnvironment([
            "CIRRUS_SERVER": "sync.example.com:9443",
            "CIRRUS_CA": "/ca.pem",
            "CIRRUS_CERT": "/alice.pem",
            "CIRRUS_KEY": "/alice-key.pem",
            "CIRRUS_TOKEN": "t0ken",
        ])
        #expect(configuration.host == "sync.example.com")
        #expect(configuration.port == 9443)
        #expect(configuration.trustRootsPath == "/ca.pem")
        #expect(configuration.certificateChainPath == "/alice.pem")
        #expect(configuration.privateKeyPath == "/alice-key.pem")
        #expect(configuration.bearerToken == "t0ken")
    }

    @Test("Defaults: 127.0.0.1:7443, nothing else")
    func defaults() {
        let configuration = CirrusClientConfiguration.fromEnvironment([:])
        #expect(configuration.host == "127.0.0.1")
        #expect(configuration.port == 7443)
        #expect(configuration.trustRootsPath == nil)
        #expect(configuration.bearerToken == nil)
    }

    @Test(
        "Server addresses",
        arguments: [
            ("host:1234", "host", 1234), ("host", "host", 7443), ("[::1]:99", "::1", 99), ("[::1]", "::1", 7443),
            ("::1", "::1", 7443),
        ]
    )
    func serverAddress(value: String, host: String, port: Int) {
        let configuration = CirrusClientConfiguration.fromEnvironment(["CIRRUS_SERVER": value])
        #expect(configuration.host == host)
        #expect(configuration.port == port)
        #expect(configuration.failoverServers.isEmpty)
    }

    @Test("Several servers, separated by commas: the first is host and port, the rest fail-over servers")
    func serverList() {
        let configuration = CirrusClientConfiguration.fromEnvironment(["CIRRUS_SERVER": "a.example:7443, [::1]:9000,b.example,,"])
        #expect(configuration.host == "a.example")
        #expect(configuration.port == 7443)
        #expect(configuration.servers.map(\.description) == ["a.example:7443", "[::1]:9000", "b.example:7443"])
        #expect(CirrusClientConfiguration.fromEnvironment(["CIRRUS_SERVER": " , "]).servers.map(\.description) == ["127.0.0.1:7443"])

        var changed = configuration
        changed.servers = [CirrusClientConfiguration.Server(host: "c.example", port: 1)]
        #expect(changed.host == "c.example" && changed.port == 1 && changed.failoverServers.isEmpty)
        changed.servers = []
        #expect(changed.servers.count == 1, "an empty list changes nothing")
    }
}
