/// A `HOST:PORT` to listen on, as `--metrics-address` takes it: `127.0.0.1:9464`,
/// `[::1]:9464` or `localhost:9464`; port 0 picks a free one.
public struct EndpointAddress: Sendable, Hashable, CustomStringConvertible {
    public var host: String
    public var port: Int

    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    /// Parses `HOST:PORT`; nil when either part is missing or the port is not 0–65535.
    public init?(parsing text: String) {
        guard let colon = text.lastIndex(of: ":") else { return nil }
        var host = String(text[..<colon])
        if host.hasPrefix("["), host.hasSuffix("]") {
            host = String(host.dropFirst().dropLast())
        }
        guard !host.isEmpty, !host.contains("["), let port = Int(text[text.index(after: colon)...]), (0...65535).contains(port)
        else { return nil }
        self.host = host
        self.port = port
    }

    public var description: String {
        self.host.contains(":") ? "[\(self.host)]:\(self.port)" : "\(self.host):\(self.port)"
    }
}
