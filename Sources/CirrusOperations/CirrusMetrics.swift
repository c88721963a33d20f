public import CirrusServer
public import CirrusStore
public import Prometheus

/// The Prometheus side of ``ServerMetrics``: a registry of its own (so two servers in one
/// process count apart), histogram buckets fitted to Cirrus, and the storage's commits
/// counted as write batches.
///
/// For example:
/// ```swift
/// let metrics = CirrusMetrics()
/// configuration.metrics = metrics.server
/// metrics.observe(storage)
/// let text = metrics.registry.emitToString()
/// ```
public struct CirrusMetrics: Sendable {
    /// What `/metrics` shows.
    public let registry: PrometheusCollectorRegistry
    /// The factory the counters come from; give it to `MetricsSystem.bootstrap` to export other
    /// libraries' swift-metrics too.
    public let factory: PrometheusMetricsFactory
    /// The server's counters, for `ServerConfiguration.metrics`.
    public let server: ServerMetrics

    public init() {
        let registry = PrometheusCollectorRegistry()
        var factory = PrometheusMetricsFactory(registry: registry)
        factory.durationHistogramBuckets[ServerMetrics.Name.writeCommitSeconds] = [
            .microseconds(250), .microseconds(500), .milliseconds(1), .milliseconds(2), .milliseconds(5),
            .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100), .milliseconds(250),
            .milliseconds(500), .seconds(1), .seconds(5),
        ]
        factory.durationHistogramBuckets[ServerMetrics.Name.operationSeconds] = [
            .milliseconds(1), .milliseconds(2), .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50),
            .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1), .seconds(5), .seconds(30),
        ]
        factory.valueHistogramBuckets[ServerMetrics.Name.writeCommitJobs] = [1, 2, 4, 8, 16, 32, 64, 128, 256]
        factory.valueHistogramBuckets[ServerMetrics.Name.writeCommitRecords] = [1, 10, 50, 100, 400, 1000, 2000, 5000]
        self.registry = registry
        self.factory = factory
        self.server = ServerMetrics(factory: factory)
    }

    /// Counts every write transaction of `storage` (requests per commit, items, commit latency).
    public func observe(_ storage: SQLiteStorage) {
        self.observe(commitsOf: storage.observeCommits)
    }

    /// Counts every write transaction a storage reports to the observers `register` adds
    /// (its `observeCommits`: SQLite's or PostgreSQL's).
    public func observe(commitsOf register: (@escaping @Sendable (WriteCommit) -> Void) -> Void) {
        let server = self.server
        register { commit in
            server.recordCommit(
                jobs: commit.jobs, records: commit.items, nanoseconds: ServerMetrics.nanoseconds(commit.duration),
                cpuNanoseconds: commit.writerCPU.map(ServerMetrics.nanoseconds))
        }
    }
}
