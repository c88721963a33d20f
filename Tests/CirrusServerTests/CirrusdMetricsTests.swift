import CirrusWire
import CirrusTestSupport
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// GETs `url`; returns the status and the body.
func httpGet(_ url: URL) async throws -> (status: Int, body: String) {
    var request = URLRequest(url: url)
    request.timeoutInterval = 60
    let (data, response) = try await loopbackURLSession.data(for: request)
    return ((response as? HTTPURLResponse)?.statusCode ?? 0, String(decoding: data, as: UTF8.self))
}

/// The value of the sample `name{labels}` (labels exactly as the scrape prints them), or nil.
func sample(_ scrape: String, _ name: String, _ labels: String = "") -> Double? {
    let key = labels.isEmpty ? name : "\(name){\(labels)}"
    for line in scrape.split(separator: "\n") where line.hasPrefix(key + " ") {
        return Double(line.dropFirst(key.count + 1))
    }
    return nil
}

@Suite("cirrusd --metrics-address, the real process", .serialized)
struct CirrusdMetricsTests {
    @Test func countersMatchTheTrafficAClientSaw() async throws {
        let server = try await CirrusdProcess.launch(arguments: ["--metrics-address", "127.0.0.1:0"])
        defer { server.stop() }
        let line = try server.nextOutputLine()
        #expect(line.hasPrefix("metrics on http://127.0.0.1:"), "\(line)")
        let metricsURL = try #require(URL(string: String(line.dropFirst("metrics on ".count))))
        let base = metricsURL.deletingLastPathComponent()

        let health = try await httpGet(base.appendingPathComponent("healthz"))
        #expect(health.status == 200)
        let ready = try await httpGet(base.appendingPathComponent("readyz"))
        #expect(ready.status == 200, "\(ready.body)")
        #expect(try await httpGet(base.appendingPathComponent("nothing")).status == 404)

        // Plain HTTP to the TLS port: a handshake that fails.
        _ = try? await httpGet(URL(string: "http://127.0.0.1:\(server.port)/")!)

        var client = try await OperationClient.connect(port: server.port, user: "alice")
        var eventsSeen = 0
        for batch in 0..<3 {
            let records = (0..<10).map { note("m\(batch)-\($0)", title: "metrics \(batch) \($0)") }
            let (saves, complete) = try await client.save(records)
            #expect(complete.error == nil)
            eventsSeen += saves.count
        }
        let (outcomes, complete) = try await client.fetch([recordID("m0-0"), recordID("missing")])
        #expect(complete.error?.code == .partialFailure)
        eventsSeen += outcomes.count

        let scrape = try await httpGet(metricsURL)
        #expect(scrape.status == 200)
        let text = scrape.body
        #expect(sample(text, "cirrus_streams_opened_total", #"kind="modify_records""#) == 3, "\(text)")
        #expect(sample(text, "cirrus_streams_opened_total", #"kind="fetch_records""#) == 1)
        #expect(sample(text, "cirrus_events_sent_total") == Double(eventsSeen))
        #expect(sample(text, "cirrus_errors_total", #"code="partialFailure",level="stream""#) == 1)
        #expect(sample(text, "cirrus_connections_open") == 1)
        #expect((sample(text, "cirrus_connections_accepted_total") ?? 0) >= 2)
        #expect((sample(text, "cirrus_tls_handshake_failures_total", #"reason="handshakeFailed""#) ?? 0) >= 1, "\(text)")
        #expect((sample(text, "cirrus_bytes_received_total") ?? 0) > 0)
        #expect((sample(text, "cirrus_bytes_sent_total") ?? 0) > 0)
        // Every save wrote in some commit; a commit may have carried several.
        let commits = sample(text, "cirrus_write_commits_total") ?? 0
        #expect(commits >= 1)
        #expect(sample(text, "cirrus_write_commit_jobs_count") == commits)
        #expect((sample(text, "cirrus_write_commit_records_sum") ?? 0) >= 30)
        #expect(sample(text, "cirrus_write_commit_seconds_count") == commits)
        // The embedded SQLite engine's writer reports the CPU time of each transaction.
        #expect(sample(text, "cirrus_write_commit_cpu_seconds_count") == commits)
        #expect((sample(text, "cirrus_write_commit_cpu_seconds_sum") ?? 0) > 0)
        #expect(sample(text, "cirrus_operation_seconds_count", #"kind="modify_records""#) == 3)
        #expect(sample(text, "cirrus_operation_seconds_count", #"kind="fetch_records""#) == 1)
        // The first maintenance pass runs at start.
        var maintenance = sample(text, "cirrus_maintenance_runs_total", #"result="ok""#) ?? 0
        let deadline = ContinuousClock.now + .seconds(60)
        while maintenance < 1, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(100))
            maintenance = sample(try await httpGet(metricsURL).body, "cirrus_maintenance_runs_total", #"result="ok""#) ?? 0
        }
        #expect(maintenance == 1)
        await client.client.close()
    }

    @Test func metricsAddressIsCheckedAndOffByDefault() async throws {
        let bad = try await runCirrusd(["--metrics-address", "nowhere"])
        #expect(bad.status != 0)
        #expect(bad.output.contains("metrics-address"), "\(bad.output)")
    }
}
