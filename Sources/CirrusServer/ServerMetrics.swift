public import CoreMetrics
import CirrusTLS
import CirrusWire
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What the server counts, through swift-metrics: connections, TLS failures, streams, events,
/// bytes, errors and storage commits. A process exports them by handing a factory (such as
/// swift-prometheus's) to ``init(factory:)``; without one the server counts nothing.
///
/// Counting costs an atomic add per counter touched; bytes and events are added per read
/// burst or flush, not per frame. The gauges (connections open, long-lived operations
/// running, watches open) and the process's CPU time are not kept on the hot path at all:
/// ``sample(connectionsOpen:longLivedRunning:watchesOpen:)`` sets them when the metrics are read.
///
/// For example:
/// ```swift
/// let registry = PrometheusCollectorRegistry()
/// configuration.metrics = ServerMetrics(factory: PrometheusMetricsFactory(registry: registry))
/// ```
public final class ServerMetrics: Sendable {
    /// The metric names, as a scrape shows them.
    public enum Name {
        public static let connectionsAccepted = "cirrus_connections_accepted_total"
        public static let connectionsRefused = "cirrus_connections_refused_total"
        public static let connectionsOpen = "cirrus_connections_open"
        public static let tlsHandshakeFailures = "cirrus_tls_handshake_failures_total"
        public static let streamsOpened = "cirrus_streams_opened_total"
        public static let eventsSent = "cirrus_events_sent_total"
        public static let bytesReceived = "cirrus_bytes_received_total"
        public static let bytesSent = "cirrus_bytes_sent_total"
        public static let errors = "cirrus_errors_total"
        public static let writeCommits = "cirrus_write_commits_total"
        public static let writeCommitJobs = "cirrus_write_commit_jobs"
        public static let writeCommitRecords = "cirrus_write_commit_records"
        public static let writeCommitSeconds = "cirrus_write_commit_seconds"
        public static let writeCommitCPUSeconds = "cirrus_write_commit_cpu_seconds"
        public static let longLivedRunning = "cirrus_long_lived_operations_running"
        public static let watchesOpen = "cirrus_notification_watches_open"
        public static let operationSeconds = "cirrus_operation_seconds"
        public static let maintenanceRuns = "cirrus_maintenance_runs_total"
        public static let maintenanceSeconds = "cirrus_maintenance_seconds"
        public static let notificationDeliverySeconds = "cirrus_notification_delivery_seconds"
        public static let processCPUSeconds = "cirrus_process_cpu_seconds_total"
    }

    private let factory: any MetricsFactory
    let connectionsAccepted: Counter
    let refusedForHandshakeRate: Counter
    let refusedAtLimit: Counter
    let eventsSent: Counter
    let bytesReceived: Counter
    let bytesSent: Counter
    let writeCommits: Counter
    let writeCommitJobs: Recorder
    let writeCommitRecords: Recorder
    let writeCommitLatency: CoreMetrics.Timer
    let writeCommitCPU: CoreMetrics.Timer
    private let connectionsOpen: Gauge
    private let longLivedRunning: Gauge
    private let watchesOpen: Gauge
    /// Counters with a label, made on first use (a lock per stream opened or error, never per event).
    private let labelled = Mutex<[LabelledKey: Counter]>([:])
    /// Operation latency by kind, made on first use (a lock per operation that ends).
    private let operationTimers = Mutex<[String: CoreMetrics.Timer]>([:])
    /// Streams opened by kind, made on first use: looked up by the kind alone, as
    /// ``labelledCounter(_:_:)``'s key (an array of dimensions, built for every call) cost
    /// 1 % of `cirrusd`'s CPU under single-record saves, one stream each.
    private let streamsOpened = Mutex<[String: Counter]>([:])
    private let maintenanceSucceeded: Counter
    private let maintenanceFailed: Counter
    private let maintenanceLatency: CoreMetrics.Timer
    private let notificationDelivery: CoreMetrics.Timer
    /// The process's CPU time (user and system, every thread), brought up to date when the
    /// metrics are read: a load generator reads it before and after a run for the server's CPU
    /// per operation (`cirrus bench --server-metrics`).
    private let processCPU: FloatingPointCounter
    /// The process CPU seconds already added to ``processCPU``.
    private let processCPUCounted = Mutex<Double>(0)

    private struct LabelledKey: Hashable {
        var name: String
        var dimensions: [String]
    }

    /// Counters and gauges made by `factory`.
    public init(factory: any MetricsFactory) {
        self.factory = factory
        self.connectionsAccepted = Counter(label: Name.connectionsAccepted, factory: factory)
        self.refusedForHandshakeRate = Counter(
            label: Name.connectionsRefused, dimensions: [("reason", "handshake_rate")], factory: factory)
        self.refusedAtLimit = Counter(label: Name.connectionsRefused, dimensions: [("reason", "connection_limit")], factory: factory)
        self.eventsSent = Counter(label: Name.eventsSent, factory: factory)
        self.bytesReceived = Counter(label: Name.bytesReceived, factory: factory)
        self.bytesSent = Counter(label: Name.bytesSent, factory: factory)
        self.writeCommits = Counter(label: Name.writeCommits, factory: factory)
        self.writeCommitJobs = Recorder(label: Name.writeCommitJobs, factory: factory)
        self.writeCommitRecords = Recorder(label: Name.writeCommitRecords, factory: factory)
        self.writeCommitLatency = CoreMetrics.Timer(label: Name.writeCommitSeconds, factory: factory)
        self.writeCommitCPU = CoreMetrics.Timer(label: Name.writeCommitCPUSeconds, factory: factory)
        self.connectionsOpen = Gauge(label: Name.connectionsOpen, factory: factory)
        self.longLivedRunning = Gauge(label: Name.longLivedRunning, factory: factory)
        self.watchesOpen = Gauge(label: Name.watchesOpen, factory: factory)
        self.maintenanceSucceeded = Counter(label: Name.maintenanceRuns, dimensions: [("result", "ok")], factory: factory)
        self.maintenanceFailed = Counter(label: Name.maintenanceRuns, dimensions: [("result", "failed")], factory: factory)
        self.maintenanceLatency = CoreMetrics.Timer(label: Name.maintenanceSeconds, factory: factory)
        self.notificationDelivery = CoreMetrics.Timer(label: Name.notificationDeliverySeconds, factory: factory)
        self.processCPU = FloatingPointCounter(label: Name.processCPUSeconds, factory: factory)
    }

