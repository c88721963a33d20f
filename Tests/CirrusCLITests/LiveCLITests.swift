import CirrusBench
import CirrusCLI
import CirrusKit
import CirrusModel
import CirrusTestSupport
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Every record of `zone`, through CirrusKit's change feed (what the server stored).
func storedRecords(
    _ server: CirrusdProcess, zone: String, container identifier: String = CKContainer.defaultContainerIdentifier
) async throws -> [CKRecord] {
    let configuration = CirrusClientConfiguration(
        host: "127.0.0.1", port: server.port, trustRootsPath: Paths.certificate("ca.pem"),
        certificateChainPath: Paths.certificate("alice.pem"), privateKeyPath: Paths.certificate("alice-key.pem"))
    let container = CKContainer(identifier: identifier, configuration: configuration)
    var records: [CKRecord] = []
    var token: CKServerChangeToken?
    while true {
        let changes = try await container.privateCloudDatabase.recordZoneChanges(
            inZoneWith: CKRecordZone.ID(zoneName: zone), since: token)
        records += try changes.modificationResultsByID.values.map { try $0.get().record }
        token = changes.changeToken
        if !changes.moreComing { break }
    }
    return records
}

@Suite("cirrus against a live cirrusd", .serialized)
struct LiveCLITests {
    @Test func benchCountsMatchWhatTheServerStored() async throws {
        let server = try CirrusdProcess()
        let run = try CLI.run(
            ["bench"] + CLI.connection(server) + [
                "--operations", "150", "--concurrency", "8", "--connections", "2", "--records-per-op", "3",
                "--zones", "2", "--json", "-",
            ])
        #expect(run.status == 0, "\(run.stderr)")
        let result = try JSONDecoder().decode(BenchResult.self, from: Data(run.stdout.utf8))
        #expect(result.counts.operations == 150)
        #expect(result.counts.failedOperations == 0)
        #expect(result.counts.recordsWritten == 450)
        #expect(result.latency.count == 150)
        #expect(result.latency.p50 > 0 && result.latency.p50 <= result.latency.p99 && result.latency.p99 <= result.latency.max)
        #expect(result.bytesOut > 450 * 100, "every record carries a 100-byte payload")
        #expect(result.bytesIn > 0)
        var stored = 0
        for zone in result.zoneNames {
            stored += try await storedRecords(server, zone: zone, container: "iCloud.cirrus.bench").filter { $0.recordID.recordName.hasPrefix(result.runID) }.count
        }
        #expect(stored == 450)
    }

    @Test func theServersMetricsScrapedAfterABenchRunMatchWhatTheBenchReported() async throws {
        let server = try CirrusdProcess(extraArguments: ["--metrics-address", "127.0.0.1:0"])
        let metricsURL = try #require(server.metricsURL)
        let run = try CLI.run(
            ["bench"] + CLI.connection(server) + [
                "--operations", "120", "--concurrency", "4", "--records-per-op", "5", "--json", "-",
            ])
        #expect(run.status == 0, "\(run.stderr)")
        let result = try JSONDecoder().decode(BenchResult.self, from: Data(run.stdout.utf8))
        #expect(result.counts.operations == 120)
        #expect(result.counts.failedOperations == 0)

        let (data, response) = try await loopbackURLSession.data(from: metricsURL)
        #expect((response as? HTTPURLResponse)?.statusCode == 200)
        let scrape = String(decoding: data, as: UTF8.self)
        func sample(_ name: String, _ labels: String? = nil) -> Double? {
            let key = labels.map { "\(name){\($0)}" } ?? name
            for line in scrape.split(separator: "\n") where line.hasPrefix(key + " ") {
                return Double(line.dropFirst(key.count + 1))
            }
            return nil
        }
        // Every measured save is one modify_records stream and one timed operation on the server.
        #expect(sample("cirrus_streams_opened_total", #"kind="modify_records""#) == Double(result.counts.operations), "\(scrape)")
        #expect(sample("cirrus_operation_seconds_count", #"kind="modify_records""#) == Double(result.counts.operations))
        #expect((sample("cirrus_write_commit_records_sum") ?? 0) >= Double(result.counts.recordsWritten))
        #expect(sample("cirrus_errors_total", #"code="partialFailure",level="stream""#) == nil)
        // What the bench's sockets moved, the server's moved too (the bench also made its zone).
        #expect((sample("cirrus_bytes_received_total") ?? 0) >= Double(result.bytesOut))
        #expect((sample("cirrus_bytes_sent_total") ?? 0) >= Double(result.bytesIn))
        // Without --server-metrics: the client's CPU only.
        let cpu = try #require(result.cpu)
        #expect(cpu.clientSeconds > 0)
        #expect(cpu.serverSeconds == nil && cpu.serverMetricsError == nil)
        // The server's CPU so far counts every thread: more than the writer's share of it.
        let serverCPU = try #require(sample("cirrus_process_cpu_seconds_total"), "\(scrape)")
        #expect(serverCPU > 0)
        #expect(serverCPU >= (sample("cirrus_write_commit_cpu_seconds_sum") ?? 0))
    }

