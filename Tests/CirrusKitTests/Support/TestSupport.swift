import CirrusKit
import CirrusModel
import CirrusServer
import CirrusTLS
import CirrusTestSupport
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import Testing

/// The development certificates (CirrusTestSupport) as CirrusKit and its test servers use them.
extension TestCertificates {
    /// A client of the server on `port`, as `user` (nil = no client certificate).
    static func client(port: Int, user: String? = "alice", trust: String = "ca.pem") -> CirrusClientConfiguration {
        var configuration = CirrusClientConfiguration(
            host: "127.0.0.1",
            port: port,
            trustRootsPath: path(trust),
            certificateChainPath: user.map { path("\($0).pem") },
            privateKeyPath: user.map { path("\($0)-key.pem") }
        )
        configuration.reconnectBaseDelay = 0.02
        configuration.reconnectMaximumDelay = 0.2
        // Generous: 50 handshakes at once on a loaded 2-core machine can take seconds. Tests of
        // the timeout itself set their own.
        configuration.connectTimeout = 30
        return configuration
    }

    static func serverTLS(
        verification: TLSConfiguration.ClientCertificateVerification = .optional,
        certificate: String = "server"
    ) -> TLSConfiguration {
        .server(
            certificateChainPath: path("\(certificate).pem"),
            privateKeyPath: path("\(certificate)-key.pem"),
            clientCATrustRootsPath: path("ca.pem"),
            clientCertificateVerification: verification
        )
    }
}

/// Runs a real in-process `CirrusServer` on a free loopback port for the length of `body`.
func withServer<R>(
    verification: TLSConfiguration.ClientCertificateVerification = .optional,
    port: Int = 0,
    configure: (inout ServerConfiguration) -> Void = { _ in },
    _ body: (CirrusServer, Int) async throws -> R
) async throws -> R {
    var configuration = ServerConfiguration(tls: TestCertificates.serverTLS(verification: verification))
    configuration.port = port
    // The whole suite runs in one process on two cores: a TLS handshake plus `Hello` can take
    // longer than the production 10 s there. Tests of the timeout itself set their own.
    configuration.connection.handshakeTimeout = .seconds(60)
    configure(&configuration)
    let server = CirrusServer(configuration: configuration)
    let address = try await server.start()
    let port = try #require(address.port)
    do {
        let result = try await body(server, port)
        await server.shutdownGracefully()
        return result
    } catch {
        await server.shutdownGracefully()
        throw error
    }
}

/// Values collected from callbacks on any thread, in arrival order.
final class Recorder<Value: Sendable>: Sendable {
    private let box = NIOLockedValueBox<[Value]>([])

    func append(_ value: Value) { self.box.withLockedValue { $0.append(value) } }
    var values: [Value] { self.box.withLockedValue { $0 } }
    var count: Int { self.box.withLockedValue { $0.count } }
}

/// Adds `operation` (to `database`, or starts it directly) and waits until it finished.
func runToCompletion(_ operation: CKOperation, on database: CKDatabase? = nil) async {
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
        let previous = operation.completionBlock
        operation.completionBlock = {
            previous?()
            continuation.resume()
        }
        if let database, let operation = operation as? CKDatabaseOperation {
            database.add(operation)
        } else {
            operation.start()
        }
    }
}

extension Result {
    var failureCode: CKError.Code? {
        guard case .failure(let error) = self else { return nil }
        return (error as? CKError)?.code
    }
}

/// `operation.waitUntilFinished()`, called on a thread of its own so the test's task does not
/// block the cooperative pool.
func waitUntilFinished(_ operation: Operation) async {
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
        Thread.detachNewThread {
            operation.waitUntilFinished()
            continuation.resume()
        }
    }
}
