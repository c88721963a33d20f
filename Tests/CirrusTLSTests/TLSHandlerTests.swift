import CirrusTLS
import NIOCore
import NIOEmbedded
import Testing

/// TLS between two EmbeddedChannels, no sockets.
@Suite struct TLSHandlerTests {
    @Test func handshakeNegotiatesTLS13AndALPNAndSeesTheClientCertificate() throws {
        let pair = try InMemoryPair()
        try pair.handshake()

        let server = try #require(pair.serverRecorder.handshake)
        let client = try #require(pair.clientRecorder.handshake)
        #expect(server.negotiatedProtocol == "cirrus/1")
        #expect(client.negotiatedProtocol == "cirrus/1")
        #expect(server.protocolVersion == "TLSv1.3")
        #expect(client.protocolVersion == "TLSv1.3")
        #expect(client.cipherSuite == server.cipherSuite)
        #expect(server.peerCertificate?.subjectCommonName == "alice")
        #expect(server.peerCertificate?.subject == "CN=alice")
        #expect(client.peerCertificate?.subjectCommonName == "localhost")
        #expect(client.peerCertificate?.subject == "CN=localhost,O=Cirrus Development")
        #expect(client.peerCertificate?.derBytes.first == 0x30)  // a DER SEQUENCE
        #expect(pair.serverTLS.handshakeResult == server)
        #expect(pair.clientTLS.handshakeResult == client)
        #expect(pair.serverRecorder.sawNIOHandshakeEvent)
        #expect(pair.clientRecorder.errors.isEmpty)
        #expect(pair.serverRecorder.errors.isEmpty)
    }

    @Test func aServerThatDoesNotKeepThePeerCertificateStillFiresIt() throws {
        let pair = try InMemoryPair(keepsPeerCertificate: false)
        try pair.handshake()
        let fired = try #require(pair.serverRecorder.handshake)
        #expect(fired.peerCertificate?.subjectCommonName == "alice")
        let kept = try #require(pair.serverTLS.handshakeResult)
        #expect(kept.peerCertificate == nil)
        #expect(kept.negotiatedProtocol == "cirrus/1")
        // Data still flows once it is forgotten.
        pair.clientWrite(Array("ping".utf8))
        try interactInMemory(pair.client, pair.server)
        #expect(pair.serverRecorder.received == Array("ping".utf8))
    }

    @Test func dataFlowsBothWays() throws {
        let pair = try InMemoryPair()
        try pair.handshake()

        pair.clientWrite(Array("ping".utf8))
        try interactInMemory(pair.client, pair.server)
        #expect(pair.serverRecorder.received == Array("ping".utf8))

        pair.serverWrite(Array("pong".utf8))
        try interactInMemory(pair.client, pair.server)
        #expect(pair.clientRecorder.received == Array("pong".utf8))
    }

    @Test func writesBeforeTheHandshakeAreSentAfterIt() throws {
        let pair = try InMemoryPair()
        pair.clientWrite(Array("early ".utf8))
        try pair.connect()
        pair.clientWrite(Array("bird".utf8))
        #expect(pair.clientTLS.handshakeResult == nil)
        try interactInMemory(pair.client, pair.server)

        #expect(pair.serverRecorder.received == Array("early bird".utf8))
    }

    @Test func smallWritesAreCoalescedUntilFlush() throws {
        let pair = try InMemoryPair()
        try pair.handshake()

        for index in 0..<100 {
            pair.clientWrite([UInt8(index)], flush: false)
        }
        #expect(try pair.client.readOutbound(as: ByteBuffer.self) == nil)
        pair.client.flush()

        let ciphertext = try #require(try pair.client.readOutbound(as: ByteBuffer.self))
        #expect(try pair.client.readOutbound(as: ByteBuffer.self) == nil)
        // One TLS 1.3 record: 5 bytes of header, 100 of data, 1 of type, 16 of tag.
        #expect(ciphertext.readableBytes == 122)
        try pair.server.writeInbound(ciphertext)
        #expect(pair.serverRecorder.received == (0..<100).map { UInt8($0) })
        #expect(pair.serverRecorder.readCount == 1)
    }

