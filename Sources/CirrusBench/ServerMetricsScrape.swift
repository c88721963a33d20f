import CirrusKit
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix

/// Where a server's `/metrics` is: `cirrusd --metrics-address HOST:PORT`, read over plain HTTP.
///
/// For example:
/// ```swift
/// let endpoint = try #require(BenchMetricsEndpoint(parsing: "127.0.0.1:9464"))
/// let samples = try await endpoint.scrape()
/// let cpu = samples.value(of: "cirrus_process_cpu_seconds_total")
/// ```
public struct BenchMetricsEndpoint: Sendable, Hashable, CustomStringConvertible {
    public var host: String
    public var port: Int

    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    /// `HOST:PORT` or `[IPv6]:PORT`, as `cirrusd --metrics-address` takes it; nil when it is
    /// neither.
    public init?(parsing text: String) {
        // Split as `CIRRUS_SERVER` is; here a port is required, 1–65535, in digits only.
        guard let (host, port) = CirrusClientConfiguration.parse(server: text), let port, !host.isEmpty,
            (1...65_535).contains(port), text.reversed().prefix(while: { $0 != ":" }).allSatisfy({ $0.isASCII && $0.isNumber })
        else {
            return nil
        }
        self.init(host: host, port: port)
    }

    /// `http://HOST:PORT/metrics`.
    public var description: String {
        "http://\(CirrusClientConfiguration.Server(host: self.host, port: self.port))/metrics"
    }

    /// The samples of one `GET /metrics`.
    ///
    /// - throws: ``BenchMetricsError`` when the server cannot be reached, does not answer 200
    ///   within `timeout`, or answers more than 16 MiB.
    public func scrape(timeout: Duration = .seconds(10)) async throws(BenchMetricsError) -> PrometheusSamples {
        let page: MetricsPage
        do {
            page = try await MetricsPage.get(from: self, timeout: timeout)
        } catch let error as BenchMetricsError {
            throw error
        } catch let error as NIOConnectionError {
            throw BenchMetricsError("cannot connect to \(self): \(error.connectionErrors.first.map { "\($0.error)" } ?? "\(error)")")
        } catch {
            throw BenchMetricsError("cannot read \(self): \(error)")
        }
        guard page.status == 200 else {
            throw BenchMetricsError("\(self) answered HTTP \(page.status)")
        }
        return PrometheusSamples(parsing: String(decoding: page.body, as: UTF8.self))
    }
}

/// Why a server's metrics could not be read.
public struct BenchMetricsError: Error, Sendable, Hashable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { self.message }
}

/// The samples of a Prometheus text exposition, by series as written (`name` or
/// `name{label="value",…}`); comments and lines that do not parse are skipped.
public struct PrometheusSamples: Sendable, Hashable {
    public private(set) var values: [String: Double] = [:]

    public init(parsing text: String) {
        for line in text.split(whereSeparator: \.isNewline) {
            let line = line.drop(while: { $0 == " " || $0 == "\t" })
            guard !line.isEmpty, !line.hasPrefix("#") else { continue }
            // The series runs to the first blank outside the labels' braces.
            var inLabels = false
            var inQuotes = false
            var escaped = false
            var end = line.endIndex
            for index in line.indices {
                let character = line[index]
                if escaped {
                    escaped = false
                } else if inQuotes {
                    if character == "\\" { escaped = true } else if character == "\"" { inQuotes = false }
                } else if character == "\"", inLabels {
                    inQuotes = true
                } else if character == "{" {
                    inLabels = true
                } else if character == "}" {
                    inLabels = false
                } else if character == " " || character == "\t", !inLabels {
                    end = index
                    break
                }
            }
            guard end < line.endIndex else { continue }
            let series = String(line[..<end])
            let rest = line[end...].split(whereSeparator: { $0 == " " || $0 == "\t" })
            guard let text = rest.first, let value = Self.value(String(text)) else { continue }
            self.values[series] = value
        }
    }

    /// The value of the series `name` without labels, nil when the page has none.
    public func value(of name: String) -> Double? {
        self.values[name]
    }

    private static func value(_ text: String) -> Double? {
        switch text {
        case "+Inf": return .infinity
        case "-Inf": return -.infinity
        case "NaN": return .nan
        default: return Double(text)
        }
    }
}

/// One HTTP/1.1 `GET /metrics` with `Connection: close` over SwiftNIO.
private struct MetricsPage: Sendable {
    var status: Int
    var body: [UInt8]

    static let maximumBytes = 16 << 20

    static func get(from endpoint: BenchMetricsEndpoint, timeout: Duration) async throws -> MetricsPage {
        let group = MultiThreadedEventLoopGroup.singleton
        let loop = group.next()
        let promise = loop.makePromise(of: MetricsPage.self)
        let channel: any Channel
        do {
            channel = try await ClientBootstrap(group: loop)
                .connectTimeout(.init(timeout))
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHTTPClientHandlers()
                        try channel.pipeline.syncOperations.addHandler(MetricsPageHandler(promise: promise))
                    }
                }
                .connect(host: endpoint.host, port: endpoint.port)
                .get()
        } catch {
            promise.fail(error)  // Never left unfulfilled.
            throw error
        }
        let deadline = loop.scheduleTask(in: .init(timeout)) {
            promise.fail(BenchMetricsError("\(endpoint) did not answer within \(timeout)"))
            channel.close(promise: nil)
        }
        var head = HTTPRequestHead(version: .http1_1, method: .GET, uri: "/metrics")
        head.headers.add(name: "Host", value: CirrusClientConfiguration.Server(host: endpoint.host, port: endpoint.port).description)
        head.headers.add(name: "Connection", value: "close")
        channel.write(HTTPClientRequestPart.head(head), promise: nil)
        channel.writeAndFlush(HTTPClientRequestPart.end(nil), promise: nil)
        defer { deadline.cancel() }
        return try await promise.futureResult.get()
    }
}

/// Collects the response of ``MetricsPage/get(from:timeout:)``; fails its promise when the
/// connection ends first or the body passes ``MetricsPage/maximumBytes``.
private final class MetricsPageHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPClientResponsePart

    private let promise: EventLoopPromise<MetricsPage>
    private var page = MetricsPage(status: 0, body: [])
    private var done = false

    init(promise: EventLoopPromise<MetricsPage>) {
        self.promise = promise
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !self.done else { return }
        switch self.unwrapInboundIn(data) {
        case .head(let head):
            self.page.status = Int(head.status.code)
        case .body(let buffer):
            guard self.page.body.count + buffer.readableBytes <= MetricsPage.maximumBytes else {
                self.finish(.failure(BenchMetricsError("the metrics page is larger than 16 MiB")), context: context)
                return
            }
            self.page.body.append(contentsOf: buffer.readableBytesView)
        case .end:
            self.finish(.success(self.page), context: context)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        self.finish(.failure(error), context: context)
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.finish(.failure(BenchMetricsError("the connection closed before the metrics page ended")), context: context)
    }

    private func finish(_ result: Result<MetricsPage, any Error>, context: ChannelHandlerContext) {
        guard !self.done else { return }
        self.done = true
        self.promise.completeWith(result)
        context.close(promise: nil)
    }
}