    @Test func benchReportsTheServersCPUFromItsMetrics() throws {
        let server = try CirrusdProcess(extraArguments: ["--metrics-address", "127.0.0.1:0"])
        let metricsURL = try #require(server.metricsURL)
        let address = try #require(metricsURL.host).appending(":\(try #require(metricsURL.port))")
        let run = try CLI.run(
            ["bench"] + CLI.connection(server) + [
                "--operations", "200", "--concurrency", "4", "--records-per-op", "5", "--server-metrics", address,
                "--json", "-",
            ])
        #expect(run.status == 0, "\(run.stderr)")
        let result = try JSONDecoder().decode(BenchResult.self, from: Data(run.stdout.utf8))
        let cpu = try #require(result.cpu)
        #expect(cpu.serverMetricsError == nil)
        let serverSeconds = try #require(cpu.serverSeconds)
        #expect(serverSeconds > 0)
        #expect(cpu.serverMicrosecondsPerOperation == serverSeconds / 200 * 1e6)
        #expect(cpu.clientMicrosecondsPerOperation == cpu.clientSeconds / 200 * 1e6)
        // 1,000 records written in the phase (more items only if the server wrote something of
        // its own meanwhile), by one writer that spent part of the server's CPU.
        let writerSeconds = try #require(cpu.writerSeconds)
        #expect(writerSeconds > 0 && writerSeconds <= serverSeconds)
        let perItem = try #require(cpu.writerMicrosecondsPerItem)
        #expect(perItem > 0 && perItem <= writerSeconds / 1_000 * 1e6 * (1 + 1e-9))
        #expect((cpu.itemsPerCommit ?? 0) >= 5)
        let table = try CLI.run(
            ["bench"] + CLI.connection(server) + ["--operations", "20", "--server-metrics", address])
        #expect(table.status == 0, "\(table.stderr)")
        #expect(table.stdout.contains("cpu per operation: client "), "\(table.stdout)")
        #expect(table.stdout.contains(", server "), "\(table.stdout)")
        #expect(table.stdout.contains("items per commit)"), "\(table.stdout)")

        // Not a metrics endpoint (the server's TLS port), and nobody listening: the run does not
        // start, with one line saying why.
        for wrong in ["127.0.0.1:\(server.port)", "127.0.0.1:1"] {
            let refused = try CLI.run(["bench"] + CLI.connection(server) + ["--operations", "5", "--server-metrics", wrong])
            #expect(refused.status == 1, "\(wrong): \(refused.stderr)")
            #expect(refused.stderr.hasPrefix("cirrus: error: --server-metrics: "), "\(wrong): \(refused.stderr)")
            #expect(refused.stderr.split(separator: "\n").count == 1, "\(wrong): \(refused.stderr)")
            #expect(!refused.stdout.contains("ops/s"))
        }
    }

