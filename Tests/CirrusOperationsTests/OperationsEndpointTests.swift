import CirrusServer
import CirrusStore
import Foundation
import Synchronization
import Testing

@testable import CirrusOperations

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Sends `method` to `url`; returns the status and the body.
private func request(_ url: URL, method: String = "GET") async throws -> (status: Int, body: String) {
    var request = URLRequest(url: url)
    request.httpMethod = method
    request.timeoutInterval = 60
    let (data, response) = try await URLSession.shared.data(for: request)
    return ((response as? HTTPURLResponse)?.statusCode ?? 0, String(decoding: data, as: UTF8.self))
}

@Suite("The metrics and health endpoint")
struct OperationsEndpointTests {
    @Test func readyzFollowsTheStorageAndMetricsShowTheRegistry() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let storage = try SQLiteStorage(directory: directory)
        let metrics = CirrusMetrics()
        metrics.observe(storage)
        let scrapes = ScrapeCounter()
        let endpoint = OperationsEndpoint(
            registry: metrics.registry,
            beforeScrape: {
                scrapes.add()
                metrics.server.sample(connectionsOpen: 7, longLivedRunning: 2, watchesOpen: 3)
            },
            readiness: {
                do {
                    try await storage.checkHealth()
                    return []
                } catch {
                    return ["storage: \(error)"]
                }
            })
        let address = try await endpoint.start(host: "127.0.0.1", port: 0)
        let port = try #require(address.port)
        let base = try #require(URL(string: "http://127.0.0.1:\(port)"))

        #expect(try await request(base.appendingPathComponent("readyz")).status == 200)
        let page = try await request(base.appendingPathComponent("metrics"))
        #expect(page.status == 200)
        #expect(page.body.contains("cirrus_connections_open 7.0"), "\(page.body)")
        #expect(page.body.contains("cirrus_long_lived_operations_running 2.0"))
        #expect(page.body.contains("cirrus_notification_watches_open 3.0"))
        #expect(scrapes.count == 1)
        #expect(try await request(base.appendingPathComponent("metrics"), method: "POST").status == 405)
        let head = try await request(base.appendingPathComponent("healthz"), method: "HEAD")
        #expect(head.status == 200)
        #expect(head.body.isEmpty)

        // The storage goes away: not ready, and the reason is given; the process is still up.
        try storage.close()
        let unready = try await request(base.appendingPathComponent("readyz"))
        #expect(unready.status == 503)
        #expect(unready.body.hasPrefix("storage: "), "\(unready.body)")
        #expect(try await request(base.appendingPathComponent("healthz")).status == 200)
        await endpoint.shutdown()
    }

    @Test func endpointAddressesParse() {
        #expect(EndpointAddress(parsing: "127.0.0.1:9464") == EndpointAddress(host: "127.0.0.1", port: 9464))
        #expect(EndpointAddress(parsing: "[::1]:0") == EndpointAddress(host: "::1", port: 0))
        #expect(EndpointAddress(parsing: "[::1]:0")?.description == "[::1]:0")
        #expect(EndpointAddress(parsing: "localhost:80")?.host == "localhost")
        for bad in ["", "9464", ":9464", "host:", "host:65536", "host:-1", "host:x", "[::1:80"] {
            #expect(EndpointAddress(parsing: bad) == nil, "\(bad)")
        }
    }
}

/// How many times `/metrics` was answered.
private final class ScrapeCounter: Sendable {
    private let value = Mutex(0)
    func add() { self.value.withLock { $0 += 1 } }
    var count: Int { self.value.withLock { $0 } }
}
