import CirrusKit
import CirrusModel
import Foundation

/// What `cirrus bench` runs: the server, the load shape and the workload.
///
/// For example:
/// ```swift
/// var configuration = BenchConfiguration(client: .fromEnvironment())
/// configuration.workload = try BenchMix(parsing: "modify=20,fetch=70,query=10")
/// configuration.stop = .operations(10_000)
/// let result = try await BenchRunner(configuration: configuration).run()
/// ```
public struct BenchConfiguration: Sendable {
    /// When the measured phase ends.
    public enum Stop: Sendable, Hashable, Codable {
        /// After this many seconds.
        case duration(Double)
        /// After exactly this many operations (completed, successfully or not).
        case operations(Int)
    }

    /// Where the server is and how to authenticate.
    public var client: CirrusClientConfiguration
    /// The container the benchmark's zones live in.
    public var containerIdentifier = "iCloud.cirrus.bench"
    /// Connections (one `CKContainer` each); operations are spread over them round robin.
    public var connections = 1
    /// Operations in flight in total (closed loop: the workers; open loop: the cap).
    public var concurrency = 1
    public var stop: Stop = .duration(30)
    /// Seconds of load before the measured phase; counted apart, never in the results.
    public var warmup: Double = 0
    /// Which operations, in which proportion.
    public var workload = BenchMix(single: .modify)
    /// Records saved, fetched or asked for per operation (1…400).
    public var recordsPerOperation = 1
    /// Bytes of the `payload` field of every record written.
    public var payloadBytes = 100
    /// Zones the load is spread over (`bench-0` …).
    public var zones = 1
    /// Records written to each zone before the run when the mix reads (fetch, query, changes).
    public var preloadRecordsPerZone = 1_000
    /// Events one `stream` operation receives: the records preloaded into its zone.
    public var eventsPerStream = 10_000
    /// Bytes of the asset file each `upload` sends and each `download` receives.
    public var assetBytes = 1 << 20
    /// Seeds every random choice (operation kinds, record picks).
    public var seed: UInt64 = 1
    /// Open-loop target rate (operations per second); nil = closed loop.
    public var rate: Double?
    /// Measure new TLS connections (TCP + TLS 1.3 + Hello) instead of operations.
    public var handshakes = false
    /// The record type the benchmark writes and reads.
    public var recordType = "BenchRecord"
    /// Spread the connections over ``CirrusClientConfiguration/servers``: connection `i` starts
    /// at server `i` (modulo their count), the others following as its fail-over order. When
    /// false every connection starts at the first server.
    public var spreadOverServers = false
    /// The server's `/metrics` (`cirrusd --metrics-address`): read before and after the measured
    /// phase for the server's CPU per operation (``BenchCPU``); nil = the client's CPU only.
    public var serverMetrics: BenchMetricsEndpoint?

    public init(client: CirrusClientConfiguration) {
        self.client = client
    }

    /// The client configuration of connection `index`.
    public func client(forConnection index: Int) -> CirrusClientConfiguration {
        let servers = self.client.servers
        guard self.spreadOverServers, servers.count > 1 else { return self.client }
        var client = self.client
        let first = index % servers.count
        client.servers = Array(servers[first...] + servers[..<first])
        return client
    }

    /// Checks the numbers; the error names the flag.
    public func validate() throws(BenchError) {
        guard self.connections >= 1 else { throw BenchError.invalid("--connections must be at least 1") }
        guard self.concurrency >= 1 else { throw BenchError.invalid("--concurrency must be at least 1") }
        guard (1...400).contains(self.recordsPerOperation) else {
            throw BenchError.invalid("--records-per-op must be between 1 and 400")
        }
        guard self.payloadBytes >= 0 else { throw BenchError.invalid("--payload-bytes must not be negative") }
        guard self.zones >= 1 else { throw BenchError.invalid("--zones must be at least 1") }
        guard self.preloadRecordsPerZone >= 1 else { throw BenchError.invalid("--preload must be at least 1") }
        guard (1...1_000_000).contains(self.eventsPerStream) else {
            throw BenchError.invalid("--events must be between 1 and 1,000,000")
        }
        guard self.assetBytes >= 0 else { throw BenchError.invalid("--asset-bytes must not be negative") }
        if self.workload.weights[.upload] != nil, self.assetBytes > 4 << 20, self.concurrency > 1 {
            throw BenchError.invalid("--op upload with --asset-bytes above 4 MiB runs one upload at a time (--concurrency 1)")
        }
        guard self.warmup >= 0 else { throw BenchError.invalid("--warmup must not be negative") }
        switch self.stop {
        case .duration(let seconds):
            guard seconds > 0 else { throw BenchError.invalid("--duration must be positive") }
        case .operations(let count):
            guard count >= 1 else { throw BenchError.invalid("--operations must be at least 1") }
        }
        if let rate = self.rate {
            guard rate > 0, rate.isFinite else { throw BenchError.invalid("--rate must be a positive number") }
        }
    }
}

/// A `cirrus bench` failure that ends the run before it measured anything (bad settings, a
/// server that cannot be reached, a setup that failed). Errors of measured operations are
/// counted, never thrown.
public struct BenchError: Error, Sendable, CustomStringConvertible {
    public enum Kind: Sendable { case invalidConfiguration, setupFailed }
    public let kind: Kind
    public let message: String
    /// The CloudKit error behind a setup failure.
    public let underlying: CKError?

    static func invalid(_ message: String) -> BenchError {
        BenchError(kind: .invalidConfiguration, message: message, underlying: nil)
    }

    public var description: String { self.message }
}
