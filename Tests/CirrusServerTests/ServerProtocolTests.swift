import CirrusServer
import CirrusTLS
import CirrusWire
import NIOConcurrencyHelpers
import NIOCore
import Testing

@Suite("Server: Hello, Ping and streams over loopback TLS")
struct ServerProtocolTests {
    @Test func helloIsAnsweredWithTheCertificatesUser() async throws {
        try await withServer { _, port in
            let client = try await TestClient.connect(port: port, user: "alice")
            let ack = try await client.handshake()
            #expect(ack.protocolVersion == Wire.protocolVersion)
            #expect(ack.userRecordName == "_alice")
            #expect(ack.serverName == "cirrusd")
            #expect(ack.limits?.maxFrameBytes == UInt32(FrameDecoder.defaultMaximumFrameBytes))
            await client.close()
        }
    }

    @Test func eachUserIsTheirOwn() async throws {
        try await withServer { _, port in
            let bob = try await TestClient.connect(port: port, user: "bob")
            #expect(try await bob.handshake().userRecordName == "_bob")
            await bob.close()
        }
    }

    @Test func pingIsAnsweredWithPong() async throws {
        try await withServer { _, port in
            let client = try await TestClient.connect(port: port)
            _ = try await client.handshake()
            for nonce in [UInt64(1), 42, .max] {
                try await client.send(Wire.Frame(streamID: 0, kind: .ping(Wire.Ping(nonce: nonce))))
                #expect(try await client.nextFrame() == Wire.Frame(streamID: 0, kind: .pong(Wire.Pong(nonce: nonce))))
            }
            await client.close()
        }
    }

    @Test func noCertificateAndNoTokenIsNotAuthenticated() async throws {
        try await withServer { _, port in
            let client = try await TestClient.connect(port: port, user: nil)
            try await client.send(Wire.Frame(streamID: 0, kind: .hello(Wire.Hello(protocolVersion: Wire.protocolVersion))))
            let error = try await client.waitForClose()
            #expect(error?.code == .notAuthenticated)
        }
    }

    @Test func bearerTokenAuthenticates() async throws {
        try await withServer(configure: { $0.bearerTokens = ["t0ken": "_carol"] }) { _, port in
            let client = try await TestClient.connect(port: port, user: nil)
            #expect(try await client.handshake(bearerToken: "t0ken").userRecordName == "_carol")
            await client.close()
        }
    }

    @Test func wrongBearerTokenIsRefusedEvenWithACertificate() async throws {
        try await withServer(configure: { $0.bearerTokens = ["t0ken": "_carol"] }) { _, port in
            let client = try await TestClient.connect(port: port, user: "alice")
            try await client.send(
                Wire.Frame(streamID: 0, kind: .hello(Wire.Hello(protocolVersion: Wire.protocolVersion, bearerToken: "nope")))
            )
            #expect(try await client.waitForClose()?.code == .notAuthenticated)
        }
    }

    @Test func unsupportedVersionIsRefused() async throws {
        try await withServer { _, port in
            let client = try await TestClient.connect(port: port)
            try await client.send(Wire.Frame(streamID: 0, kind: .hello(Wire.Hello(protocolVersion: 999))))
            let error = try await client.waitForClose()
            #expect(error?.code == .unsupportedVersion)
            #expect(error?.message.contains("999") == true)
        }
    }

    @Test func framesBeforeHelloAreAViolation() async throws {
        try await withServer { _, port in
            let client = try await TestClient.connect(port: port)
            try await client.send(Wire.Frame(streamID: 1, kind: .open(Wire.Open(operationID: "x"))))
            #expect(try await client.waitForClose()?.code == .protocolViolation)
        }
    }

    @Test func anOperationIsAnsweredOnItsStreamAndTheConnectionStays() async throws {
        try await withServer { _, port in
            let client = try await TestClient.connect(port: port)
            _ = try await client.handshake()
            let open = Wire.Open(operationID: "op-1", initialWindow: 8, request: .fetchRecords(Wire.FetchRecordsRequest()))
            try await client.send(Wire.Frame(streamID: 1, kind: .open(open)))
            let frame = try await client.nextFrame()
            #expect(frame.streamID == 1)
            guard case .complete(let complete) = frame.kind else {
                Issue.record("expected Complete, got \(frame)")
                return
            }
            #expect(complete.error?.code == .serverRejectedRequest)
            try await client.send(Wire.Frame(streamID: 0, kind: .ping(Wire.Ping(nonce: 5))))
            #expect(try await client.nextFrame().kind == .pong(Wire.Pong(nonce: 5)))
            await client.close()
        }
    }

    /// A stream the server cannot serve is refused on that stream alone: `Complete` with an
    /// error, and the connection keeps working.
    @Test(arguments: [
        (Wire.Frame(streamID: 1, kind: .open(Wire.Open(operationID: "op-1"))), 128, Wire.ErrorCode.unknownFrameKind),
        (Wire.Frame(streamID: 1, kind: .resume(Wire.Resume(operationID: "nope", lastSeq: 3))), 128, .unknownOperation),
        (
            Wire.Frame(streamID: 1, kind: .open(Wire.Open(operationID: "op-1", request: .fetchRecords(.init())))), 0,
            .tooManyStreams
        ),
    ])
    func streamIsRefusedAlone(frame: Wire.Frame, maximumStreams: Int, expected: Wire.ErrorCode) async throws {
        try await withServer(configure: { $0.connection.maximumConcurrentStreams = maximumStreams }) { _, port in
            let client = try await TestClient.connect(port: port)
            _ = try await client.handshake()
            try await client.send(frame)
            let reply = try await client.nextFrame()
            guard case .complete(let complete) = reply.kind else {
                Issue.record("expected Complete, got \(reply)")
                return
            }
            #expect(reply.streamID == frame.streamID)
            #expect(complete.error?.code == expected)
            try await client.send(Wire.Frame(streamID: 0, kind: .ping(Wire.Ping(nonce: 8))))
            #expect(try await client.nextFrame().kind == .pong(Wire.Pong(nonce: 8)))
            await client.close()
        }
    }