    @Test func benchReadsOpenLoopAndHandshakesReportTheirCounts() throws {
        let server = try CirrusdProcess()
        let mixed = try CLI.run(
            ["bench"] + CLI.connection(server) + [
                "--op", "mixed", "--mix", "fetch=2,query=1,changes=1", "--operations", "80", "--rate", "400",
                "--concurrency", "4", "--preload", "50", "--records-per-op", "5", "--json", "-",
            ])
        #expect(mixed.status == 0, "\(mixed.stderr)")
        let result = try JSONDecoder().decode(BenchResult.self, from: Data(mixed.stdout.utf8))
        #expect(result.counts.operations == 80)
        #expect(result.counts.recordsWritten == 0)
        let kinds = result.byKind.values.reduce(0) { $0 + $1.counts.operations }
        #expect(kinds == 80)
        #expect(result.byKind["fetch"].map { $0.counts.records == $0.counts.operations * 5 } == true)
        let handshakes = try CLI.run(["bench"] + CLI.connection(server) + ["--handshakes", "--operations", "20", "--concurrency", "2"])
        #expect(handshakes.status == 0, "\(handshakes.stderr)")
        #expect(handshakes.stdout.contains("handshakes"))
        #expect(handshakes.stdout.contains("— 20 in"))
        #expect(handshakes.stdout.contains("errors: none"))
    }

    @Test func benchPingsAndStreamsCountWhatTheyReceived() async throws {
        let server = try CirrusdProcess()
        let ping = try CLI.run(["bench"] + CLI.connection(server) + ["--op", "ping", "--operations", "200", "--concurrency", "4", "--json", "-"])
        #expect(ping.status == 0, "\(ping.stderr)")
        let pings = try JSONDecoder().decode(BenchResult.self, from: Data(ping.stdout.utf8))
        #expect(pings.counts.operations == 200)
        #expect(pings.counts.failedOperations == 0)
        #expect(pings.counts.records == 0)
        #expect(pings.latency.count == 200)
        #expect(pings.bytesIn > 0 && pings.bytesOut > 0, "every ping and pong crosses the socket")
        #expect(pings.preloadedRecordsPerZone == 0)
        #expect(
            pings.clientAllocator?.hasPrefix("mimalloc ") == true,
            "cirrus allocates with mimalloc: \(String(describing: pings.clientAllocator))")

        let stream = try CLI.run(
            ["bench"] + CLI.connection(server) + ["--op", "stream", "--events", "1000", "--operations", "3", "--json", "-"])
        #expect(stream.status == 0, "\(stream.stderr)")
        let streamed = try JSONDecoder().decode(BenchResult.self, from: Data(stream.stdout.utf8))
        #expect(streamed.counts.operations == 3)
        #expect(streamed.counts.records == 3_000, "each operation streams every record of the zone, once")
        #expect(streamed.settings.eventsPerStream == 1_000)
        #expect(streamed.bytesIn > 3_000 * 100, "every record carries a 100-byte payload")
        let zone = try #require(streamed.zoneNames.first { $0.hasPrefix("bench-stream-") })
        // The run's stream zone is deleted afterwards.
        let configuration = CirrusClientConfiguration(
            host: "127.0.0.1", port: server.port, trustRootsPath: Paths.certificate("ca.pem"),
            certificateChainPath: Paths.certificate("alice.pem"), privateKeyPath: Paths.certificate("alice-key.pem"))
        let zones = try await CKContainer(identifier: "iCloud.cirrus.bench", configuration: configuration)
            .privateCloudDatabase.allRecordZones()
        #expect(!zones.map(\.zoneID.zoneName).contains(zone))
        #expect(zones.map(\.zoneID.zoneName).contains("bench-0"))

