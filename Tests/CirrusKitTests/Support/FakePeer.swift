import CirrusTLS
import CirrusTestSupport
import CirrusWire
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// How the fake peer answers one `Open`.
struct FakeReply: Sendable {
    /// Event payloads, sent with seq 1, 2, 3 … as credit allows.
    var payloads: [Wire.Event.Payload] = []
    /// `Complete.error` after the events; nil = success.
    var error: Wire.OperationError? = nil
    /// `Complete.result` (a query's cursor …).
    var result: Wire.Complete.Result? = nil
    /// After the events, send nothing more (until the client cancels).
    var hang = false
    /// Send every event at once, ignoring credit (a broken server).
    var ignoreCredit = false
    /// Close the connection instead of answering.
    var closeConnection = false
    /// Answer with `GoAway` naming the previous stream, then close.
    var goAway = false
    /// Send `Persisted` before the events (a long-lived operation).
    var persisted = false
    /// The seq before the first payload (a `Resume` continues the operation's numbering).
    var startSeq: UInt64 = 0
    /// Close the connection once this many events went out on the stream (0: right after
    /// `Persisted`, before any event).
    var closeAfterEvents: Int? = nil
    /// Close the connection when a plain `Cancel` arrives, without the `Complete` that confirms
    /// it (the server died, or the connection did, before the `Cancel` was read).
    var closeOnCancel = false
}

/// A Cirrus server stand-in over the real TLS and frame codec that answers each `Open` with a
/// scripted reply, honouring (or not) the client's flow-control credit, and records what the
/// client sent.
final class FakePeer: Sendable {
    struct Log: Sendable {
        var opens: [Wire.Open] = []
        var cancels: [UInt64] = []
        var windowCredit: UInt64 = 0
        var eventsSent = 0
        var connections = 0
        var hellos: [Wire.Hello] = []
        var pongs: [UInt64] = []
        /// `Ping`s from the client.
        var pings = 0
        /// Streams open now, and the most ever open at once.
        var openStreams = 0
        var maximumOpenStreams = 0
        var resumes: [Wire.Resume] = []
        /// Every `Cancel` with its stream ID.
        var cancelFrames: [(streamID: UInt64, cancel: Wire.Cancel)] = []
        /// Stream IDs and kinds of the `Open`/`Resume` frames, in order ("open"/"resume").
        var starts: [(streamID: UInt64, kind: String, connection: Int)] = []
        /// Connections that ended.
        var disconnects = 0
    }

    /// Connection-level behaviour.
    struct Behaviour: Sendable {
        /// Answer the client's `Ping`s.
        var answerPings = true
        /// Send a `Ping` right after `HelloAck`.
        var pingAfterHello = false
        /// `HelloAck.limits.max_concurrent_streams`.
        var maximumConcurrentStreams: UInt32 = 100
        /// `HelloAck.limits.ping_interval_ms` (0 = none).
        var pingIntervalMs: UInt32 = 0
    }

    let port: Int
    private let channel: any Channel
    let log: NIOLockedValueBox<Log>

    private init(port: Int, channel: any Channel, log: NIOLockedValueBox<Log>) {
        self.port = port
        self.channel = channel
        self.log = log
    }

    var opens: [Wire.Open] { self.log.withLockedValue { $0.opens } }
    var resumes: [Wire.Resume] { self.log.withLockedValue { $0.resumes } }
    var cancelFrames: [(streamID: UInt64, cancel: Wire.Cancel)] { self.log.withLockedValue { $0.cancelFrames } }