    @Test func oneMebibyteBothWays() throws {
        let pair = try InMemoryPair()
        try pair.handshake()
        let payload = pattern(1 << 20)

        pair.clientWrite(payload)
        pair.serverWrite(payload.reversed())
        try interactInMemory(pair.client, pair.server)

        #expect(pair.serverRecorder.received.count == payload.count)
        #expect(pair.serverRecorder.received == payload)
        #expect(pair.clientRecorder.received == payload.reversed())
    }

    @Test func oneLargeWriteLeavesInSlicesAndArrivesWhole() throws {
        let pair = try InMemoryPair()
        try pair.handshake()
        let payload = pattern(3 << 20)
        let written = pair.client.eventLoop.makePromise(of: Void.self)
        pair.client.writeAndFlush(ByteBuffer(bytes: payload), promise: written)
        var pieces: [ByteBuffer] = []
        while let piece = try pair.client.readOutbound(as: ByteBuffer.self) {
            pieces.append(piece)
        }
        try written.futureResult.wait()
        // The memory BIO is drained every 256 KiB of ciphertext, so the write leaves in
        // pieces of about that size, never as one buffer the size of the whole write.
        #expect(pieces.count >= 10, "\(pieces.count) pieces")
        #expect(pieces.allSatisfy { $0.readableBytes < 600 * 1_024 }, "\(pieces.map(\.readableBytes).max() ?? 0) bytes")
        for piece in pieces {
            try pair.server.writeInbound(piece)
        }
        #expect(pair.serverRecorder.received == payload)
    }

    @Test func writePromisesCompleteWhenTheCiphertextIsWritten() throws {
        let pair = try InMemoryPair()
        try pair.handshake()
        let first = pair.client.eventLoop.makePromise(of: Void.self)
        let second = pair.client.eventLoop.makePromise(of: Void.self)
        pair.client.write(pair.client.allocator.buffer(string: "a"), promise: first)
        pair.client.writeAndFlush(pair.client.allocator.buffer(string: "b"), promise: second)
        try first.futureResult.wait()
        try second.futureResult.wait()
    }

    @Test func clientCloseSendsCloseNotify() throws {
        let pair = try InMemoryPair()
        try pair.handshake()
        pair.clientWrite(Array("bye".utf8))

        pair.client.close(promise: nil)
        try interactInMemory(pair.client, pair.server)

        #expect(pair.serverRecorder.received == Array("bye".utf8))
        #expect(pair.serverRecorder.sawShutdownCompleted)
        #expect(pair.serverRecorder.isInactive)
        #expect(pair.clientRecorder.isInactive)
        #expect(pair.serverRecorder.errors.isEmpty)
        #expect(pair.clientRecorder.errors.isEmpty)
    }

    @Test func serverCloseSendsCloseNotify() throws {
        let pair = try InMemoryPair()
        try pair.handshake()

        pair.server.close(promise: nil)
        try interactInMemory(pair.client, pair.server)

        #expect(pair.clientRecorder.sawShutdownCompleted)
        #expect(pair.clientRecorder.isInactive)
        #expect(pair.serverRecorder.errors.isEmpty)
        #expect(pair.clientRecorder.errors.isEmpty)
    }

    @Test func closeWithoutCloseNotifyIsAnUnexpectedEOF() throws {
        let pair = try InMemoryPair()
        try pair.handshake()

        pair.client.pipeline.fireChannelInactive()

        #expect(pair.clientRecorder.tlsErrors.map(\.code) == [.unexpectedEOF])
    }

    @Test func writesAfterCloseFail() throws {
        let pair = try InMemoryPair()
        try pair.handshake()
        pair.client.close(promise: nil)

        let promise = pair.client.eventLoop.makePromise(of: Void.self)
        pair.client.writeAndFlush(pair.client.allocator.buffer(string: "late"), promise: promise)
        #expect(throws: (any Error).self) { try promise.futureResult.wait() }
    }

