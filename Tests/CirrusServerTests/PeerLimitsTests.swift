import CirrusServer
import CirrusTestSupport
import CirrusWire
import NIOConcurrencyHelpers
import NIOCore
import Testing

private let t0 = NIODeadline.uptimeNanoseconds(1_000_000_000)

/// Runs until cancelled: an operation that holds its stream open.
private struct WaitingExecutor: OperationExecutor {
    func run(_ open: Wire.Open, caller: ClientIdentity, stream: OperationStream) async -> OperationCompletion {
        try? await Task.sleep(for: .seconds(3_600))
        return .failure(.operationCancelled, "cancelled")
    }
}

private func open(_ streamID: UInt64) -> Wire.Frame {
    Wire.Frame(streamID: streamID, kind: .open(Wire.Open(operationID: "op-\(streamID)", request: .fetchRecords(.init()))))
}

private func cancel(_ streamID: UInt64) -> Wire.Frame {
    Wire.Frame(streamID: streamID, kind: .cancel(Wire.Cancel(reason: "flood")))
}

@Suite("Peer limits: the arithmetic, with time passed in")
struct PeerLimitsUnitTests {
    @Test func connectionsPerUserAreCountedAndGivenBack() {
        let limits = PeerLimits(configuration: .init(maximumConnectionsPerUser: 2))
        #expect(limits.admit(user: "alice", now: t0) == nil)
        #expect(limits.admit(user: "alice", now: t0) == nil)
        #expect(limits.admit(user: "alice", now: t0) == .tooManyConnections(limit: 2))
        #expect(limits.admit(user: "bob", now: t0) == nil)
        limits.release(user: "alice")
        #expect(limits.connectionCount(user: "alice") == 1)
        #expect(limits.admit(user: "alice", now: t0) == nil)
    }

    @Test func handshakesPerAddressRefillOverTime() {
        let limits = PeerLimits(configuration: .init(handshakesPerAddressPerSecond: 2, handshakeBurstPerAddress: 3))
        #expect((0..<3).allSatisfy { _ in limits.admitHandshake(from: "10.0.0.1", now: t0) })
        #expect(!limits.admitHandshake(from: "10.0.0.1", now: t0))
        #expect(limits.admitHandshake(from: "10.0.0.2", now: t0), "another address has its own allowance")
        #expect(limits.admitHandshake(from: "10.0.0.1", now: t0 + .milliseconds(500)))
        #expect(!limits.admitHandshake(from: "10.0.0.1", now: t0 + .milliseconds(500)))
    }

    @Test func aUserWhoSpentTheAllowanceIsRefusedNewConnectionsUntilItRefills() {
        let limits = PeerLimits(
            configuration: .init(abandonedStreamsPerUserPerSecond: 10, abandonedStreamBurstPerUser: 5))
        #expect((0..<5).allSatisfy { _ in limits.spendAbandonedStream(user: "alice", now: t0) })
        #expect(!limits.spendAbandonedStream(user: "alice", now: t0))
        #expect(limits.admit(user: "alice", now: t0) == .abandoningStreams(perSecond: 10))
        #expect(limits.admit(user: "bob", now: t0) == nil)
        // Refused until half the burst is back: 2 tokens after 200 ms, 3 after 300 ms.
        #expect(limits.admit(user: "alice", now: t0 + .milliseconds(200)) == .abandoningStreams(perSecond: 10))
        #expect(limits.admit(user: "alice", now: t0 + .milliseconds(300)) == nil)
    }

    @Test func zeroTurnsALimitOff() {
        let limits = PeerLimits(
            configuration: .init(
                maximumConnectionsPerUser: 0, handshakesPerAddressPerSecond: 0, abandonedStreamsPerUserPerSecond: 0))
        for _ in 0..<10_000 {
            #expect(limits.admitHandshake(from: "10.0.0.1", now: t0))
            #expect(limits.spendAbandonedStream(user: "alice", now: t0))
            #expect(limits.admit(user: "alice", now: t0) == nil)
        }
    }

    @Test func manyAddressesDoNotGrowTheTableWithoutBound() {
        let limits = PeerLimits(configuration: .init(handshakesPerAddressPerSecond: 1_000, handshakeBurstPerAddress: 10))
        // 50,000 one-off addresses, a second apart: each bucket is full again by the next sweep.
        for index in 0..<50_000 {
            let address = "10.\(index >> 16).\((index >> 8) & 255).\(index & 255)"
            #expect(limits.admitHandshake(from: address, now: t0 + .seconds(Int64(index))))
        }
    }
}

