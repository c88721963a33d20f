import NIOCore
import NIOHTTP1

/// Answers one HTTP/1.1 connection of the ``OperationsEndpoint``: `GET` (or `HEAD`)
/// `/metrics`, `/healthz` and `/readyz`; 404 for other paths, 405 for other methods.
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
        guard head.method == .GET || head.method == .HEAD else {
            self.respond(head, status: .methodNotAllowed, body: "only GET and HEAD\n", context: context)
            return
        }
        let path = head.uri.split(separator: "?", maxSplits: 1).first.map(String.init) ?? head.uri
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
            let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
            let eventLoop = context.eventLoop
            Task {
                let problems = await readiness()
                eventLoop.execute {
                    let (handler, context) = loopBound.value
                    if problems.isEmpty {
                        handler.respond(head, status: .ok, body: "ready\n", context: context)
                    } else {
                        let body = problems.map { $0 + "\n" }.joined()
                        handler.respond(head, status: .serviceUnavailable, body: body, context: context)
                    }
                }
            }
        default:
            self.respond(head, status: .notFound, body: "not found; try /metrics, /healthz or /readyz\n", context: context)
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