        let table = try CLI.run(["bench"] + CLI.connection(server) + ["--op", "stream", "--events", "50", "--operations", "2"])
        #expect(table.status == 0, "\(table.stderr)")
        #expect(table.stdout.contains("stream ×50 events, 1 in flight"), "\(table.stdout)")
    }

    @Test func importKilledMidwayThenResumedStoresEveryRowOnce() async throws {
        let server = try CirrusdProcess()
        let directory = try Paths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let file = directory + "/rows.jsonl"
        let count = 4_000
        try (1...count).map { #"{"n": \#($0), "label": "row \#($0)", "score": \#(Double($0) / 2)}"# }
            .joined(separator: "\n").write(toFile: file, atomically: true, encoding: .utf8)
        let arguments = ["import", file, "--record-type", "Row", "--zone", "Imported", "--batch-size", "50", "--parallel", "2"]
            + CLI.connection(server)
        let first = try CLI.start(arguments)
        // Kill it once some batches are done and others are not.
        let statePath = file + ".cirrus-import"
        var killedMidway = false
        for _ in 0..<400 {
            if let state = try? ImportState.load(from: statePath) {
                let done = state.doneCount
                if done >= 5 {
                    first.kill()
                    killedMidway = done < count / 50
                    break
                }
            }
            try await Task.sleep(for: .milliseconds(10))
        }
        let killed = first.wait()
        #expect(killed.killed, "the client was killed before it finished: \(killed.stdout)")
        #expect(killedMidway)
        let state = try ImportState.load(from: statePath)
        let resumed = try CLI.run(["import", file, "--resume"] + CLI.connection(server))
        #expect(resumed.status == 0, "\(resumed.stderr)")
        #expect(resumed.stdout.contains("imported 4000 of 4000 rows"), "\(resumed.stdout)")
        #expect(!FileManager.default.fileExists(atPath: statePath))
        let records = try await storedRecords(server, zone: "Imported")
        #expect(records.count == count)
        let names = Set(records.map(\.recordID.recordName))
        #expect(names == Set((1...count).map { "\(state.importID)-\($0)" }))
        #expect(records.allSatisfy { record in
            let n = record["n"] as? Int ?? -1
            return record["label"] as? String == "row \(n)" && record["score"] as? Double == Double(n) / 2
                && record.recordID.recordName == "\(state.importID)-\(n)"
        })
        // Resuming a finished import: nothing to resume.
        let again = try CLI.run(["import", file, "--resume"] + CLI.connection(server))
        #expect(again.status == 5)
    }

    @Test func importAndExportReportProgressAsJSONLines() throws {
        let server = try CirrusdProcess()
        let directory = try Paths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let file = directory + "/rows.jsonl"
        try (1...300).map { #"{"n": \#($0)}"# }.joined(separator: "\n").write(toFile: file, atomically: true, encoding: .utf8)
        let imported = try CLI.run(
            ["import", file, "--record-type", "Row", "--zone", "P", "--batch-size", "50", "--progress", "json"]
                + CLI.connection(server))
        #expect(imported.status == 0, "\(imported.stderr)")
        let lines = imported.stderr.split(separator: "\n").map(String.init)
        let objects = lines.compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        #expect(objects.count == lines.count, "\(imported.stderr)")
        #expect(objects.first?["event"] as? String == "progress")
        #expect(objects.first?["total"] as? Int == 300)
        #expect(objects.last?["event"] as? String == "done")
        #expect(objects.last?["done"] as? Int == 300)

        let exported = try CLI.run(["export", "--zone", "P", "--progress", "json"] + CLI.connection(server))
        #expect(exported.status == 0, "\(exported.stderr)")
        #expect(exported.stdout.split(separator: "\n").count == 300)
        let last = exported.stderr.split(separator: "\n").last.map(String.init) ?? ""
        let done = try JSONSerialization.jsonObject(with: Data(last.utf8)) as? [String: Any]
        #expect(done?["event"] as? String == "done", "\(exported.stderr)")
        #expect(done?["unit"] as? String == "records")
        #expect(done?["done"] as? Int == 300)
        #expect(done?["total"] == nil)

        // Not a terminal: the default shows nothing.
        let quiet = try CLI.run(["export", "--zone", "P"] + CLI.connection(server))
        #expect(quiet.stderr.isEmpty, "\(quiet.stderr)")
        let bad = try CLI.run(["export", "--zone", "P", "--progress", "loud"] + CLI.connection(server))
        #expect(bad.status != 0)
        #expect(bad.stderr.contains("progress"), "\(bad.stderr)")
    }

    @Test func exportThenImportRoundTrips() async throws {
        let server = try CirrusdProcess()
        let directory = try Paths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let csv = directory + "/people.csv"
        try "id,name,age,height,born,active,tags,home\n"
            .appending("p1,Ann,31,1.70,1993-04-01T00:00:00Z,true,a;b,\"48.85,2.35\"\n")
            .appending("p2,\"Bob, Jr.\",42,1.82,1982-12-24T00:00:00Z,false,c,\"40.7,-74.0\"\n")
            .write(toFile: csv, atomically: true, encoding: .utf8)
        let imported = try CLI.run(
            ["import", csv, "--record-type", "Person", "--zone", "A", "--id-field", "id", "--field", "tags:[string]",
             "--field", "home:location"] + CLI.connection(server))
        #expect(imported.status == 0, "\(imported.stderr)")
        let exported = directory + "/a.jsonl"
        let export = try CLI.run(["export", "--zone", "A", "--output", exported] + CLI.connection(server))
        #expect(export.status == 0, "\(export.stderr)")
        let reimport = try CLI.run(["import", exported, "--zone", "B"] + CLI.connection(server))
        #expect(reimport.status == 0, "\(reimport.stderr)")
        let exportB = try CLI.run(["export", "--zone", "B"] + CLI.connection(server))
        let linesA = try String(contentsOfFile: exported, encoding: .utf8).split(separator: "\n").sorted()
        let linesB = exportB.stdout.split(separator: "\n").sorted()
        #expect(linesA.count == 2)
        #expect(linesA == linesB)
        let records = try await storedRecords(server, zone: "B")
        let ann = try #require(records.first { $0.recordID.recordName == "p1" })
        #expect(ann["age"] as? Int == 31)
        #expect(ann["height"] as? Double == 1.70)
        #expect(ann["born"] as? Date == Date(timeIntervalSince1970: 733_622_400))
        #expect(ann["active"] as? Bool == true)
        #expect(ann["tags"] as? [String] == ["a", "b"])
        #expect((ann["home"] as? CKLocation)?.longitude == 2.35)
    }

    /// An asset larger than a frame goes in by `import` (streamed) and out by `export --assets`,
    /// whose lines name the files written beside them.
    @Test func importAndExportCarryAssetsAsFiles() async throws {
        let server = try CirrusdProcess()
        let directory = try Paths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let bytes = Data((0..<(6 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ $0 >> 9) })
        try bytes.write(to: URL(fileURLWithPath: directory + "/movie.bin"))
        let file = directory + "/rows.jsonl"
        try "{\"$recordName\": \"m1\", \"film\": {\"$asset\": \"movie.bin\"}}\n"
            .write(toFile: file, atomically: true, encoding: .utf8)
        let imported = try CLI.run(["import", file, "--record-type", "Film", "--zone", "F"] + CLI.connection(server), in: directory)
        #expect(imported.status == 0, "\(imported.stderr)")
        let out = directory + "/out"
        let exported = try CLI.run(["export", "--zone", "F", "--assets", out] + CLI.connection(server))
        #expect(exported.status == 0, "\(exported.stderr)")
        let files = try FileManager.default.contentsOfDirectory(atPath: out)
        #expect(files.count == 1)
        let name = try #require(files.first)
        #expect(exported.stdout.contains(out + "/" + name), "\(exported.stdout)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: out + "/" + name)) == bytes)
    }

    @Test func badRowsAreReportedWithTheirLineUnderBothModes() async throws {
        let server = try CirrusdProcess()
        let directory = try Paths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let file = directory + "/bad.jsonl"
        try "{\"n\": 1}\n{\"n\": 2}\n{\"n\": \n{\"n\": \"four\"}\n{\"n\": 5}\n".write(toFile: file, atomically: true, encoding: .utf8)
        let base = ["import", file, "--record-type", "T", "--zone", "Z", "--field", "n:int"] + CLI.connection(server)
        let fail = try CLI.run(base)
        #expect(fail.status == 4)
        #expect(fail.stderr.split(separator: "\n").count == 1)
        #expect(fail.stderr.contains("line 3: malformed JSON"), "\(fail.stderr)")
        #expect(fail.stderr.contains("1 more bad rows"))
        #expect(try await storedRecords(server, zone: "_defaultZone").isEmpty)
        let skip = try CLI.run(base + ["--on-error", "skip"])
        #expect(skip.status == 1)
        #expect(skip.stderr.contains("skipped line 3: malformed JSON"), "\(skip.stderr)")
        #expect(skip.stderr.contains("skipped line 4: field 'n': \"four\" is not an int"), "\(skip.stderr)")
        #expect(skip.stdout.contains("imported 3 of 3 rows"))
        #expect(try await storedRecords(server, zone: "Z").count == 3)
        // Malformed CSV too.
        let csv = directory + "/bad.csv"
        try "a,b\n1,2\n\"open,3\n".write(toFile: csv, atomically: true, encoding: .utf8)
        let csvRun = try CLI.run(["import", csv, "--record-type", "T"] + CLI.connection(server))
        #expect(csvRun.status == 4)
        #expect(csvRun.stderr.contains("line 3: malformed CSV: a quoted cell is not closed"), "\(csvRun.stderr)")
    }

    @Test func usageAndConnectionErrorsHaveTheirExitCodeAndOneLine() throws {
        let server = try CirrusdProcess()
        let cases: [([String], Int32, String)] = [
            (["bench", "--bogus"], 2, "Unknown option '--bogus'"),
            (["bench", "--op", "frob"], 2, "--op 'frob'"),
            (["bench", "--duration", "ten"], 2, "--duration 'ten'"),
            (["bench", "--records-per-op", "401"], 2, "between 1 and 400"),
            (["bench", "--events", "10"], 2, "--events goes with --op stream"),
            (["bench", "--op", "stream", "--events", "0"], 2, "--events must be between 1 and 1,000,000"),
            (["bench", "--server-metrics", "9464"], 2, "--server-metrics '9464': expected HOST:PORT"),
            (["bench", "--server-metrics", "127.0.0.1:70000"], 2, "--server-metrics '127.0.0.1:70000': expected HOST:PORT"),
            (["bench", "--handshakes", "--server-metrics", "127.0.0.1:1"], 2, "--server-metrics goes with operations"),
            (["import", "/nonexistent.jsonl", "--record-type", "T"], 2, "/nonexistent.jsonl: no such file"),
            (["import", Paths.root + "/README.md"], 2, "cannot tell the format"),
            (["import", Paths.root + "/Package.swift", "--format", "csv", "--field", "x:money"], 2, "unknown type 'money'"),
            (["zones", "list", "--ca", "/nonexistent/ca.pem"], 2, "--ca /nonexistent/ca.pem: no such file"),
            (["zones", "list", "--cert", Paths.certificate("alice.pem")], 2, "--cert and --key go together"),
            (["zones", "list", "--server", "nohost"], 2, "expected host:port"),
            (["zones", "list", "--server", "127.0.0.1:\(server.port),"], 2, "--server '': expected host:port"),
            (["records"], 2, ""),
        ]
        for (arguments, status, message) in cases {
            let run = try CLI.run(arguments + (arguments.contains("--server") ? [] : ["--server", "127.0.0.1:\(server.port)"]))
            #expect(run.status == status, "\(arguments): \(run.stderr)")
            if !message.isEmpty {
                #expect(run.stderr.contains(message), "\(arguments): \(run.stderr)")
                #expect(run.stderr.split(separator: "\n").count == 1, "\(arguments): \(run.stderr)")
            }
        }
        // Nobody listens on this port.
        let unreachable = try CLI.run(["zones", "list", "--server", "127.0.0.1:1"] + Array(CLI.connection(server).dropFirst(2)))
        #expect(unreachable.status == 3)
        #expect(unreachable.stderr.hasPrefix("cirrus: error: list zones: network failure"), "\(unreachable.stderr)")
        #expect(unreachable.stderr.split(separator: "\n").count == 1)
        // The same unreachable server first in a list: the next one answers.
        let failover = try CLI.run(
            ["zones", "list", "--server", "127.0.0.1:1,127.0.0.1:\(server.port)"] + Array(CLI.connection(server).dropFirst(2)))
        #expect(failover.status == 0, "\(failover.stderr)")
        // A server certificate from a CA we do not trust.
        let untrusted = try CLI.run([
            "zones", "list", "--server", "127.0.0.1:\(server.port)", "--ca", Paths.certificate("other-ca.pem"),
            "--cert", Paths.certificate("alice.pem"), "--key", Paths.certificate("alice-key.pem"),
        ])
        #expect(untrusted.status == 3, "\(untrusted.stderr)")
        let help = try CLI.run(["import", "--help"])
        #expect(help.status == 0)
        #expect(help.stdout.contains("--resume"))
    }

    @Test func recordsZonesAndOpsWorkEndToEnd() async throws {
        let server = try CirrusdProcess()
        let connection = CLI.connection(server)
        #expect(try CLI.run(["zones", "create", "Z1", "Z2"] + connection).stdout == "Z1\nZ2\n")
        let list = try CLI.run(["zones", "list"] + connection)
        #expect(list.stdout.split(separator: "\n").sorted() == ["Z1", "Z2", "_defaultZone"])
        let directory = try Paths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let file = directory + "/r.jsonl"
        try (1...30).map { #"{"$recordName": "r\#($0)", "n": \#($0)}"# }.joined(separator: "\n")
            .write(toFile: file, atomically: true, encoding: .utf8)
        #expect(try CLI.run(["import", file, "--record-type", "N", "--zone", "Z1"] + connection).status == 0)

        let get = try CLI.run(["records", "get", "r3", "missing", "--zone", "Z1"] + connection)
        #expect(get.status == 5)
        #expect(get.stdout.contains(#""$recordName":"r3""#) && get.stdout.contains(#""n":3"#))
        #expect(get.stderr.contains("record missing: unknown item"))
        let query = try CLI.run(
            ["records", "query", "--record-type", "N", "--zone", "Z1", "--predicate", "n > 25", "--sort", "n:desc"] + connection)
        #expect(query.status == 0, "\(query.stderr)")
        #expect(query.stdout.split(separator: "\n").map { try? JSONParser.parse($0)["n"] } == [30, 29, 28, 27, 26].map { .integer($0) })
        let limited = try CLI.run(["records", "query", "--record-type", "N", "--zone", "Z1", "--limit", "7"] + connection)
        #expect(limited.stdout.split(separator: "\n").count == 7)
        let badPredicate = try CLI.run(["records", "query", "--record-type", "N", "--predicate", "n >"] + connection)
        #expect(badPredicate.status == 2)
        let delete = try CLI.run(["records", "delete", "r1", "r2", "--zone", "Z1"] + connection)
        #expect(delete.stdout == "r1\nr2\n")
        #expect(try await storedRecords(server, zone: "Z1").count == 28)

        let changes = try CLI.run(["changes", "--zone", "Z1"] + connection)
        let lines = changes.stdout.split(separator: "\n").map { try? JSONParser.parse($0) }
        #expect(lines.filter { $0?["$change"] == .string("changed") }.count == 28)
        guard case .string(let token)?? = lines.last.map({ $0?["$token"] }) else {
            Issue.record("no token line: \(changes.stdout)")
            return
        }
        _ = try CLI.run(["records", "delete", "r3", "--zone", "Z1"] + connection)
        let since = try CLI.run(["changes", "--zone", "Z1", "--since", token] + connection)
        let sinceLines = since.stdout.split(separator: "\n")
        #expect(sinceLines.count == 2)
        #expect(sinceLines.first?.contains(#""$change":"deleted","$recordName":"r3""#) == true)
        let missingZone = try CLI.run(["changes", "--zone", "Nope"] + connection)
        #expect(missingZone.status == 5, "\(missingZone.stderr)")

        #expect(try CLI.run(["zones", "delete", "Z2"] + connection).stdout == "Z2\n")
        #expect(try CLI.run(["ops", "list"] + connection).stdout.isEmpty)
        let unknown = try CLI.run(["ops", "show", "no-such-operation"] + connection)
        #expect(unknown.status == 5)
        #expect(unknown.stderr.contains("unknown item"))
    }

    @Test func watchPrintsPushedNotificationsAndContinuesFromItsLastToken() async throws {
        let server = try CirrusdProcess()
        let connection = CLI.connection(server)
        let watch = try CLI.start(["watch", "--subscribe", "--count", "2"] + connection)
        // The first line is the starting position: anything saved after it is reported.
        let clock = ContinuousClock()
        let deadline = clock.now + .seconds(30)
        while !watch.outputSoFar.contains("\n") {
            guard clock.now < deadline else {
                watch.kill()
                Issue.record("no starting token: \(watch.wait().stderr)")
                return
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(try CLI.run(["zones", "create", "W"] + connection).status == 0)
        let directory = try Paths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let file = directory + "/w.jsonl"
        try #"{"$recordName": "w1", "n": 1}"#.write(toFile: file, atomically: true, encoding: .utf8)
        #expect(try CLI.run(["import", file, "--record-type", "N", "--zone", "W"] + connection).status == 0)
        let run = watch.wait()
        #expect(run.status == 0, "\(run.stderr)")
        let lines = run.stdout.split(separator: "\n").map(String.init)
        #expect(lines.count == 3)
        #expect(lines.first?.hasPrefix(#"{"$token":""#) == true)
        // The zone created, then the record saved: two database notifications of cirrus-watch.
        #expect(lines.dropFirst().allSatisfy { $0.contains(#""$type":"database""#) && $0.contains(#""$subscriptionID":"cirrus-watch""#) })

        // From the first notification's token, a later run gets the second one again, and only it.
        let second = try #require(lines[1].range(of: #""$token":""#).map { lines[1][$0.upperBound...].prefix { $0 != "\"" } })
        let again = try CLI.run(["watch", "--since", String(second), "--count", "1"] + connection)
        #expect(again.status == 0, "\(again.stderr)")
        let againLines = again.stdout.split(separator: "\n").map(String.init)
        #expect(againLines.count == 2)
        #expect(againLines.last == lines[2])

        let bad = try CLI.run(["watch", "--since", "not base64!"] + connection)
        #expect(bad.status == 2)
        let forged = try CLI.run(["watch", "--since", "AAAA"] + connection)
        #expect(forged.status == 1)
        #expect(forged.stderr.split(separator: "\n").count == 1)
        #expect(forged.stderr.contains("invalidArguments") || forged.stderr.contains("invalid"), "\(forged.stderr)")
        #expect(try CLI.run(["watch", "--scope", "everywhere"] + connection).status == 2)
    }
}
