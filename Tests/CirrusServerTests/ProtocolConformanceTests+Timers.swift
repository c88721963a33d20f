import CirrusServer
import CirrusTestSupport
import CirrusWire
import Foundation
import NIOCore
import Testing

/// The rows of frame.proto's "what a failure ends" that depend on time or on the server's
/// state: the keepalive timeout, the cancel rate, `Open` after `GoAway` (HANDSHAKE_TIMEOUT is
/// in ``ConnectionHandlerTests``: over TLS, a loaded machine may not finish the TLS handshake
/// before a short timeout, and the error then has no channel to go out on). The server's
/// timers are made short here; the test itself only waits, with generous deadlines.
@Suite("Protocol conformance: timers, rate limits and draining")
struct TimedConformanceTests {
    @Test func anUnansweredPingIsAnIdleTimeout() async throws {
        try await withServer(configure: {
            $0.connection.keepaliveInterval = .milliseconds(300)
            $0.connection.keepaliveTimeout = .milliseconds(300)
            $0.timerInterval = .milliseconds(100)
        }) { _, port in
            let (client, _) = try await TestClient.conformant(port: port, answersPings: false)
            // Never answer the server's Ping.
            #expect(try await client.waitForClose(timeout: .seconds(30))?.code == .idleTimeout)
        }
    }

    @Test func answeredPingsKeepAQuietConnectionOpen() async throws {
        try await withServer(configure: {
            // A Ping every 300 ms; the Pong may take a loaded machine up to 20 s.
            $0.connection.keepaliveInterval = .milliseconds(300)
            $0.connection.keepaliveTimeout = .seconds(20)
            $0.timerInterval = .milliseconds(100)
        }) { _, port in
            // The test client answers the server's Pings as a client does (and as every other
            // test relies on when a loaded machine makes it wait longer than the interval).
            let (client, _) = try await TestClient.conformant(port: port)
            try await eventually(timeout: .seconds(120)) { client.collector.pingsAnswered >= 3 }
            // Still open, with nothing else for it: its own Ping is answered by the next frame.
            try await client.expectNothingPending()
            await client.close()
        }
    }

    @Test func cancellingFasterThanTheRateIsRateLimited() async throws {
        let gate = Gate()
        try await withServer(configure: {
            $0.executor = SteppedExecutor(count: 1, pauseAfter: 1, gate: gate)
            // A burst of five and no refill, so a slow loop cannot earn tokens back.
            $0.connection.cancelBurst = 5
            $0.connection.cancelsPerSecond = 0
        }) { _, port in
            defer { gate.open() }
            let (client, _) = try await TestClient.conformant(port: port)
            // All in one burst: the server may close before the last ones are written.
            for streamID in stride(from: UInt64(1), through: 21, by: 2) {
                let open = Wire.Open(operationID: "op-\(streamID)", databaseScope: .private, request: conformanceFetch)
                _ = client.channel.write(Wire.Frame(streamID: streamID, kind: .open(open)))
                _ = client.channel.write(Wire.Frame(streamID: streamID, kind: .cancel(Wire.Cancel(reason: "churn"))))
            }
            client.channel.flush()
            #expect(try await client.waitForClose(timeout: .seconds(30))?.code == .rateLimited)
        }
    }

    @Test func anOpenAfterGoAwayIsRefusedOnItsStreamAndTheOthersFinish() async throws {
        let gate = Gate()
        try await withServer(configure: {
            $0.executor = SteppedExecutor(count: 3, pauseAfter: 1, gate: gate)
            // Longer than a loaded machine takes to finish the first stream: the drain must end
            // with its last Complete, not with the grace period.
            $0.shutdownGracePeriod = .seconds(120)
        }) { server, port in
            defer { gate.open() }
            let (client, _) = try await TestClient.conformant(port: port)
            try await client.open(conformanceFetch, streamID: 1)
            let first = try await client.nextFrame()
            guard case .event = first.kind else { throw UnexpectedFrame(frame: first) }
            let shutdown = Task { await server.shutdownGracefully() }
            let goAway = try await client.nextFrame()
            guard case .goAway(let drain) = goAway.kind else { throw UnexpectedFrame(frame: goAway) }
            #expect(drain.lastStreamID == 1)
            try await client.open(conformanceFetch, streamID: 3)
            #expect(try await client.untilComplete(streamID: 3).complete.error?.code == .shuttingDown)
            gate.open()
            let (events, complete) = try await client.untilComplete(streamID: 1)
            #expect(events.map(\.seq) == [2, 3])
            #expect(complete.error == nil)
            #expect(try await client.waitForClose() == nil, "closed after the last Complete, no error")
            await shutdown.value
        }
    }
}
