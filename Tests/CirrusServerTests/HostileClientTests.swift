import CirrusTestSupport
import CirrusWire
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import Testing

/// Hostile clients against a real `cirrusd` on loopback, each attack beside a bystander (another
/// user saving one record at a time) whose every save must complete within
/// ``bystanderBound``. Bounds are generous (a loaded debug build must meet them); the figures
/// each test prints are what README's security table reports.
@Suite("Hostile clients against a real cirrusd", .serialized)
struct HostileClientTests {
    /// No bystander save may take longer than this while an attack runs: a liveness bound
    /// (an attack that starved other users would hold a save for the whole attack), not a
    /// speed figure; the whole suite under a parallel build once took 5.3 s.
    static let bystanderBound: Duration = .seconds(20)

    @Test func nonReadingClientsWithHugeWindowsHoldBoundedMemory() async throws {
        let server = try await CirrusdProcess.launch()
        let zone = Wire.RecordZoneID(zoneName: "Feed", ownerName: "__defaultOwner__")
        var setup = try await OperationClient.connect(port: server.port, user: "alice")
        _ = try await setup.run(.modifyRecordZones(Wire.ModifyRecordZonesRequest(recordZonesToSave: [Wire.RecordZone(zoneID: zone)])))
        // 4,000 records of ~1 KiB: every one of 256 streams would queue 4 MiB if credit ruled.
        let padding = String(repeating: "p", count: 1_000)
        for start in stride(from: 0, to: 4_000, by: 400) {
            let records = (start..<start + 400).map { note("r\($0)", title: "\(padding)\($0)", zone: zone) }
            #expect(try await setup.save(records).complete.error == nil)
        }
        await setup.client.close()
        let before = try #require(server.residentKiB)

        let bystander = try await Bystander.start(port: server.port)
        let first = try await stallingAttack(server: server, zone: zone)
        let afterFirst = try await settledResidentKiB(server)
        // The same attack again: a leak would keep what the first left and add to it.
        let second = try await stallingAttack(server: server, zone: zone)
        let afterSecond = try await settledResidentKiB(server)
        let report = try await bystander.stop()
        let peakGrowthMiB = (max(first, second) - before) / 1_024
        print(
            "hostile: 2 non-reading connections × 128 streams, twice: +\(peakGrowthMiB) MiB at peak over \(before / 1_024) MiB; "
                + "\(afterFirst / 1_024) MiB then \(afterSecond / 1_024) MiB resident after each; bystander \(report)")
        // 256 streams × 4 MiB would be 1 GiB; what is held is the socket buffers, one event
        // and one share of the connection's batch budget per stream.
        #expect(peakGrowthMiB < 128, "resident memory grew by \(peakGrowthMiB) MiB")
        // A leak would keep what each attack held: after two, twice the first peak's growth.
        #expect(
            afterSecond < first + 16 * 1_024,
            "after two attacks \(afterSecond / 1_024) MiB stay resident; the first peaked at \(first / 1_024) MiB")
        await server.killed()
        report.expectWithinBound()
    }

    /// Two connections that open 128 change feeds each with a window of 2^32 - 1 and never
    /// read; returns the peak resident KiB once the server settles, after closing them.
    private func stallingAttack(server: CirrusdProcess, zone: Wire.RecordZoneID) async throws -> Int {
        var attackers: [RawTLSClient] = []
        for _ in 0..<2 {
            let raw = try await RawTLSClient.connect(port: server.port, receiveBufferBytes: 64 * 1024)
            try await raw.write(try encodedFrames([helloFrame()]))
            try await raw.waitForBytes()
            try await raw.channel.setOption(.autoRead, value: false).get()
            let request = Wire.FetchRecordZoneChangesRequest(zoneConfigurations: [Wire.ZoneChangesConfiguration(zoneID: zone)])
            let opens = (1...128).map { id in
                Wire.Frame(
                    streamID: UInt64(id),
                    kind: .open(
                        Wire.Open(
                            operationID: "feed-\(id)", databaseScope: .private, containerIdentifier: container,
                            initialWindow: .max, request: .fetchRecordZoneChanges(request))))
            }
            try await raw.write(try encodedFrames(opens))
            attackers.append(raw)
        }
        let peak = try await settledResidentKiB(server)
        for raw in attackers { await raw.close() }
        return peak
    }

    /// Resident KiB once it has stayed within 1 MiB for three seconds (bounded).
    private func settledResidentKiB(_ server: CirrusdProcess) async throws -> Int {
        var last = 0
        var unchanged = 0
        for _ in 0..<240 where unchanged < 12 {
            try await Task.sleep(for: .milliseconds(250))
            let now = server.residentKiB ?? 0
            unchanged = abs(now - last) < 1_024 ? unchanged + 1 : 0
            last = now
        }
        return last
    }

    @Test func floodsOfRefusedOpensAreCutOff() async throws {
        let server = try await CirrusdProcess.launch(arguments: ["--max-streams", "16"])
        let bystander = try await Bystander.start(port: server.port)
        let attacker = try await RawTLSClient.connect(port: server.port)
        // 16 watches hold every stream; then 5,000 more Opens, each refused.
        let watch = Wire.Open.Request.watchNotifications(Wire.WatchNotificationsRequest())
        let opens = (1...5_016).map { id in
            Wire.Frame(streamID: UInt64(id), kind: .open(Wire.Open(operationID: "w\(id)", containerIdentifier: container, request: watch)))
        }
        try await attacker.write(try encodedFrames([helloFrame()] + opens))
        let frames = try await attacker.framesUntilClose(timeout: .seconds(60))
        let refused = frames.filter {
            if case .complete(let complete) = $0.kind { complete.error?.code == .tooManyStreams } else { false }
        }.count
        let cutWith = frames.lazy.compactMap { frame -> Wire.ErrorCode? in
            if case .error(let error) = frame.kind { error.code } else { nil }
        }.first
        let report = try await bystander.stop()
        print("hostile: Open flood: \(refused) refused, then \(cutWith.map { "\($0)" } ?? "no error"); bystander \(report)")
        #expect(cutWith == .rateLimited)
        #expect(refused <= 1_000, "a connection's refusals are bounded by its allowance")
        await server.killed()
        report.expectWithinBound()
    }

    @Test func reconnectingRapidResetIsLockedOut() async throws {
        let server = try await CirrusdProcess.launch(arguments: ["--abandoned-streams-per-user", "50"])
        let bystander = try await Bystander.start(port: server.port)
        let clock = ContinuousClock()
        let started = clock.now
        var lockedOut = false
        var connections = 0
        // For ten seconds: connect, Open+Cancel as fast as the server takes it, reconnect when cut.
        while clock.now - started < .seconds(10) {
            let client = try await RawTLSClient.connect(port: server.port)
            connections += 1
            try await client.write(try encodedFrames([helloFrame()]))
            try await client.waitForBytes(timeout: .seconds(30))
            var buffer = client.collector.bytes
            var decoder = FrameDecoder()
            if let first = try decoder.decode(buffer: &buffer), case .error(let error) = first.kind {
                #expect(error.code == .rateLimited)
                lockedOut = true
                await client.close()
                break
            }
            var frames: [Wire.Frame] = []
            for id in stride(from: UInt64(1), through: 1_999, by: 2) {
                frames.append(Wire.Frame(streamID: id, kind: .open(Wire.Open(operationID: "p\(id)", containerIdentifier: container, request: .watchNotifications(.init())))))
                frames.append(Wire.Frame(streamID: id, kind: .cancel(Wire.Cancel(reason: "reset"))))
            }
            try? await client.write(try encodedFrames(frames))
            _ = try? await client.framesUntilClose(timeout: .seconds(30))
        }
        let report = try await bystander.stop()
        print("hostile: rapid reset over \(connections) connections: locked out = \(lockedOut); bystander \(report)")
        #expect(lockedOut, "the user is refused new connections once over the per-user rate")
        await server.killed()
        report.expectWithinBound()
    }

    @Test func slowlorisOnTLSAndOnFramesIsCut() async throws {
        // The production handshake timeout (the test processes get 60 s by default).
        let server = try await CirrusdProcess.launch(arguments: [
            "--keepalive-interval", "2s", "--keepalive-timeout", "2s", "--handshake-timeout", "10s",
        ])
        let bystander = try await Bystander.start(port: server.port)
        let clock = ContinuousClock()
        let started = clock.now
        // 20 TCP connections that never start TLS, and 20 that say Hello and then trickle one
        // frame a byte per second.
        var silent: [SilentSocket] = []
        for _ in 0..<20 { silent.append(try SilentSocket(port: server.port)) }
        var tricklers: [RawTLSClient] = []
        for _ in 0..<20 {
            let raw = try await RawTLSClient.connect(port: server.port)
            try await raw.write(try encodedFrames([helloFrame()]))
            try await raw.waitForBytes()
            tricklers.append(raw)
        }
        let partial = try encodedFrames([Wire.Frame(streamID: 0, kind: .ping(Wire.Ping(nonce: 1)))])
        let trickle = Task {
            for byte in partial.dropLast() {
                for raw in tricklers { try? await raw.write([byte]) }
                try await Task.sleep(for: .seconds(1))
            }
        }
        for raw in tricklers {
            try await raw.collector.closed.futureResult.get()
        }
        let framesCut = clock.now - started
        for socket in silent {
            try await socket.waitForClose(timeout: .seconds(60))
        }
        let tlsCut = clock.now - started
        trickle.cancel()
        let report = try await bystander.stop()
        print("hostile: slowloris cut: frames after \(framesCut), TLS after \(tlsCut); bystander \(report)")
        // Handshake timeout 10 s; keepalive 2 s + 2 s here.
        #expect(tlsCut < .seconds(60))
        await server.killed()
        report.expectWithinBound()
    }

    @Test func aConnectionFloodOfOneUserIsBounded() async throws {
        let server = try await CirrusdProcess.launch(arguments: ["--max-connections-per-user", "8"])
        let bystander = try await Bystander.start(port: server.port)
        var admitted: [TestClient] = []
        var refused = 0
        for _ in 0..<40 {
            let client = try await TestClient.connect(port: server.port)
            try await client.send(helloFrame())
            let frame = try await client.nextFrame(timeout: .seconds(30))
            if case .helloAck = frame.kind {
                admitted.append(client)
            } else if case .error(let error) = frame.kind, error.code == .rateLimited {
                refused += 1
                await client.close()
            }
        }
        let report = try await bystander.stop()
        print("hostile: 40 connections of one user: \(admitted.count) admitted, \(refused) refused; bystander \(report)")
        #expect(admitted.count == 8)
        #expect(refused == 32)
        for client in admitted { await client.close() }
        await server.killed()
        report.expectWithinBound()
    }
}

