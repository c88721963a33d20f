import CirrusTestSupport
import CirrusWire
import Dispatch
import NIOConcurrencyHelpers
import NIOCore
import NIOEmbedded
import Testing

@testable import CirrusKit

/// The connection handler alone, on a `NIOAsyncTestingChannel`: no sockets, no TLS, no timing.
///
/// The testing channel's event loop is thread-safe, which the handler's streams need: their
/// callbacks run on dispatch queues and grant credit back through the event loop from there.
/// (An `EmbeddedChannel` here raced those grants with the test's own calls on the loop, and
/// crashed the suite under load.) Everything that touches the handler runs on the loop, through
/// ``Harness/onLoop(_:)``.
@Suite("ClientConnectionHandler")
struct ClientConnectionHandlerTests {
    struct Harness {
        let channel: NIOAsyncTestingChannel
        let handler: NIOLoopBound<ClientConnectionHandler>
        let ready: EventLoopPromise<Wire.HelloAck>
        let retried: NIOLockedValueBox<[ClientStream]>
        let draining: NIOLockedValueBox<Int>

        init(bearerToken: String? = nil) async throws {
            let loop = NIOAsyncTestingEventLoop()
            let ready = loop.makePromise(of: Wire.HelloAck.self)
            let retried = NIOLockedValueBox<[ClientStream]>([])
            let draining = NIOLockedValueBox(0)
            let added = NIOLockedValueBox<NIOLoopBound<ClientConnectionHandler>?>(nil)
            self.channel = try await NIOAsyncTestingChannel(loop: loop) { channel in
                let handler = ClientConnectionHandler(
                    hello: Wire.Hello(
                        protocolVersion: Wire.protocolVersion, clientName: "CirrusKit", clientVersion: "0.1.0",
                        bearerToken: bearerToken),
                    server: "test",
                    machine: .init(),
                    timerInterval: .seconds(3600),
                    ready: ready,
                    callbacks: .init(
                        draining: { draining.withLockedValue { $0 += 1 } },
                        retry: { streams in retried.withLockedValue { $0 += streams } }
                    )
                )
                try channel.pipeline.syncOperations.addHandler(handler)
                added.withLockedValue { $0 = NIOLoopBound(handler, eventLoop: loop) }
            }
            self.handler = try #require(added.withLockedValue { $0 })
            self.ready = ready
            self.retried = retried
            self.draining = draining
        }

        /// Runs `body` with the handler on its event loop.
        func onLoop<T: Sendable>(_ body: @escaping @Sendable (ClientConnectionHandler) throws -> T) async throws -> T {
            let handler = self.handler
            return try await self.channel.testingEventLoop.executeInContext { try body(handler.value) }
        }

        func activate() async throws {
            try await self.channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).get()
        }

        /// The next frame the handler flushed; runs the event loop first, since frames written
        /// together (`Open`, `Window`, `Cancel`) are flushed at the end of the loop's tick.
        func written() async throws -> Wire.Frame? {
            await self.channel.testingEventLoop.run()
            return try await self.channel.readOutbound(as: ClientOutboundFrame.self)?.frame
        }

        func receive(_ kind: Wire.Frame.Kind, stream: UInt64 = 0) async throws {
            try await self.channel.writeInbound(Wire.Frame(streamID: stream, kind: kind))
        }

        func open(_ stream: ClientStream, on connection: ClientConnection) async throws -> Bool {
            try await self.onLoop { $0.open(stream, on: connection) }
        }