    @Test func gracefulShutdownSaysGoAway() async throws {
        try await withServer { server, port in
            let client = try await TestClient.connect(port: port)
            _ = try await client.handshake()
            await server.shutdownGracefully()
            let frame = try await client.nextFrame()
            guard case .goAway(let goAway) = frame.kind else {
                Issue.record("expected GoAway, got \(frame)")
                return
            }
            #expect(goAway.code == .shuttingDown)
            #expect(try await client.waitForClose() == nil)
        }
    }

    @Test func oversizeFrameGetsAnErrorAndOthersKeepWorking() async throws {
        try await withServer { server, port in
            let bystander = try await TestClient.connect(port: port, user: "bob")
            _ = try await bystander.handshake()

            let raw = try await RawTLSClient.connect(port: port)
            try await raw.write([0xFF, 0xFF, 0xFF, 0xFF, 1, 2, 3])
            let frames = try await raw.framesUntilClose()
            guard case .error(let error) = frames.last?.kind else {
                Issue.record("expected an Error frame, got \(frames)")
                return
            }
            #expect(error.code == .frameTooLarge)

            try await bystander.send(Wire.Frame(streamID: 0, kind: .ping(Wire.Ping(nonce: 9))))
            #expect(try await bystander.nextFrame().kind == .pong(Wire.Pong(nonce: 9)))
            await bystander.close()
        }
    }

    @Test func garbageBodyGetsAnError() async throws {
        try await withServer { _, port in
            let raw = try await RawTLSClient.connect(port: port)
            try await raw.write([0, 0, 0, 8] + Array(repeating: 0xFF, count: 8))
            let frames = try await raw.framesUntilClose()
            guard case .error(let error) = frames.last?.kind else {
                Issue.record("expected an Error frame, got \(frames)")
                return
            }
            #expect(error.code == .malformedFrame)
        }
    }

    @Test func clientThatNeverReadsIsNotBufferedWithoutBound() async throws {
        // End to end over real sockets: the client's writes stall once the server stops taking
        // its Pings. (The queued-control-frame limit, tested with the state machine, would also
        // cut this peer off; it is lifted here. ConnectionHandlerTests checks the read hold
        // itself deterministically; in a debug build the server is slow enough that this test
        // alone cannot tell the hold from slowness.)
        try await withServer(configure: { $0.connection.maximumQueuedControlFrames = .max }) { server, port in
            let raw = try await RawTLSClient.connect(port: port, receiveBufferBytes: 64 * 1024)
            var hello = ByteBuffer()
            try FrameEncoder.encode(
                Wire.Frame(streamID: 0, kind: .hello(Wire.Hello(protocolVersion: Wire.protocolVersion))),
                into: &hello
            )
            try await raw.write(Array(hello.readableBytesView))
            try await raw.waitForBytes()
            // Stop reading, then ping as fast as the server takes it. Every Ping asks for a
            // Pong the server cannot deliver: it must stop reading from us rather than keep
            // them all. 10,000 batches of 2,000 Pings are ~200 MB; the kernel buffers between
            // us hold ~40 MB (the server's receive buffer autotunes up to 32 MiB here).
            try await raw.channel.setOption(.autoRead, value: false).get()
            var batch = ByteBuffer()
            for nonce in 0..<2_000 {
                try FrameEncoder.encode(Wire.Frame(streamID: 0, kind: .ping(Wire.Ping(nonce: UInt64(nonce)))), into: &batch)
            }
            // Each write is awaited: it completes only once the kernel took the bytes, so
            // `written` counts what really left this process.
            let written = NIOLockedValueBox(0)
            let channel = raw.channel
            let writer = Task {
                for _ in 0..<10_000 {
                    try await channel.writeAndFlush(batch)
                    written.withLockedValue { $0 += 1 }
                }
            }
            // Stalled = no write completed for 40 polls in a row.
            var last = -1
            var stalledPolls = 0
            while stalledPolls < 40 {
                try await Task.sleep(for: .milliseconds(50))
                let now = written.withLockedValue { $0 }
                if now == 10_000 { break }
                stalledPolls = now == last ? stalledPolls + 1 : 0
                last = now
            }
            await raw.close()
            _ = await writer.result
            let sent = written.withLockedValue { $0 }
            #expect(sent < 10_000, "the server stopped reading from a client that does not read")
            await raw.close()

            let other = try await TestClient.connect(port: port, user: "bob")
            _ = try await other.handshake()
            try await other.send(Wire.Frame(streamID: 0, kind: .ping(Wire.Ping(nonce: 1))))
            #expect(try await other.nextFrame().kind == .pong(Wire.Pong(nonce: 1)))
            await other.close()
        }
    }
}