    @Test func aFailedWriteWhoseCallbackClosesTheChannelDoesNotReenterThePendingWrites() throws {
        // Writes wait for the handshake. Closing fails them; the first one's callback closes the
        // channel again, which reaches this handler's close and channelInactive while the
        // outer close is still failing writes (a debug build traps on the overlapping access).
        let pair = try InMemoryPair()
        try pair.connect()
        let first = pair.client.eventLoop.makePromise(of: Void.self)
        let second = pair.client.eventLoop.makePromise(of: Void.self)
        let client = NIOLoopBound(pair.client, eventLoop: pair.client.eventLoop)
        first.futureResult.whenFailure { _ in client.value.close(promise: nil) }
        pair.client.writeAndFlush(pair.client.allocator.buffer(string: "one"), promise: first)
        pair.client.writeAndFlush(pair.client.allocator.buffer(string: "two"), promise: second)
        #expect(pair.clientTLS.handshakeResult == nil)
        pair.client.close(promise: nil)
        #expect(throws: (any Error).self) { try first.futureResult.wait() }
        #expect(throws: (any Error).self) { try second.futureResult.wait() }
        #expect(!pair.client.isActive)
    }

    @Test func noCommonApplicationProtocolIsRefused() throws {
        var client = Certs.clientConfiguration()
        client.applicationProtocols = ["other/1"]
        let pair = try InMemoryPair(client: client)
        try pair.handshake()

        let serverError = try #require(pair.serverRecorder.tlsErrors.first)
        let clientError = try #require(pair.clientRecorder.tlsErrors.first)
        #expect(serverError.code == .noApplicationProtocol)
        #expect(clientError.code == .noApplicationProtocol)
        #expect(pair.clientRecorder.handshake == nil)
        #expect(pair.serverRecorder.handshake == nil)
        #expect(pair.clientRecorder.isInactive)
        #expect(pair.serverRecorder.isInactive)
    }

    @Test func clientWithoutALPNIsRefused() throws {
        var client = Certs.clientConfiguration()
        client.applicationProtocols = []
        let pair = try InMemoryPair(client: client)
        try pair.handshake()

        let serverError = try #require(pair.serverRecorder.tlsErrors.first)
        let clientError = try #require(pair.clientRecorder.tlsErrors.first)
        #expect(serverError.code == .noApplicationProtocol)
        // The client hears the server's no_application_protocol alert.
        #expect(clientError.code == .noApplicationProtocol)
        #expect(pair.serverRecorder.handshake == nil)
        #expect(pair.clientRecorder.handshake == nil)
        #expect(pair.serverRecorder.isInactive)
    }

    @Test func serverWithoutALPNServesAClientWithout() throws {
        var server = Certs.serverConfiguration()
        server.applicationProtocols = []
        var client = Certs.clientConfiguration()
        client.applicationProtocols = []
        let pair = try InMemoryPair(server: server, client: client)
        try pair.handshake()

        #expect(pair.serverRecorder.handshake?.negotiatedProtocol == nil)
        #expect(pair.clientRecorder.handshake != nil)
    }

    @Test func garbageFromThePeerFailsTheHandshake() throws {
        let pair = try InMemoryPair()
        try pair.server.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 443)).wait()

        try pair.server.writeInbound(pair.server.allocator.buffer(string: "GET / HTTP/1.1\r\n\r\n"))

        let error = try #require(pair.serverRecorder.tlsErrors.first)
        #expect(error.code == .handshakeFailed)
        #expect(!error.openSSLErrors.isEmpty)
        #expect(pair.serverRecorder.isInactive)
    }

    @Test func missingServerHostnameIsAConfigurationError() throws {
        let context = try TLSContext(configuration: Certs.clientConfiguration())
        let recorder = Recorder()
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.addHandlers([TLSHandler(context: context), recorder])
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 443)).wait()

        let error = try #require(recorder.tlsErrors.first)
        #expect(error.code == .configuration)
        #expect(error.message.contains("serverHostname"))
        #expect(!channel.isActive)
        _ = try channel.finish(acceptAlreadyClosed: true)
    }
}

