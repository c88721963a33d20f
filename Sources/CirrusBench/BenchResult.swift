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
