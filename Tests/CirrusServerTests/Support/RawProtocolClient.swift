import CirrusWire
import Foundation
import Testing

/// The raw-frame side of the conformance suite: what a second implementation written from
/// `Protos/` alone would do, with nothing from CirrusKit.
extension TestClient {
    /// Connects and says `Hello` with `maxFrameBytes` in its limits (0 = no preference); the
    /// client's own decoder then refuses anything larger than the `HelloAck` allows.
    static func conformant(
        port: Int, user: String = "alice", maxFrameBytes: UInt32 = 0, answersPings: Bool = true
    ) async throws -> (TestClient, Wire.HelloAck) {
        let client = try await TestClient.connect(
            port: port, user: user, maximumFrameBytes: maxFrameBytes == 0 ? FrameDecoder.defaultMaximumFrameBytes : Int(maxFrameBytes),
            answersPings: answersPings)
        try await client.send(Wire.Frame(streamID: 0, kind: .hello(Self.hello(maxFrameBytes: maxFrameBytes))))
        let frame = try await client.nextFrame()
        guard case .helloAck(let ack) = frame.kind else { throw UnexpectedFrame(frame: frame) }
        return (client, ack)
    }

    static func hello(maxFrameBytes: UInt32) -> Wire.Hello {
        Wire.Hello(protocolVersion: Wire.protocolVersion, clientName: "raw", limits: Wire.Limits(maxFrameBytes: maxFrameBytes))
    }

    /// Opens `request` on `streamID` in the caller's private database (or `scope`).
    func open(
        _ request: Wire.Open.Request?, streamID: UInt64, scope: Wire.DatabaseScope = .private, window: UInt32 = 100,
        operationID: String = UUID().uuidString
    ) async throws {
        let open = Wire.Open(
            operationID: operationID, databaseScope: scope, containerIdentifier: container, initialWindow: window,
            request: request)
        try await self.send(Wire.Frame(streamID: streamID, kind: .open(open)))
    }

    func cancel(streamID: UInt64, detach: Bool = false) async throws {
        try await self.send(Wire.Frame(streamID: streamID, kind: .cancel(Wire.Cancel(reason: "test", detach: detach))))
    }

    /// Reads `streamID` up to its `Complete`: the events before it and the `Complete`. Any
    /// frame of another stream fails the test.
    func untilComplete(streamID: UInt64) async throws -> (events: [Wire.Event], complete: Wire.Complete) {
        var events: [Wire.Event] = []
        while true {
            let frame = try await self.nextFrame()
            #expect(frame.streamID == streamID, "\(frame)")
            switch frame.kind {
            case .event(let event): events.append(event)
            case .persisted: continue
            case .complete(let complete): return (events, complete)
            default: throw UnexpectedFrame(frame: frame)
            }
        }
    }

    /// Proves nothing else is on its way for any stream: a `Ping` is answered by the very next
    /// frame, its `Pong`.
    func expectNothingPending(nonce: UInt64 = 7) async throws {
        try await self.send(Wire.Frame(streamID: 0, kind: .ping(Wire.Ping(nonce: nonce))))
        // (The server's own keepalive Pings are answered by the collector, not seen here.)
        let frame = try await self.nextFrame()
        #expect(frame.kind == .pong(Wire.Pong(nonce: nonce)), "expected only the Pong, got \(frame)")
    }

    /// The `ConnectionError` the server closes with.
    func expectConnectionError() async throws -> Wire.ErrorCode? {
        try await self.waitForClose()?.code
    }
}