/// How reads are delivered and how a connection ends.
@Suite struct TLSHandlerReadTests {
    @Test func manyRecordsInOneReadAreOneChannelRead() throws {
        let pair = try InMemoryPair()
        try pair.handshake()
        var ciphertext = pair.client.allocator.buffer(capacity: 0)
        for index in 0..<10 {
            pair.clientWrite([UInt8(index)])
            var record = try #require(try pair.client.readOutbound(as: ByteBuffer.self))
            ciphertext.writeBuffer(&record)
        }
        let readCompletesBefore = pair.serverRecorder.readCompleteCount

        try pair.server.writeInbound(ciphertext)

        #expect(pair.serverRecorder.received == (0..<10).map { UInt8($0) })
        #expect(pair.serverRecorder.readCount == 1)
        #expect(pair.serverRecorder.readCompleteCount == readCompletesBefore + 1)
    }

    @Test func recordSplitAcrossReadsIsDeliveredWhole() throws {
        let pair = try InMemoryPair()
        try pair.handshake()
        pair.clientWrite(Array("split record".utf8))
        var ciphertext = try #require(try pair.client.readOutbound(as: ByteBuffer.self))

        while let byte = ciphertext.readSlice(length: 1) {
            try pair.server.writeInbound(byte)
        }

        #expect(pair.serverRecorder.received == Array("split record".utf8))
        #expect(pair.serverRecorder.readCount == 1)
    }

    @Test func dataAndCloseNotifyInOneReadAreBothDelivered() throws {
        let pair = try InMemoryPair()
        try pair.handshake()
        pair.clientWrite(Array("last words".utf8))
        pair.client.close(promise: nil)
        var ciphertext = pair.client.allocator.buffer(capacity: 0)
        while var buffer = try pair.client.readOutbound(as: ByteBuffer.self) {
            ciphertext.writeBuffer(&buffer)
        }

        try pair.server.writeInbound(ciphertext)

        #expect(pair.serverRecorder.received == Array("last words".utf8))
        #expect(pair.serverRecorder.sawShutdownCompleted)
        #expect(!pair.server.isActive)
        #expect(pair.serverRecorder.errors.isEmpty)
    }

    @Test func garbageAfterTheHandshakeIsAnError() throws {
        let pair = try InMemoryPair()
        try pair.handshake()

        try pair.server.writeInbound(pair.server.allocator.buffer(bytes: [0x17, 0x03, 0x03, 0x00, 0x05, 1, 2, 3, 4, 5]))

        let error = try #require(pair.serverRecorder.tlsErrors.first)
        #expect(error.code == .ioFailure || error.code == .alertReceived)
        #expect(!error.openSSLErrors.isEmpty)
        #expect(!pair.server.isActive)
        // The alert OpenSSL made reaches the client, which reports it.
        try interactInMemory(pair.client, pair.server)
        #expect(pair.clientRecorder.tlsErrors.first?.code == .alertReceived)
    }

    @Test func finishingBothChannelsReleasesThemCleanly() throws {
        let pair = try InMemoryPair()
        try pair.handshake()
        pair.clientWrite(Array("in flight".utf8))

        _ = try pair.client.finish(acceptAlreadyClosed: true)
        _ = try pair.server.finish(acceptAlreadyClosed: true)

        #expect(pair.clientRecorder.isInactive)
        #expect(pair.serverRecorder.isInactive)
    }

    @Test func tearingDownMidHandshakeIsSafe() throws {
        let pair = try InMemoryPair()
        try pair.connect()
        pair.clientWrite(Array("never sent".utf8))

        _ = try pair.client.finish(acceptAlreadyClosed: true)
        _ = try pair.server.finish(acceptAlreadyClosed: true)
    }
}