        func handshake(limits: Wire.Limits? = nil) async throws -> ClientConnection {
            try await self.activate()
            _ = try await self.written()  // Hello
            let ack = Wire.HelloAck(protocolVersion: Wire.protocolVersion, serverName: "s", userRecordName: "_alice", limits: limits)
            try await self.receive(.helloAck(ack))
            return ClientConnection(channel: self.channel, handler: self.handler, helloAck: ack)
        }
    }

    @Test("Says Hello (name, version, token) when the channel becomes active; HelloAck makes it ready")
    func hello() async throws {
        let harness = try await Harness(bearerToken: "t0ken")
        try await harness.activate()
        let frame = try #require(try await harness.written())
        guard case .hello(let hello) = frame.kind else {
            Issue.record("expected Hello, got \(frame)")
            return
        }
        #expect(frame.streamID == 0)
        #expect(hello.protocolVersion == Wire.protocolVersion)
        #expect(hello.clientName == "CirrusKit")
        #expect(hello.bearerToken == "t0ken")
        #expect(try await harness.written() == nil)
        try await harness.receive(.helloAck(Wire.HelloAck(protocolVersion: Wire.protocolVersion, userRecordName: "_alice")))
        #expect(try await harness.ready.futureResult.get().userRecordName == "_alice")
        _ = try await harness.channel.finish()
    }

    @Test("ConnectionError NOT_AUTHENTICATED before HelloAck fails the connection as notAuthenticated")
    func refused() async throws {
        let harness = try await Harness()
        try await harness.activate()
        _ = try await harness.written()
        try await harness.receive(.error(Wire.ConnectionError(code: .notAuthenticated, message: "who are you")))
        await #expect(throws: ConnectionFailure.self) { try await harness.ready.futureResult.get() }
        do {
            _ = try await harness.ready.futureResult.get()
        } catch let failure as ConnectionFailure {
            #expect(failure.code == .notAuthenticated)
        }
        #expect(!harness.channel.isActive)
    }

    @Test("A stream: Open with its window, events delivered in order, Window after half the window is consumed")
    func streamCredit() async throws {
        let harness = try await Harness()
        let connection = try await harness.handshake()
        let queue = DispatchQueue(label: "callbacks")
        let delivered = Recorder<UInt64>()
        let completed = NIOLockedValueBox(false)
        let stream = ClientStream(open: Wire.Open(operationID: "op1"), window: 4, queue: queue) { delivery in
            switch delivery {
            case .event(let event): delivered.append(event.seq)
            case .complete: completed.withLockedValue { $0 = true }
            default: break
            }
        }
        #expect(try await harness.open(stream, on: connection))
        let open = try #require(try await harness.written())
        guard case .open(let sent) = open.kind else {
            Issue.record("expected Open, got \(open)")
            return
        }
        #expect(open.streamID == 1)
        #expect(sent.initialWindow == 4)
        #expect(sent.operationID == "op1")

        for seq in 1...2 {
            try await harness.receive(.event(Wire.Event(seq: UInt64(seq))), stream: 1)
        }
        try await eventually { delivered.count == 2 }
        // Granting credit hops back onto the event loop.
        try await eventually {
            await harness.channel.testingEventLoop.run()
            return (try? await harness.channel.readOutbound(as: ClientOutboundFrame.self)?.frame).map { frame in
                frame?.streamID == 1 && frame?.kind == .window(Wire.Window(credit: 2))
            } ?? false
        }
        try await harness.receive(.complete(Wire.Complete(lastSeq: 2)), stream: 1)
        try await eventually { completed.withLockedValue { $0 } }
        #expect(delivered.values == [1, 2])
        _ = try await harness.channel.finish()
    }

    @Test("Opens written in one event-loop tick go out together, in one flush at its end")
    func opensShareAFlush() async throws {
        let harness = try await Harness()
        let connection = try await harness.handshake()
        let streams = (1...3).map { i in
            ClientStream(open: Wire.Open(operationID: "op\(i)"), window: 4, queue: DispatchQueue(label: "q\(i)")) { _ in }
        }
        for stream in streams { #expect(try await harness.open(stream, on: connection)) }
        // Written, not flushed: nothing has reached the channel yet.
        #expect(try await harness.channel.readOutbound(as: ClientOutboundFrame.self) == nil)
        await harness.channel.testingEventLoop.run()
        var opened: [String] = []
        while let frame = try await harness.channel.readOutbound(as: ClientOutboundFrame.self)?.frame {
            if case .open(let open)? = frame.kind { opened.append(open.operationID) }
        }
        #expect(opened == ["op1", "op2", "op3"])
        _ = try await harness.channel.finish()
    }

    @Test("The events of one read burst reach the callbacks together, at its end, and earn one Window")
    func readBurst() async throws {
        let harness = try await Harness()
        let connection = try await harness.handshake()
        let queue = DispatchQueue(label: "callbacks")
        let delivered = Recorder<UInt64>()
        let stream = ClientStream(open: Wire.Open(operationID: "op1"), window: 8, queue: queue) { delivery in
            if case .event(let event) = delivery { delivered.append(event.seq) }
        }
        #expect(try await harness.open(stream, on: connection))
        _ = try await harness.written()  // Open
        let channel = harness.channel
        try await channel.testingEventLoop.executeInContext {
            for seq in 1...6 {
                channel.pipeline.syncOperations.fireChannelRead(
                    NIOAny(Wire.Frame(streamID: 1, kind: .event(Wire.Event(seq: UInt64(seq))))))
            }
        }
        queue.sync {}
        #expect(delivered.count == 0, "nothing is handed over before the burst ends")
        try await channel.testingEventLoop.executeInContext {
            channel.pipeline.syncOperations.fireChannelReadComplete()
        }
        try await eventually { delivered.count == 6 }
        // Six events consumed at once: one Window for all six (not one per half window).
        var windows: [Wire.Frame] = []
        try await eventually {
            await harness.channel.testingEventLoop.run()
            while let frame = try? await harness.channel.readOutbound(as: ClientOutboundFrame.self)?.frame {
                windows.append(frame)
            }
            return !windows.isEmpty
        }
        #expect(windows == [Wire.Frame(streamID: 1, kind: .window(Wire.Window(credit: 6)))])
        #expect(delivered.values == [1, 2, 3, 4, 5, 6])
        _ = try await harness.channel.finish()
    }

    @Test("GoAway: streams above last_stream_id go back to be retried; the connection takes no new ones")
    func goAway() async throws {
        let harness = try await Harness()
        let connection = try await harness.handshake()
        let queue = DispatchQueue(label: "callbacks")
        let streams = (0..<3).map { index in
            ClientStream(open: Wire.Open(operationID: "op\(index)"), window: 4, queue: queue) { _ in }
        }
        for stream in streams {
            #expect(try await harness.open(stream, on: connection))
            _ = try await harness.written()
        }
        try await harness.receive(.goAway(Wire.GoAway(lastStreamID: 1, code: .shuttingDown)))
        #expect(harness.retried.withLockedValue { $0.map(\.open.operationID) } == ["op1", "op2"])
        #expect(harness.draining.withLockedValue { $0 } >= 1)
        let late = ClientStream(open: Wire.Open(operationID: "late"), window: 4, queue: queue) { _ in }
        let openedLate = try await harness.open(late, on: connection)
        #expect(!openedLate)
        // The stream the server kept finishes; then the connection closes.
        try await harness.receive(.complete(Wire.Complete(lastSeq: 0)), stream: 1)
        #expect(!harness.channel.isActive)
    }

    @Test("Events beyond the granted credit close the connection with FLOW_CONTROL_VIOLATION")
    func creditViolation() async throws {
        let harness = try await Harness()
        let connection = try await harness.handshake()
        let stream = ClientStream(open: Wire.Open(operationID: "op"), window: 1, queue: DispatchQueue(label: "q")) { _ in }
        #expect(try await harness.open(stream, on: connection))
        _ = try await harness.written()
        // Both in one read burst: the first event's credit cannot have come back yet.
        let channel = harness.channel
        try await channel.testingEventLoop.executeInContext {
            for seq: UInt64 in [1, 2] {
                channel.pipeline.syncOperations.fireChannelRead(NIOAny(Wire.Frame(streamID: 1, kind: .event(Wire.Event(seq: seq)))))
            }
            channel.pipeline.syncOperations.fireChannelReadComplete()
        }
        let frame = try #require(try await harness.written())
        #expect(frame.kind == .error(Wire.ConnectionError(code: .flowControlViolation, message: "Event on stream 1 beyond the granted credit")))
        #expect(!harness.channel.isActive)
    }

    @Test("The frame encoder refuses an oversized frame on its own write only")
    func encoderLimit() throws {
        let channel = EmbeddedChannel(handler: ClientFrameEncoder(maximumFrameBytes: 64))
        let big = Wire.Frame(streamID: 1, kind: .open(Wire.Open(operationID: String(repeating: "x", count: 100))))
        #expect(throws: WireError.self) { try channel.writeOutbound(ClientOutboundFrame.frame(big)) }
        try channel.writeOutbound(ClientOutboundFrame.frame(Wire.Frame(streamID: 0, kind: .ping(Wire.Ping(nonce: 7)))))
        var buffer = try #require(try channel.readOutbound(as: ByteBuffer.self))
        var decoder = FrameDecoder()
        let frame = try #require(try decoder.decode(buffer: &buffer))
        #expect(frame.kind == .ping(Wire.Ping(nonce: 7)))
        #expect(try channel.readOutbound(as: ByteBuffer.self) == nil)
        _ = try channel.finish()
    }
}