    /// Starts listening on a free loopback port; `reply` decides the answer to each `Open`
    /// and `resume` to each `Resume` (the second argument counts connections from 1).
    static func start(
        behaviour: Behaviour = Behaviour(),
        reply: @escaping @Sendable (Wire.Open, Int) -> FakeReply = { _, _ in FakeReply() },
        resume: @escaping @Sendable (Wire.Resume, Int) -> FakeReply = { _, _ in
            FakeReply(error: Wire.OperationError(code: .unknownOperation, message: "no such operation"))
        }
    ) async throws -> FakePeer {
        let tls = try TLSContext(configuration: TestCertificates.serverTLS())
        let log = NIOLockedValueBox(Log())
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                let index = log.withLockedValue { log -> Int in
                    log.connections += 1
                    return log.connections
                }
                return channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    try sync.addHandler(TLSHandler(context: tls))
                    try sync.addHandler(ByteToMessageHandler(FrameDecoder()))
                    try sync.addHandler(MessageToByteHandler(FrameEncoder()))
                    try sync.addHandler(FakePeerHandler(connection: index, log: log, behaviour: behaviour, reply: reply, resume: resume))
                }
            }
            .bind(host: "127.0.0.1", port: 0)
            .get()
        guard let port = channel.localAddress?.port else { throw TestTimeout() }
        return FakePeer(port: port, channel: channel, log: log)
    }

    func stop() async {
        try? await self.channel.close()
    }
}

private final class FakePeerHandler: ChannelInboundHandler {
    typealias InboundIn = Wire.Frame
    typealias OutboundOut = Wire.Frame

    private struct Stream {
        var pending: [Wire.Event.Payload]
        var credit: UInt64
        var seq: UInt64 = 0
        var reply: FakeReply
        var sent = 0
    }

    private let connection: Int
    private let log: NIOLockedValueBox<FakePeer.Log>
    private let reply: @Sendable (Wire.Open, Int) -> FakeReply
    private let resume: @Sendable (Wire.Resume, Int) -> FakeReply
    private let behaviour: FakePeer.Behaviour
    private var streams: [UInt64: Stream] = [:]

    init(
        connection: Int,
        log: NIOLockedValueBox<FakePeer.Log>,
        behaviour: FakePeer.Behaviour,
        reply: @escaping @Sendable (Wire.Open, Int) -> FakeReply,
        resume: @escaping @Sendable (Wire.Resume, Int) -> FakeReply
    ) {
        self.connection = connection
        self.log = log
        self.behaviour = behaviour
        self.reply = reply
        self.resume = resume
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = self.unwrapInboundIn(data)
        switch frame.kind {
        case .hello(let hello):
            self.log.withLockedValue { $0.hellos.append(hello) }
            let ack = Wire.HelloAck(
                protocolVersion: Wire.protocolVersion,
                serverName: "fake",
                userRecordName: "_fake",
                limits: Wire.Limits(
                    maxFrameBytes: 4 << 20,
                    maxConcurrentStreams: self.behaviour.maximumConcurrentStreams,
                    initialStreamWindow: 16,
                    pingIntervalMs: self.behaviour.pingIntervalMs,
                    maxItemsPerOperation: 400
                )
            )
            context.writeAndFlush(self.wrapOutboundOut(Wire.Frame(streamID: 0, kind: .helloAck(ack))), promise: nil)
            if self.behaviour.pingAfterHello {
                context.writeAndFlush(self.wrapOutboundOut(Wire.Frame(streamID: 0, kind: .ping(Wire.Ping(nonce: 42)))), promise: nil)
            }
        case .open(let open):
            self.log.withLockedValue {
                $0.opens.append(open)
                $0.starts.append((frame.streamID, "open", self.connection))
            }
            let reply = self.reply(open, self.connection)
            self.start(frame.streamID, operationID: open.operationID, window: open.initialWindow, reply: reply, context: context)
        case .resume(let resume):
            self.log.withLockedValue {
                $0.resumes.append(resume)
                $0.starts.append((frame.streamID, "resume", self.connection))
            }
            let reply = self.resume(resume, self.connection)
            self.start(frame.streamID, operationID: resume.operationID, window: resume.initialWindow, reply: reply, context: context)
        case .window(let window):
            self.log.withLockedValue { $0.windowCredit += UInt64(window.credit) }
            self.streams[frame.streamID]?.credit += UInt64(window.credit)
            self.pump(frame.streamID, context: context)
        case .cancel(let cancel):
            self.log.withLockedValue {
                $0.cancels.append(frame.streamID)
                $0.cancelFrames.append((frame.streamID, cancel))
            }
            guard let stream = self.streams.removeValue(forKey: frame.streamID) else { return }
            self.log.withLockedValue { $0.openStreams -= 1 }
            guard !cancel.detach, !cancel.completionAcknowledged else { return }
            if stream.reply.closeOnCancel {
                context.close(promise: nil)
                return
            }
            // As the server does: a plain Cancel ends with the one Complete that confirms it.
            let error = Wire.OperationError(code: .operationCancelled, message: "the operation was cancelled")
            let complete = Wire.Complete(lastSeq: stream.seq, error: error)
            context.writeAndFlush(self.wrapOutboundOut(Wire.Frame(streamID: frame.streamID, kind: .complete(complete))), promise: nil)
        case .pong(let pong):
            self.log.withLockedValue { $0.pongs.append(pong.nonce) }
        case .ping(let ping):
            self.log.withLockedValue { $0.pings += 1 }
            guard self.behaviour.answerPings else { return }
            context.writeAndFlush(self.wrapOutboundOut(Wire.Frame(streamID: 0, kind: .pong(Wire.Pong(nonce: ping.nonce)))), promise: nil)
        default:
            break
        }
    }