// MARK: - Support

private func helloFrame() -> Wire.Frame {
    Wire.Frame(streamID: 0, kind: .hello(Wire.Hello(protocolVersion: Wire.protocolVersion, clientName: "hostile")))
}

private func encodedBuffer(_ frames: [Wire.Frame]) throws -> ByteBuffer {
    var buffer = ByteBuffer()
    for frame in frames {
        try FrameEncoder.encode(frame, into: &buffer)
    }
    return buffer
}

private func encodedFrames(_ frames: [Wire.Frame]) throws -> [UInt8] {
    Array(try encodedBuffer(frames).readableBytesView)
}

/// Another user saving one record at a time for as long as an attack runs, timing each save.
private final class Bystander: Sendable {
    struct Report: CustomStringConvertible {
        var latencies: [Duration]
        var failures: [String]

        var description: String {
            let sorted = self.latencies.sorted()
            guard !sorted.isEmpty else { return "no saves" }
            let p99 = sorted[min(sorted.count - 1, sorted.count * 99 / 100)]
            return "\(sorted.count) saves, p50 \(sorted[sorted.count / 2]), p99 \(p99), max \(sorted.last ?? .zero)"
        }

        func expectWithinBound(sourceLocation: SourceLocation = #_sourceLocation) {
            #expect(self.failures.isEmpty, "bystander failures: \(self.failures)", sourceLocation: sourceLocation)
            #expect(!self.latencies.isEmpty, "the bystander saved nothing", sourceLocation: sourceLocation)
            let worst = self.latencies.max() ?? .zero
            #expect(
                worst < HostileClientTests.bystanderBound, "slowest bystander save: \(worst)", sourceLocation: sourceLocation)
        }
    }

    private let task: Task<Report, any Error>
    private let stopping: NIOLockedValueBox<Bool>

    private init(task: Task<Report, any Error>, stopping: NIOLockedValueBox<Bool>) {
        self.task = task
        self.stopping = stopping
    }

    static func start(port: Int) async throws -> Bystander {
        let connected = try await OperationClient.connect(port: port, user: "bob")
        let stopping = NIOLockedValueBox(false)
        let task = Task {
            var client = connected
            var report = Report(latencies: [], failures: [])
            let clock = ContinuousClock()
            var index = 0
            while !stopping.withLockedValue({ $0 }) {
                index += 1
                let started = clock.now
                let (_, complete) = try await client.save([note("b\(index)", title: "bystander \(index)")])
                report.latencies.append(clock.now - started)
                if let error = complete.error { report.failures.append("\(error.code): \(error.message)") }
                try await Task.sleep(for: .milliseconds(20))
            }
            await client.client.close()
            return report
        }
        return Bystander(task: task, stopping: stopping)
    }

    func stop() async throws -> Report {
        self.stopping.withLockedValue { $0 = true }
        return try await self.task.value
    }
}

/// A TCP connection that never sends a byte (no TLS): a slowloris on the handshake.
private struct SilentSocket {
    let descriptor: Int32

    init(port: Int) throws {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw SocketFailed(errno: errno) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else {
            close(descriptor)
            throw SocketFailed(errno: errno)
        }
        self.descriptor = descriptor
    }

    /// Waits until the server closes the connection (a read returns 0 or fails), then closes.
    func waitForClose(timeout: Duration) async throws {
        defer { close(self.descriptor) }
        let clock = ContinuousClock()
        let deadline = clock.now + timeout
        var byte: UInt8 = 0
        while clock.now < deadline {
            var poll = pollfd(fd: self.descriptor, events: Int16(POLLIN), revents: 0)
            if Glibc.poll(&poll, 1, 0) > 0 {
                let read = recv(self.descriptor, &byte, 1, 0)
                if read <= 0 { return }
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        throw TestTimeout()
    }
}

private struct SocketFailed: Error { var errno: Int32 }
