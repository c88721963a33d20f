import ArgumentParser
import CMimalloc
import CirrusBench
import CirrusCLI
import CirrusModel
import Foundation

struct Bench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Load-test a server over TLS with CirrusKit operations.",
        discussion: """
            Closed loop by default (--concurrency workers, each starts its next operation when the \
            last ends). With --rate, open loop: operations start on a fixed schedule, at most \
            --concurrency in flight, and latency runs from each one's intended start, so a slow \
            server is not hidden (no coordinated omission). Operations that start during --warmup \
            are not counted. Records are written to zones bench-0 … of the private database; \
            reads (fetch, query, changes) use --preload records written to each zone first. \
            --op ping measures the transport alone (one Ping/Pong round trip per operation); \
            --op stream fetches every change of a zone of --events records in one operation \
            (one operation streaming that many events; the zone is the run's own and is deleted \
            afterwards).

            Prints ops/s, records/s, bytes/s in and out (TLS included), latency p50/p90/p99/p99.9/max \
            (HdrHistogram), the CPU time per operation of this process (and of the server with \
            --server-metrics) and errors by CKError code; --json writes the same. Exit 1 when any \
            error was counted.
            """
    )

    @OptionGroup var connection: ConnectionOptions

    @Option(help: "Connections (one CKContainer each).") var connections = 1
    @Option(help: "Operations in flight in total.") var concurrency = 1
    @Option(help: "How long to measure, e.g. 30s, 2m (default 10s unless --operations).") var duration: String?
    @Option(help: "Measure exactly this many operations instead of a duration.") var operations: Int?
    @Option(help: "Load before measuring, not counted, e.g. 5s.") var warmup = "0s"
    @Option(help: "modify, fetch, query, changes, ping, stream, or mixed (see --mix).") var op = "modify"
    @Option(help: "Weighted mix for --op mixed, e.g. modify=20,fetch=70,query=10.") var mix: String?
    @Option(name: .customLong("records-per-op"), help: "Records per operation (1…400).") var recordsPerOp = 1
    @Option(name: .customLong("payload-bytes"), help: "Bytes of each written record's payload field.") var payloadBytes = 100
    @Option(help: "Zones to spread the load over.") var zones = 1
    @Option(help: "Records written to each zone before reads.") var preload = 1_000
    @Option(help: "With --op stream: events (records) each operation streams (default 10000).") var events: Int?
    @Option(name: .customLong("asset-bytes"), help: "With --op upload or download: bytes of the asset file (default 1048576).")
    var assetBytes: Int?
    @Option(
        name: .customLong("server-pid"),
        help: "Sample this local server process's resident memory during the run and report its growth (Linux).")
    var serverPID: Int32?
    @Option(
        name: .customLong("server-metrics"),
        help: "The server's --metrics-address (HOST:PORT): read its /metrics before and after the measured phase and report the server's CPU per operation.")
    var serverMetrics: String?
    @Option(help: "Seed of every random choice.") var seed: UInt64 = 1
    @Option(help: "Open-loop target rate in operations per second (closed loop when absent).") var rate: Double?
    @Flag(help: "Measure new connections (TCP + TLS 1.3 + Hello) per second instead of operations.") var handshakes = false
    @Flag(help: "With --handshakes: make every handshake a full one instead of resuming the last TLS session.")
    var noResume = false
    @Option(help: "Also write the results as JSON to this file ('-' for stdout).") var json: String?
    @Flag(help: "With several --server addresses: start connection i at the i-th (the others as its fail-over order) instead of all at the first.")
    var spread = false

    func run() async throws {
        var configuration = BenchConfiguration(client: try self.connection.clientConfiguration())
        configuration.containerIdentifier = self.connection.container ?? configuration.containerIdentifier
        configuration.connections = self.connections
        configuration.concurrency = self.concurrency
        if let operations = self.operations {
            guard self.duration == nil else { throw CLIError.usage("--duration and --operations exclude each other") }
            configuration.stop = .operations(operations)
        } else {
            let text = self.duration ?? "10s"
            guard let seconds = BenchDuration.seconds(parsing: text) else {
                throw CLIError.usage("--duration '\(text)': expected a duration such as 30s, 500ms, 2m")
            }
            configuration.stop = .duration(seconds)
        }
        guard let warmup = BenchDuration.seconds(parsing: self.warmup) else {
            throw CLIError.usage("--warmup '\(self.warmup)': expected a duration such as 5s")
        }
        configuration.warmup = warmup
        do {
            if let mix = self.mix {
                guard self.op == "mixed" || self.op == "modify" else {
                    throw CLIError.usage("--mix goes with --op mixed, not --op \(self.op)")
                }
                configuration.workload = try BenchMix(parsing: mix)
            } else if self.op == "mixed" {
                configuration.workload = try BenchMix(parsing: "modify=20,fetch=70,query=10")
            } else {
                guard let kind = BenchOperationKind(rawValue: self.op) else {
                    throw CLIError.usage(
                        "--op '\(self.op)': one of modify, fetch, query, changes, ping, stream, upload, download, mixed")
                }
                configuration.workload = BenchMix(single: kind)
            }
        } catch let error as BenchError {
            throw CLIError.usage(error.message)
        }
        configuration.recordsPerOperation = self.recordsPerOp
        configuration.payloadBytes = self.payloadBytes
        configuration.zones = self.zones
        configuration.preloadRecordsPerZone = self.preload
        if let events = self.events {
            guard configuration.workload.streams else {
                throw CLIError.usage("--events goes with --op stream (or a --mix with stream)")
            }
            configuration.eventsPerStream = events
        }
        if let assetBytes = self.assetBytes {
            guard configuration.workload.movesAssets else {
                throw CLIError.usage("--asset-bytes goes with --op upload or --op download")
            }
            configuration.assetBytes = assetBytes
        }
        configuration.seed = self.seed
        configuration.rate = self.rate
        configuration.handshakes = self.handshakes
        configuration.spreadOverServers = self.spread
        if let serverMetrics = self.serverMetrics {
            guard let endpoint = BenchMetricsEndpoint(parsing: serverMetrics) else {
                throw CLIError.usage("--server-metrics '\(serverMetrics)': expected HOST:PORT, e.g. 127.0.0.1:9464")
            }
            guard !self.handshakes else { throw CLIError.usage("--server-metrics goes with operations, not --handshakes") }
            configuration.serverMetrics = endpoint
        }
        configuration.client.resumesTLSSessions = !self.noResume
        do {
            try configuration.validate()
        } catch {
            throw CLIError.usage(error.message)
        }
        if let json = self.json, json != "-" {
            guard FileManager.default.createFile(atPath: json, contents: nil) else {
                throw CLIError.usage("--json \(json): cannot be written")
            }
        }

        let sampler = self.serverPID.map { ProcessMemorySampler(pid: $0) }
        if let sampler {
            guard sampler.residentBytes() != nil else {
                throw CLIError.usage("--server-pid \(sampler.pid): no such local process (or /proc cannot be read)")
            }
            sampler.start()
        }
        let measuring = Locked(false)
        let runner = BenchRunner(configuration: configuration) { progress in
            if !progress.warmingUp, let sampler, !measuring.withLock({ $0 }) {
                // Set-up (preloads, the asset a download fetches) is not what is measured.
                measuring.withLock { $0 = true }
                sampler.restartFromNow()
            }
            Terminal.progress(
                String(
                    format: "%@ %@  %@ ops  %.0f ops/s  %@ errors", progress.warmingUp ? "warm-up" : "elapsed",
                    BenchDuration.format(progress.elapsed), "\(progress.operations)", progress.operationsPerSecond,
                    "\(progress.errors)"))
        }
        var result: BenchResult
        do {
            result = try await runner.run()
        } catch {
            Terminal.endProgress()
            switch error.kind {
            case .invalidConfiguration: throw CLIError.usage(error.message)
            case .setupFailed:
                throw CLIError(error.underlying.map { CLIError.exitCode(for: $0.code) } ?? .failure, error.message)
            }
        }
        Terminal.endProgress()
        result.clientAllocator = String(cString: cirrus_allocator_description())
        let memory = sampler?.stop()
        if let json = self.json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            let data = try encoder.encode(result)
            if json == "-" {
                FileHandle.standardOutput.write(data + Data("\n".utf8))
            } else {
                do {
                    try data.write(to: URL(fileURLWithPath: json))
                } catch {
                    throw CLIError.usage("--json \(json): \(error.localizedDescription)")
                }
            }
        }
        if self.json != "-" {
            print(BenchTable.render(result))
            if let memory {
                print(
                    "server resident memory (pid \(self.serverPID ?? 0)): \(memory.baselineBytes >> 20) MiB at the start, "
                        + "peak \(memory.peakBytes >> 20) MiB, growth \(memory.growthBytes >> 20) MiB")
            }
        }
        if result.errorCount > 0 {
            throw ExitCode(CLIExitCode.failure.rawValue)
        }
    }
}