    /// Answers an `Open` or `Resume` on `streamID` with `reply`.
    private func start(_ streamID: UInt64, operationID: String, window: UInt32, reply: FakeReply, context: ChannelHandlerContext) {
        if reply.closeConnection {
            context.close(promise: nil)
            return
        }
        if reply.goAway {
            let goAway = Wire.GoAway(lastStreamID: streamID - 1, code: .shuttingDown, reason: "draining")
            context.writeAndFlush(self.wrapOutboundOut(Wire.Frame(streamID: 0, kind: .goAway(goAway))), promise: nil)
            return
        }
        self.log.withLockedValue {
            $0.openStreams += 1
            $0.maximumOpenStreams = max($0.maximumOpenStreams, $0.openStreams)
        }
        let credit = UInt64(window == 0 ? 16 : window)
        if reply.persisted {
            let persisted = Wire.Persisted(operationID: operationID)
            context.write(self.wrapOutboundOut(Wire.Frame(streamID: streamID, kind: .persisted(persisted))), promise: nil)
        }
        self.streams[streamID] = Stream(pending: reply.payloads, credit: credit, seq: reply.startSeq, reply: reply)
        self.pump(streamID, context: context)
    }

    private func pump(_ streamID: UInt64, context: ChannelHandlerContext) {
        guard var stream = self.streams[streamID] else { return }
        if stream.reply.closeAfterEvents == 0 {
            self.streams[streamID] = nil
            context.flush()
            context.close(promise: nil)
            return
        }
        while !stream.pending.isEmpty, stream.credit > 0 || stream.reply.ignoreCredit {
            stream.seq += 1
            if stream.credit > 0 { stream.credit -= 1 }
            let event = Wire.Event(seq: stream.seq, payload: stream.pending.removeFirst())
            self.log.withLockedValue { $0.eventsSent += 1 }
            context.write(self.wrapOutboundOut(Wire.Frame(streamID: streamID, kind: .event(event))), promise: nil)
            stream.sent += 1
            if let limit = stream.reply.closeAfterEvents, stream.sent >= limit {
                self.streams[streamID] = nil
                context.flush()
                context.close(promise: nil)
                return
            }
        }
        if stream.pending.isEmpty, !stream.reply.hang {
            let complete = Wire.Complete(lastSeq: stream.seq, error: stream.reply.error, result: stream.reply.result)
            context.write(self.wrapOutboundOut(Wire.Frame(streamID: streamID, kind: .complete(complete))), promise: nil)
            self.streams.removeValue(forKey: streamID)
            self.log.withLockedValue { $0.openStreams -= 1 }
        } else {
            self.streams[streamID] = stream
        }
        context.flush()
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.log.withLockedValue { $0.disconnects += 1 }
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}
