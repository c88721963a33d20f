import Foundation
import Histogram

/// Latency percentiles of a run, in microseconds, from an HdrHistogram (3 significant digits).
public struct LatencySummary: Sendable, Hashable, Codable {
    public var count: UInt64
    public var min: UInt64
    public var mean: Double
    public var p50: UInt64
    public var p90: UInt64
    public var p99: UInt64
    public var p999: UInt64
    public var max: UInt64

    /// The summary of `histogram` (values in microseconds); zeros when it is empty.
    public init(_ histogram: Histogram<UInt64>) {
        self.count = histogram.totalCount
        guard histogram.totalCount > 0 else {
            self.min = 0
            self.mean = 0
            self.p50 = 0
            self.p90 = 0
            self.p99 = 0
            self.p999 = 0
            self.max = 0
            return
        }
        self.min = histogram.min
        self.mean = histogram.mean
        self.p50 = histogram.valueAtPercentile(50)
        self.p90 = histogram.valueAtPercentile(90)
        self.p99 = histogram.valueAtPercentile(99)
        self.p999 = histogram.valueAtPercentile(99.9)
        self.max = histogram.max
    }
}

/// The counts of one operation kind (or of the whole run).
public struct BenchCounts: Sendable, Hashable, Codable {
    /// Operations completed in the measured phase, failed ones included.
    public var operations: UInt64 = 0
    /// Operations that failed as a whole (their call threw).
    public var failedOperations: UInt64 = 0
    /// Records the operations saved, fetched, matched or reported changed, successfully.
    public var records: UInt64 = 0
    /// Records a modify saved (a subset of `records`): what the server must now store.
    public var recordsWritten: UInt64 = 0
    /// Items that failed inside operations that otherwise ran (partial failures).
    public var failedItems: UInt64 = 0

    public init() {}

    mutating func add(_ other: BenchCounts) {
        self.operations += other.operations
        self.failedOperations += other.failedOperations
        self.records += other.records
        self.recordsWritten += other.recordsWritten
        self.failedItems += other.failedItems
    }
}

/// What `cirrus bench` measured; `--json` writes it as is.
public struct BenchResult: Sendable, Codable {
    /// One operation kind of the mix.
    public struct PerKind: Sendable, Codable {
        public var counts: BenchCounts
        public var latency: LatencySummary
    }

    /// `operations` or `handshakes`.
    public var mode: String
    /// The settings, as given.
    public var settings: Settings
    /// Length of the measured phase.
    public var elapsedSeconds: Double
    /// Totals of the measured phase.
    public var counts: BenchCounts
    public var operationsPerSecond: Double
    public var recordsPerSecond: Double
    /// Bytes on the socket (TLS included) during the measured phase.
    public var bytesIn: UInt64
    public var bytesOut: UInt64
    public var bytesInPerSecond: Double
    public var bytesOutPerSecond: Double
    /// Latency of every measured operation; open loop: from its intended start.
    public var latency: LatencySummary
    /// Each kind of the mix.
    public var byKind: [String: PerKind]
    /// Failures by CloudKit error code name (operations and items).
    public var errorsByCode: [String: UInt64]
    /// The first failure's message for each code in `errorsByCode`.
    public var firstErrorMessages: [String: String]
    /// What ran during warm-up (not in any figure above).
    public var warmup: BenchCounts
    /// Open loop: operations that started later than intended because `concurrency` were in
    /// flight (their wait is in the latency).
    public var delayedStarts: UInt64
    /// Records written before the run so reads find something (per zone).
    public var preloadedRecordsPerZone: Int
    /// The zones the run used.
    public var zoneNames: [String]
    /// The tag in the names of every record this run wrote (`<runID>-…`).
    public var runID: String
    /// What the client process allocates with (`cirrus bench`: "mimalloc 2.0.9"); nil when the
    /// program running the bench did not say.
    public var clientAllocator: String? = nil
    /// The CPU time the measured phase cost the client process and, with
    /// ``BenchConfiguration/serverMetrics``, the server; nil in results written before it was measured.
    public var cpu: BenchCPU? = nil

