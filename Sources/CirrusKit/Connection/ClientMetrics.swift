import CoreMetrics

/// What a container's connection counts through swift-metrics, so an app can export it with
/// the backend it already uses (swift-prometheus, StatsD …): connections made and failed,
/// reconnects, long-lived operations resumed, streams opened again after the server drained a
/// connection, and bytes on the socket. Every metric carries the dimension
/// `container` (the container identifier).
///
/// The counters come from ``CirrusClientConfiguration/metricsFactory`` or, when that is nil,
/// from the process's `MetricsSystem` (nothing is counted until the app bootstraps one).
///
/// For example, with swift-prometheus:
/// ```swift
/// let registry = PrometheusCollectorRegistry()
/// MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))
/// let container = CKContainer(identifier: "iCloud.com.example.notes")
/// // … registry.emit(into:) shows cirrus_client_connections_total{container="iCloud.com.example.notes"} …
/// ```
public enum CirrusClientMetrics {
    /// The metric names.
    public enum Name {
        /// Connections that completed TLS and `Hello`.
        public static let connections = "cirrus_client_connections_total"
        /// Connection attempts that failed (TCP, TLS, `Hello`, or the connect timeout).
        public static let connectionFailures = "cirrus_client_connection_failures_total"
        /// Connections made after the container already had one (a dropped or drained
        /// connection replaced).
        public static let reconnects = "cirrus_client_reconnects_total"
        /// Long-lived operations attached again to a new connection after theirs was lost.
        public static let resumes = "cirrus_client_resumes_total"
        /// Streams opened again on a new connection because the server never ran them
        /// (it drained the old one with `GoAway`, or refused new streams on it).
        public static let retries = "cirrus_client_retries_total"
        /// Bytes received on the socket, TLS records included.
        public static let bytesReceived = "cirrus_client_bytes_received_total"
        /// Bytes sent on the socket, TLS records included.
        public static let bytesSent = "cirrus_client_bytes_sent_total"
    }
}

/// One container's counters (see ``CirrusClientMetrics``). Each is an atomic add in the
/// backend; bytes are added per read burst and per write, not per frame.
struct ClientMetrics: Sendable {
    let connections: Counter
    let connectionFailures: Counter
    let reconnects: Counter
    let resumes: Counter
    let retries: Counter
    let bytesReceived: Counter
    let bytesSent: Counter

    init(container: String, factory: (any MetricsFactory)?) {
        let dimensions = [("container", container)]
        func counter(_ label: String) -> Counter {
            if let factory {
                return Counter(label: label, dimensions: dimensions, factory: factory)
            }
            return Counter(label: label, dimensions: dimensions)
        }
        self.connections = counter(CirrusClientMetrics.Name.connections)
        self.connectionFailures = counter(CirrusClientMetrics.Name.connectionFailures)
        self.reconnects = counter(CirrusClientMetrics.Name.reconnects)
        self.resumes = counter(CirrusClientMetrics.Name.resumes)
        self.retries = counter(CirrusClientMetrics.Name.retries)
        self.bytesReceived = counter(CirrusClientMetrics.Name.bytesReceived)
        self.bytesSent = counter(CirrusClientMetrics.Name.bytesSent)
    }
}
