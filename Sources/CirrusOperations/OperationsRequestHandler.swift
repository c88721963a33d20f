import NIOCore
import NIOHTTP1

/// Answers one HTTP/1.1 connection of the ``OperationsEndpoint``: `GET` (or `HEAD`)
/// `/metrics`, `/healthz` and `/readyz`, and `POST /backup`; 404 for other paths, 405 for
/// other methods.
final class OperationsRequestHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let endpoint: OperationsEndpoint
    private var request: HTTPRequestHead?

    init(endpoint: OperationsEndpoint) {
        self.endpoint = endpoint
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch self.unwrapInboundIn(data) {
        case .head(let head):
            self.request = head
        case .body:
            break
        case .end:
            guard let head = self.request else { return }
            self.request = nil
            self.answer(head, context: context)
        }
    }

    private func answer(_ head: HTTPRequestHead, context: ChannelHandlerContext) {
        let path = head.uri.split(separator: "?", maxSplits: 1).first.map(String.init) ?? head.uri
        if path == "/backup" {
            guard head.method == .POST else {
                self.respond(head, status: .methodNotAllowed, body: "only POST\n", context: context)
                return
            }
            self.backup(head, context: context)
            return
        }
        guard head.method == .GET || head.method == .HEAD else {
            self.respond(head, status: .methodNotAllowed, body: "only GET and HEAD\n", context: context)
            return
        }
        switch path {
        case "/metrics":
            self.endpoint.beforeScrape()
            var body: [UInt8] = []
            self.endpoint.registry.emit(into: &body)
            self.respond(
                head, status: .ok, contentType: "text/plain; version=0.0.4; charset=utf-8", body: body, context: context)
        case "/healthz":
            self.respond(head, status: .ok, body: "ok\n", context: context)
        case "/readyz":
            let readiness = self.endpoint.readiness
            self.answerLater(head, context: context) {
                let problems = await readiness()
                return problems.isEmpty
                    ? (.ok, "text/plain; charset=utf-8", "ready\n")
                    : (.serviceUnavailable, "text/plain; charset=utf-8", problems.map { $0 + "\n" }.joined())
            }
        default:
            self.respond(head, status: .notFound, body: "not found; try /metrics, /healthz or /readyz\n", context: context)
        }
    }

    /// `POST /backup`: a backup of the data directory into the configured backup directory;
    /// answers with the file as JSON, 409 while another runs, 404 when backups are off.
    private func backup(_ head: HTTPRequestHead, context: ChannelHandlerContext) {
        guard let backup = self.endpoint.backup else {
            self.respond(
                head, status: .notFound, body: "backups are off: start cirrusd with --backup-dir DIRECTORY\n", context: context)
            return
        }
        self.answerLater(head, context: context) {
            do throws(OnlineBackup.Refusal) {
                let taken = try await backup.run()
                return (.ok, "application/json", taken.json)
            } catch {
                let status: HTTPResponseStatus = error == .busy ? .conflict : .internalServerError
                return (status, "text/plain; charset=utf-8", error.description + "\n")
            }
        }
    }

    /// Answers `head` with what `body` returns, once it has run on a task of its own.
    private func answerLater(
        _ head: HTTPRequestHead, context: ChannelHandlerContext,
        _ body: @escaping @Sendable () async -> (HTTPResponseStatus, String, String)
    ) {
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        let eventLoop = context.eventLoop
        Task {
            let (status, contentType, text) = await body()
            eventLoop.execute {
                let (handler, context) = loopBound.value
                handler.respond(head, status: status, contentType: contentType, body: Array(text.utf8), context: context)
            }
        }
    }

    private func respond(
        _ request: HTTPRequestHead, status: HTTPResponseStatus, contentType: String = "text/plain; charset=utf-8",
        body: String, context: ChannelHandlerContext
    ) {
        self.respond(request, status: status, contentType: contentType, body: Array(body.utf8), context: context)
    }

    private func respond(
        _ request: HTTPRequestHead, status: HTTPResponseStatus, contentType: String, body: [UInt8],
        context: ChannelHandlerContext
    ) {
        guard context.channel.isActive else { return }
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: contentType)
        headers.add(name: "Content-Length", value: String(body.count))
        let keepAlive = request.isKeepAlive
        if !keepAlive { headers.add(name: "Connection", value: "close") }
        let head = HTTPResponseHead(version: request.version, status: status, headers: headers)
        context.write(self.wrapOutboundOut(.head(head)), promise: nil)
        if request.method != .HEAD {
            context.write(self.wrapOutboundOut(.body(.byteBuffer(ByteBuffer(bytes: body)))), promise: nil)
        }
        let sent = context.writeAndFlush(self.wrapOutboundOut(.end(nil)))
        if !keepAlive {
            let channel = context.channel
            sent.whenComplete { _ in channel.close(promise: nil) }
        }
    }
}