    /// The settings of a run.
    public struct Settings: Sendable, Codable {
        public var server: String
        public var connections: Int
        public var concurrency: Int
        public var stop: BenchConfiguration.Stop
        public var warmupSeconds: Double
        public var mix: BenchMix
        public var recordsPerOperation: Int
        public var payloadBytes: Int
        public var zones: Int
        public var seed: UInt64
        public var rate: Double?
        /// Events (records) each `stream` operation received; nil when the mix does not stream.
        public var eventsPerStream: Int?
        /// Bytes of each asset uploaded or downloaded; nil when the mix moves no assets.
        public var assetBytes: Int?
    }

    /// Total errors (failed operations plus failed items).
    public var errorCount: UInt64 { self.errorsByCode.values.reduce(0, +) }
}

/// The CPU time (user and system, every thread) spent during the measured phase, per operation:
/// what a workload costs each side, a steadier figure than a rate on a shared or noisy machine,
/// and the way to see that the load generator itself is the bound (both sides share the cores
/// when they run on one machine).
///
/// Operations that began during warm-up and ended in the measured phase count in the CPU but
/// not in the operations (as with the bytes): use a warm-up long enough that their share is small.
public struct BenchCPU: Sendable, Hashable, Codable {
    /// The process that ran the bench.
    public var clientSeconds: Double
    public var clientMicrosecondsPerOperation: Double
    /// The server process (`cirrus_process_cpu_seconds_total` of its `/metrics`); nil without
    /// ``BenchConfiguration/serverMetrics`` or when a scrape failed (``serverMetricsError``).
    public var serverSeconds: Double? = nil
    public var serverMicrosecondsPerOperation: Double? = nil
    /// The storage writer's CPU in its transactions (`cirrus_write_commit_cpu_seconds_sum`; the
    /// embedded SQLite engine reports it), per item written (`cirrus_write_commit_records_sum`),
    /// and the items per transaction (group commit); nil when the server wrote nothing or does
    /// not report it.
    public var writerSeconds: Double? = nil
    public var writerMicrosecondsPerItem: Double? = nil
    public var itemsPerCommit: Double? = nil
    /// Why the server's figures are missing although its metrics were asked for.
    public var serverMetricsError: String? = nil

    public init(clientSeconds: Double, operations: UInt64) {
        self.clientSeconds = clientSeconds
        self.clientMicrosecondsPerOperation = operations > 0 ? clientSeconds / Double(operations) * 1e6 : 0
    }

    /// Adds the server's figures from its metrics at the start and the end of the phase.
    mutating func addServer(from start: PrometheusSamples, to end: PrometheusSamples, operations: UInt64) {
        func delta(_ name: String) -> Double? {
            guard let before = start.value(of: name), let after = end.value(of: name), after >= before else { return nil }
            return after - before
        }
        guard let server = delta(ServerMetricNames.processCPU) else {
            self.serverMetricsError = "the server's metrics have no \(ServerMetricNames.processCPU)"
            return
        }
        self.serverSeconds = server
        self.serverMicrosecondsPerOperation = operations > 0 ? server / Double(operations) * 1e6 : 0
        if let writer = delta(ServerMetricNames.writerCPU), let items = delta(ServerMetricNames.itemsWritten), items > 0 {
            self.writerSeconds = writer
            self.writerMicrosecondsPerItem = writer / items * 1e6
            if let commits = delta(ServerMetricNames.commits), commits > 0 {
                self.itemsPerCommit = items / commits
            }
        }
    }
}

/// The series of `cirrusd`'s `/metrics` the bench reads (`ServerMetrics.Name` in CirrusServer).
enum ServerMetricNames {
    static let processCPU = "cirrus_process_cpu_seconds_total"
    static let writerCPU = "cirrus_write_commit_cpu_seconds_sum"
    static let itemsWritten = "cirrus_write_commit_records_sum"
    static let commits = "cirrus_write_commits_total"
}

/// User and system CPU time of every thread of this process so far, in seconds.
func processCPUSeconds() -> Double {
    var time = timespec()
    guard clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &time) == 0 else { return 0 }
    return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
}