    /// Records the lag of one push: from the notification's creation, in the transaction of the
    /// change that caused it, to its frame being queued on a live watch stream. Catch-up reads
    /// of a watch that (re)started behind its feed are not push and are not recorded.
    func notificationDelivered(createdAt: Wire.Timestamp) {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        let lag = (Int64(now.tv_sec) - createdAt.seconds) * 1_000_000_000 + Int64(now.tv_nsec) - Int64(createdAt.nanos)
        self.notificationDelivery.recordNanoseconds(max(0, lag))
    }

    /// Counts one maintenance pass (pruning tombstones, cursors, operations, notifications, assets).
    public func maintenancePass(failed: Bool, duration: Duration) {
        (failed ? self.maintenanceFailed : self.maintenanceSucceeded).increment()
        self.maintenanceLatency.recordNanoseconds(Self.nanoseconds(duration))
    }

    /// Records how long an operation ran, by kind, from its `Open` to its `Complete`; for
    /// operations attached to their stream (long-lived runs outlive their streams and are not timed).
    func operationFinished(_ request: Wire.Open.Request?, duration: Duration) {
        let kind = request?.metricLabel ?? "unknown"
        let timer = self.operationTimers.withLock { timers in
            if let timer = timers[kind] { return timer }
            let timer = CoreMetrics.Timer(label: Name.operationSeconds, dimensions: [("kind", kind)], factory: self.factory)
            timers[kind] = timer
            return timer
        }
        timer.recordNanoseconds(Self.nanoseconds(duration))
    }

    /// `duration` in whole nanoseconds.
    public static func nanoseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }

    /// Sets the gauges to what they are now; called when the metrics are read.
    public func sample(connectionsOpen: Int, longLivedRunning: Int, watchesOpen: Int) {
        self.connectionsOpen.record(connectionsOpen)
        self.longLivedRunning.record(longLivedRunning)
        self.watchesOpen.record(watchesOpen)
        self.sampleProcessCPU()
    }

    /// Adds the CPU time the process spent since the last reading to ``Name/processCPUSeconds``.
    func sampleProcessCPU() {
        let now = Self.processCPUSeconds()
        self.processCPUCounted.withLock { counted in
            // Two scrapes at once: the later reading may be taken first; never count backwards.
            guard now > counted else { return }
            self.processCPU.increment(by: now - counted)
            counted = now
        }
    }

    /// User and system CPU time of every thread of this process so far, in seconds.
    public static func processCPUSeconds() -> Double {
        var time = timespec()
        guard clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &time) == 0 else { return 0 }
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
    }

    /// Counts one storage transaction: how many requests (`jobs`) shared it, how many items
    /// they wrote, how long it took from its first statement to its durable commit, and the
    /// CPU time the committing thread spent on it (`cpuNanoseconds`, when the engine runs in
    /// this process: SQLite's single writer, whose busy share the sum's rate is).
    public func recordCommit(jobs: Int, records: Int, nanoseconds: Int64, cpuNanoseconds: Int64? = nil) {
        self.writeCommits.increment()
        self.writeCommitJobs.record(jobs)
        self.writeCommitRecords.record(records)
        self.writeCommitLatency.recordNanoseconds(nanoseconds)
        if let cpuNanoseconds { self.writeCommitCPU.recordNanoseconds(cpuNanoseconds) }
    }

    func tlsHandshakeFailed(_ error: TLSError) {
        self.labelledCounter(Name.tlsHandshakeFailures, [("reason", error.code.description)]).increment()
    }

    func streamOpened(_ request: Wire.Open.Request?) {
        let kind = request?.metricLabel ?? "unknown"
        let counter = self.streamsOpened.withLock { counters in
            if let counter = counters[kind] { return counter }
            let counter = Counter(label: Name.streamsOpened, dimensions: [("kind", kind)], factory: self.factory)
            counters[kind] = counter
            return counter
        }
        counter.increment()
    }

    /// Counts an error sent to a client: ending a stream (`level` "stream") or the connection.
    func errorSent(_ code: Wire.ErrorCode, level: String) {
        self.labelledCounter(Name.errors, [("code", String(describing: code)), ("level", level)]).increment()
    }

    private func labelledCounter(_ name: String, _ dimensions: [(String, String)]) -> Counter {
        let key = LabelledKey(name: name, dimensions: dimensions.flatMap { [$0.0, $0.1] })
        return self.labelled.withLock { counters in
            if let counter = counters[key] { return counter }
            let counter = Counter(label: name, dimensions: dimensions, factory: self.factory)
            counters[key] = counter
            return counter
        }
    }
}
