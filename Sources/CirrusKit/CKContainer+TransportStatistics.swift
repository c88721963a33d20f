/// What a container's connections moved over the network. A Cirrus addition (CloudKit has no
/// such API), used by `cirrus bench` to report bytes in and out.
extension CKContainer {
    /// Totals since the container was created, over every connection it made.
    public struct TransportStatistics: Sendable, Hashable, Codable {
        /// Bytes written to the socket (TLS records: frames plus TLS overhead and handshakes).
        public var bytesSent: UInt64 = 0
        /// Bytes read from the socket.
        public var bytesReceived: UInt64 = 0
        /// Connections that completed TLS and `Hello` (reconnects included).
        public var connectionsEstablished: UInt64 = 0

        public init(bytesSent: UInt64 = 0, bytesReceived: UInt64 = 0, connectionsEstablished: UInt64 = 0) {
            self.bytesSent = bytesSent
            self.bytesReceived = bytesReceived
            self.connectionsEstablished = connectionsEstablished
        }
    }

    /// Bytes sent and received and connections made so far by this container.
    ///
    /// For example:
    /// ```swift
    /// let before = container.transportStatistics
    /// _ = try await container.privateCloudDatabase.save(record)
    /// print(container.transportStatistics.bytesSent - before.bytesSent)
    /// ```
    public var transportStatistics: TransportStatistics {
        self.connectionManager.counters.snapshot
    }
}
