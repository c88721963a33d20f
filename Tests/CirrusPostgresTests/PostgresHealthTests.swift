import CirrusStore
import CirrusTestSupport
import Dispatch
import Testing

@testable import CirrusPostgres

/// `checkHealth()`, the readiness probe of a `cirrusd` on PostgreSQL: fine while the server
/// answers, `.unavailable` (within the lease timeout) while it is stopped, fine again once it
/// is back, on the same storage.
@Suite("PostgreSQL health")
struct PostgresHealthTests {
    @Test func theHealthCheckFollowsTheServer() async throws {
        let server = try TemporaryPostgres()
        defer { server.stop() }
        let storage = try await PostgresStorage(
            url: try PostgresURL(server.createDatabase()), maximumConnections: 2, leaseTimeout: .seconds(3))
        try await storage.checkHealth()

        try await Self.offloaded { try server.stopServer() }
        let error = await #expect(throws: StoreError.self) { try await storage.checkHealth() }
        #expect(error?.code == .unavailable, "\(String(describing: error))")

        try await Self.offloaded { try server.startServer() }
        try await eventually(timeout: .seconds(120), "healthy once the server is back", every: .milliseconds(100)) {
            (try? await storage.checkHealth()) != nil
        }
        await storage.close()
    }

    /// Runs a blocking server command (`pg_ctl`) off the cooperative threads.
    private static func offloaded(_ work: @escaping @Sendable () throws -> Void) async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            DispatchQueue.global().async { continuation.resume(with: Result { try work() }) }
        }
    }
}