@Suite("Peer limits across connections, over loopback TLS")
struct PeerLimitsServerTests {
    @Test func aUsersConnectionsBeyondTheLimitAreRefusedAtHello() async throws {
        try await withServer(configure: {
            $0.peerLimits = PeerLimits(configuration: .init(maximumConnectionsPerUser: 2))
        }) { server, port in
            let first = try await TestClient.connect(port: port)
            _ = try await first.handshake()
            let second = try await TestClient.connect(port: port)
            _ = try await second.handshake()
            let third = try await TestClient.connect(port: port)
            try await third.send(Wire.Frame(streamID: 0, kind: .hello(Wire.Hello(protocolVersion: Wire.protocolVersion))))
            let error = try await third.waitForClose()
            #expect(error?.code == .rateLimited)
            #expect(error?.message.contains("at most 2 connections per user") == true)

            let bob = try await TestClient.connect(port: port, user: "bob")
            _ = try await bob.handshake()

            // A closed connection gives its place back.
            await first.close()
            try await eventually(timeout: .seconds(20)) { server.configuration.peerLimits.connectionCount(user: "_alice") == 1 }
            let fourth = try await TestClient.connect(port: port)
            _ = try await fourth.handshake()
            for client in [second, bob, fourth] { await client.close() }
        }
    }

    @Test func reconnectingDoesNotBuyAFreshCancelAllowance() async throws {
        try await withServer(configure: {
            $0.executor = WaitingExecutor()
            // The per-connection allowance is out of the way: the per-user one must hold.
            $0.connection.cancelBurst = 10_000
            $0.peerLimits = PeerLimits(
                configuration: .init(abandonedStreamsPerUserPerSecond: 1, abandonedStreamBurstPerUser: 100))
        }) { _, port in
            let first = try await TestClient.connect(port: port)
            _ = try await first.handshake()
            // 150 open-and-cancel pairs in one flush against an allowance of 100 (plus one a
            // second), so a slow machine cannot refill it while they are sent; the user is then
            // refused until 50 are back: 50 s, time enough for a loaded machine to reconnect.
            for id in 1...150 {
                first.channel.write(open(UInt64(id)), promise: nil)
                first.channel.write(cancel(UInt64(id)), promise: nil)
            }
            first.channel.flush()
            #expect(try await first.waitForClose(timeout: .seconds(60))?.code == .rateLimited)

            // The same user reconnecting is refused until half the allowance is back.
            let again = try await TestClient.connect(port: port)
            try await again.send(Wire.Frame(streamID: 0, kind: .hello(Wire.Hello(protocolVersion: Wire.protocolVersion))))
            let refusal = try await again.waitForClose()
            #expect(refusal?.code == .rateLimited)
            #expect(refusal?.message.contains("across this user's connections") == true)

            // Another user is not affected.
            let bob = try await TestClient.connect(port: port, user: "bob")
            _ = try await bob.handshake()
            try await bob.send(open(1))
            try await bob.send(cancel(1))
            try await bob.send(Wire.Frame(streamID: 0, kind: .ping(Wire.Ping(nonce: 7))))
            let cancelled = try await bob.nextFrame()
            #expect(cancelled.streamID == 1)
            if case .complete(let complete) = cancelled.kind {
                #expect(complete.error?.code == .operationCancelled)
            } else {
                Issue.record("expected the Complete confirming the cancel, got \(cancelled)")
            }
            #expect(try await bob.nextFrame().kind == .pong(Wire.Pong(nonce: 7)))
            await bob.close()
        }
    }

    @Test func aFloodOfRefusedOpensIsCutOff() async throws {
        try await withServer(configure: {
            $0.executor = WaitingExecutor()
            $0.connection.maximumConcurrentStreams = 1
            $0.connection.cancelBurst = 10
            $0.connection.cancelsPerSecond = 0  // No refill while the flood arrives.
        }) { _, port in
            let client = try await TestClient.connect(port: port)
            _ = try await client.handshake()
            for id in 1...50 { try? await client.send(open(UInt64(id))) }
            var refused = 0
            var closedWith: Wire.ErrorCode?
            loop: while true {
                switch try await client.next() {
                case .frame(let frame):
                    switch frame.kind {
                    case .complete(let complete) where complete.error?.code == .tooManyStreams:
                        refused += 1
                    case .error(let error):
                        closedWith = error.code
                    default:
                        break
                    }
                case .error:
                    continue
                case .closed:
                    break loop
                }
            }
            #expect(refused == 10, "the burst of refusals, then the connection is cut")
            #expect(closedWith == .rateLimited)
        }
    }

    @Test func handshakesBeyondTheRateOfAnAddressAreClosedBeforeTLS() async throws {
        try await withServer(configure: {
            $0.peerLimits = PeerLimits(configuration: .init(handshakesPerAddressPerSecond: 1, handshakeBurstPerAddress: 3))
        }) { _, port in
            // 20 connections at once from 127.0.0.1: the burst of 3 (and one more per second
            // the attempts take) is served, the rest are closed before their handshake.
            let clock = ContinuousClock()
            let started = clock.now
            let admitted = try await withThrowingTaskGroup(of: Bool.self) { group in
                for _ in 0..<20 {
                    group.addTask {
                        guard let client = try? await TestClient.connect(port: port) else { return false }
                        let served = (try? await client.handshake()) != nil
                        await client.close()
                        return served
                    }
                }
                return try await group.reduce(0) { $0 + ($1 ? 1 : 0) }
            }
            let seconds = Int((clock.now - started).components.seconds) + 1
            #expect(admitted >= 3)
            #expect(admitted <= 3 + seconds, "\(admitted) handshakes served in about \(seconds) s")
            #expect(admitted < 20)
        }
    }
}
