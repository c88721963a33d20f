import CirrusServer
import CirrusStore
import CirrusWire
import Dispatch
import CirrusTestSupport
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
    let (data, response) = try await loopbackURLSession.data(for: request)
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
        // The process's CPU time, brought up to date at each scrape: it never goes back.
        func processCPU(_ body: String) -> Double? {
            body.split(separator: "\n").first { $0.hasPrefix("cirrus_process_cpu_seconds_total ") }
                .flatMap { Double($0.split(separator: " ")[1]) }
        }
        let firstCPU = try #require(processCPU(page.body), "\(page.body)")
        #expect(firstCPU > 0)
        var spin = 0.0
        for index in 0..<2_000_000 { spin += Double(index).squareRoot() }
        #expect(spin > 0)
        let secondCPU = try #require(processCPU(try await request(base.appendingPathComponent("metrics")).body))
        #expect(secondCPU > firstCPU)
        #expect(secondCPU <= ServerMetrics.processCPUSeconds())
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

@Suite("Online backups: POST /backup on the operations endpoint")
struct OnlineBackupEndpointTests {
    private static func endpoint(backup: OnlineBackup?) async throws -> (OperationsEndpoint, URL) {
        let endpoint = OperationsEndpoint(registry: CirrusMetrics().registry, readiness: { [] }, backup: backup)
        let address = try await endpoint.start(host: "127.0.0.1", port: 0)
        let port = try #require(address.port)
        let url = try #require(URL(string: "http://127.0.0.1:\(port)/backup"))
        return (endpoint, url)
    }

    @Test func aBackupIsWrittenIntoTheBackupDirectoryAndRestores() async throws {
        let root = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let storage = try SQLiteStorage(directory: root + "/data")
        _ = try ServerSecret.loadOrCreate(inDirectory: root + "/data")
        let key = DatabaseKey.private(container: "iCloud.com.example.tests", user: "_alice")
        let zone = Wire.RecordZoneID(zoneName: "_defaultZone", ownerName: key.owner)
        let records = (0..<25).map { Wire.Record(recordID: Wire.RecordID(recordName: "r\($0)", zoneID: zone), recordType: "Note") }
        _ = try await storage.modifyRecords(RecordModification(saving: records), in: key, by: "_alice")

        let backups = try OnlineBackup(dataDirectory: root + "/data", backupDirectory: root + "/backups")
        let (endpoint, url) = try await Self.endpoint(backup: backups)
        let first = try await request(url, method: "POST")
        let second = try await request(url, method: "POST")
        #expect(try await request(url).status == 405)
        await endpoint.shutdown()
        try storage.close()

        #expect(first.status == 200, "\(first.body)")
        #expect(second.status == 200, "\(second.body)")
        let answer = try #require(
            try JSONSerialization.jsonObject(with: Data(first.body.utf8)) as? [String: Any], "\(first.body)")
        let file = try #require(answer["file"] as? String)
        #expect(file.hasPrefix(root + "/backups/cirrus-") && file.hasSuffix(".backup"))
        #expect((answer["bytes"] as? Int ?? 0) > 0)
        #expect(answer["includesServerSecret"] as? Bool == true)
        #expect(try FileManager.default.contentsOfDirectory(atPath: root + "/backups").count == 2, "a new file each time")

        _ = try DataDirectoryBackup.restore(from: file, into: root + "/restored")
        let restored = try SQLiteStorage(directory: root + "/restored")
        defer { try? restored.close() }
        let fetched = try await restored.fetchRecords(records.compactMap(\.recordID), desiredKeys: nil, in: key)
        #expect(fetched.compactMap(\.value).count == 25)
    }

    @Test func aSecondBackupWhileOneRunsIsRefusedWith409() async throws {
        let root = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let storage = try SQLiteStorage(directory: root + "/data")
        defer { try? storage.close() }
        let gate = DispatchSemaphore(value: 0)
        let started = DispatchSemaphore(value: 0)
        let backups = try OnlineBackup(
            dataDirectory: root + "/data", backupDirectory: root + "/backups",
            beforeCopy: {
                started.signal()
                gate.wait()
            })
        let (endpoint, url) = try await Self.endpoint(backup: backups)
        let first = Task { try await request(url, method: "POST") }
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                started.wait()
                continuation.resume()
            }
        }
        let refused = try await request(url, method: "POST")
        gate.signal()
        let done = try await first.value
        await endpoint.shutdown()
        #expect(refused.status == 409)
        #expect(refused.body.contains("already running"), "\(refused.body)")
        #expect(done.status == 200, "\(done.body)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: root + "/backups").count == 1)
    }

    @Test func withoutABackupDirectoryThePathIsOffAndSaysHowToTurnItOn() async throws {
        let (endpoint, url) = try await Self.endpoint(backup: nil)
        let answer = try await request(url, method: "POST")
        await endpoint.shutdown()
        #expect(answer.status == 404)
        #expect(answer.body.contains("--backup-dir"), "\(answer.body)")
    }

    @Test func aFailedBackupLeavesNothingAndSaysWhy() async throws {
        let root = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: root) }
        // No storage in the data directory.
        let backups = try OnlineBackup(dataDirectory: root + "/nothing", backupDirectory: root + "/backups")
        let (endpoint, url) = try await Self.endpoint(backup: backups)
        let answer = try await request(url, method: "POST")
        await endpoint.shutdown()
        #expect(answer.status == 500)
        #expect(answer.body.contains("holds no Cirrus storage"), "\(answer.body)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: root + "/backups").isEmpty)
    }

    @Test func aBackupDirectoryThatCannotBeMadeIsRefused() throws {
        let root = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: root) }
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        _ = FileManager.default.createFile(atPath: root + "/file", contents: Data())
        #expect(throws: DataDirectoryBackup.Failure.self) {
            try OnlineBackup(dataDirectory: root, backupDirectory: root + "/file/backups")
        }
    }
}
