import CirrusTLS
import CirrusWire
import NIOCore
import NIOEmbedded

/// A client and a server `TLSHandler`, each on an `EmbeddedChannel`, with bytes shuttled
/// between them in memory: TLS cost without sockets.
final class InMemoryTLSPair {
    let client: EmbeddedChannel
    let server: EmbeddedChannel

    /// - Parameter framed: add the Cirrus frame codec above TLS (server encodes, client decodes).
    init(certificates: String, framed: Bool = false) throws {
        let serverContext = try TLSContext(
            configuration: .server(
                certificateChainPath: certificates + "/server.pem",
                privateKeyPath: certificates + "/server-key.pem",
                clientCATrustRootsPath: certificates + "/ca.pem",
                clientCertificateVerification: .required
            )
        )
        let clientContext = try TLSContext(
            configuration: .client(
                trustRootsPath: certificates + "/ca.pem",
                certificateChainPath: certificates + "/alice.pem",
                privateKeyPath: certificates + "/alice-key.pem"
            )
        )
        self.client = EmbeddedChannel(handler: TLSHandler(context: clientContext, serverHostname: "localhost"))
        self.server = EmbeddedChannel(handler: TLSHandler(context: serverContext))
        if framed {
            try self.client.pipeline.syncOperations.addHandler(ByteToMessageHandler(FrameDecoder()))
            try self.server.pipeline.syncOperations.addHandler(MessageToByteHandler(FrameEncoder()))
        }
        _ = try self.server.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        _ = try self.client.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        try self.shuttle()
    }

    /// Moves every pending byte across until both sides are quiet.
    func shuttle() throws {
        var moved = true
        while moved {
            moved = false
            while let bytes = try self.client.readOutbound(as: ByteBuffer.self) {
                try self.server.writeInbound(bytes)
                moved = true
            }
            while let bytes = try self.server.readOutbound(as: ByteBuffer.self) {
                try self.client.writeInbound(bytes)
                moved = true
            }
        }
    }

    /// Client sends `request`, server reads it and answers `response`, client reads that.
    func roundTrip(request: ByteBuffer, response: ByteBuffer) throws -> Int {
        try self.client.writeOutbound(request)
        try self.shuttle()
        var received = 0
        while let plaintext = try self.server.readInbound(as: ByteBuffer.self) {
            received += plaintext.readableBytes
        }
        try self.server.writeOutbound(response)
        try self.shuttle()
        while let plaintext = try self.client.readInbound(as: ByteBuffer.self) {
            received += plaintext.readableBytes
        }
        return received
    }

    /// Server streams `count` frames in one flush through encoder and TLS; the client decrypts
    /// and decodes them. Returns the frames decoded.
    func streamFrames(_ frame: Wire.Frame, count: Int) throws -> Int {
        for _ in 0..<count {
            self.server.write(frame, promise: nil)
        }
        self.server.flush()
        try self.shuttle()
        var received = 0
        while try self.client.readInbound(as: Wire.Frame.self) != nil {
            received += 1
        }
        return received
    }

    /// Server streams `count` messages of `message` to the client in one flush; returns the
    /// plaintext bytes the client read.
    func stream(_ message: ByteBuffer, count: Int) throws -> Int {
        for _ in 0..<count {
            self.server.write(message, promise: nil)
        }
        self.server.flush()
        try self.shuttle()
        var received = 0
        while let plaintext = try self.client.readInbound(as: ByteBuffer.self) {
            received += plaintext.readableBytes
        }
        return received
    }
}
