import CirrusServer
import CirrusTestSupport
import CirrusWire
import NIOConcurrencyHelpers
import NIOCore
import Testing

/// Emits `count` events of about `nameBytes` bytes each (record-progress callbacks with long
/// record names), then succeeds; counts what it emitted.
private struct BulkExecutor: OperationExecutor {
    let count: Int
    let nameBytes: Int
    let emitted = NIOLockedValueBox(0)

    func run(_ open: Wire.Open, caller: ClientIdentity, stream: OperationStream) async -> OperationCompletion {
        let padding = String(repeating: "x", count: self.nameBytes)
        for index in 0..<self.count {
            let progress = Wire.RecordProgress(recordID: Wire.RecordID(recordName: "\(padding)\(index)"), progress: 1)
            do {
                try await stream.emit(.fetchRecords(Wire.FetchRecordsEvent(callback: .perRecordProgress(progress))))
            } catch {
                return .failure(.operationCancelled, "cancelled")
            }
            self.emitted.withLockedValue { $0 += 1 }
        }
        return .success()
    }
}

/// Frames a raw client sends, encoded.
private func encoded(_ frames: [Wire.Frame]) throws -> [UInt8] {
    var buffer = ByteBuffer()
    for frame in frames {
        try FrameEncoder.encode(frame, into: &buffer)
    }
    return Array(buffer.readableBytesView)
}

private func hello() -> Wire.Frame {
    Wire.Frame(streamID: 0, kind: .hello(Wire.Hello(protocolVersion: Wire.protocolVersion, clientName: "back-pressure")))
}

private func open(_ streamID: UInt64, window: UInt32) -> Wire.Frame {
    Wire.Frame(
        streamID: streamID,
        kind: .open(Wire.Open(operationID: "op-\(streamID)", initialWindow: window, request: .fetchRecords(.init())))
    )
}

/// A client that says Hello, opens `streams` streams granting `window` events each, and stops
/// reading: a peer that grants a huge window and never reads.
private func stalledPeer(port: Int, streams: Int, window: UInt32) async throws -> RawTLSClient {
    let raw = try await RawTLSClient.connect(port: port, receiveBufferBytes: 64 * 1024)
    try await raw.write(try encoded([hello()]))
    try await raw.waitForBytes()
    try await raw.channel.setOption(.autoRead, value: false).get()
    try await raw.write(try encoded((1...streams).map { open(UInt64($0), window: window) }))
    return raw
}

/// Polls `value` until it has not changed for two seconds in a row (bounded): what a
/// stalled producer settles at.
private func settled(_ value: () -> Int) async throws -> Int {
    var last = -1
    var unchanged = 0
    for _ in 0..<2_400 where unchanged < 40 {
        try await Task.sleep(for: .milliseconds(50))
        let now = value()
        unchanged = now == last ? unchanged + 1 : 0
        last = now
    }
    return last
}

@Suite("Back-pressure: a peer that does not read holds a bounded amount of server memory")
struct BackPressureTests {
    @Test func aPeerThatNeverReadsStopsProductionWhateverItsWindow() async throws {
        // 8 streams × 2,000 events of ~1 KiB with a million events of credit each: 16 MiB the
        // server would queue if credit were its only limit.
        let executor = BulkExecutor(count: 2_000, nameBytes: 1_000)
        let budget = OutboundBudget()
        try await withServer(configure: {
            $0.executor = executor
            $0.outboundBudget = budget
            // The raw peer never answers a Ping: on a loaded machine the stall and the 16 MiB
            // read can outlast the keepalive (30 s + 20 s), and the server would rightly close
            // the connection with events unsent (seen in CI).
            $0.connection.keepaliveInterval = .seconds(3_600)
        }) { _, port in
            let raw = try await stalledPeer(port: port, streams: 8, window: 1_000_000)
            let produced = try await settled { executor.emitted.withLockedValue { $0 } }
            // What a stalled connection may hold: the kernel's socket buffers (4 MiB send and
            // 64 KiB receive at most here), the socket's write buffer (256 KiB) and one batch
            // of queued events per stream — about 5,000 events of 1 KiB. Not 16,000.
            #expect(produced < 10_000, "the server kept producing for a peer that does not read: \(produced) events")
            #expect(budget.pendingBytes < 2 << 20, "bytes waiting for the socket: \(budget.pendingBytes)")

            // Nothing is lost: once the peer reads, every event arrives in order, then Complete.
            try await raw.channel.setOption(.autoRead, value: true).get()
            raw.channel.read()
            let frames = try await framesUntilCompleted(raw, streams: 8)
            var lastSeq: [UInt64: UInt64] = [:]
            for frame in frames {
                switch frame.kind {
                case .event(let event):
                    #expect(event.seq == lastSeq[frame.streamID, default: 0] + 1)
                    lastSeq[frame.streamID] = event.seq
                case .complete(let complete):
                    #expect(complete == Wire.Complete(lastSeq: 2_000))
                default:
                    break
                }
            }
            #expect(lastSeq.count == 8 && lastSeq.values.allSatisfy { $0 == 2_000 })
            await raw.close()
        }
    }

    @Test func stalledPeersCannotStarveAReaderOfTheSharedBudget() async throws {
        // A budget of one byte is always spent: only connections over their fair share pause.
        let executor = BulkExecutor(count: 2_000, nameBytes: 1_000)
        let budget = OutboundBudget(limit: 1, fairShare: 64 << 10)
        try await withServer(configure: {
            $0.executor = executor
            $0.outboundBudget = budget
            // No timer tick comes to resume a paused connection: the reader must never pause.
            // (No tick also means no keepalive Ping the raw stalled peer would leave unanswered.)
            $0.timerInterval = .seconds(3_600)
        }) { _, port in
            let stalled = try await stalledPeer(port: port, streams: 4, window: 1_000_000)
            _ = try await settled { executor.emitted.withLockedValue { $0 } }

            let reader = try await TestClient.connect(port: port, user: "bob")
            _ = try await reader.handshake()
            try await reader.send(open(1, window: 4_000))
            for seq in 1...2_000 {
                guard case .event(let event) = try await reader.nextFrame(timeout: .seconds(60)).kind else {
                    Issue.record("expected event \(seq)")
                    return
                }
                #expect(event.seq == UInt64(seq))
            }
            #expect(try await reader.nextFrame().kind == .complete(Wire.Complete(lastSeq: 2_000)))
            await reader.close()
            await stalled.close()
        }
    }
}

/// Reads what arrives on `raw` until `streams` streams have completed (bounded), decoded.
private func framesUntilCompleted(_ raw: RawTLSClient, streams: Int, timeout: Duration = .seconds(300)) async throws
    -> [Wire.Frame]
{
    let clock = ContinuousClock()
    let deadline = clock.now + timeout
    // Each poll decodes only what arrived since the last one. Decoding everything again every
    // 200 ms made the wait quadratic in the 16 MiB it collects, and on a loaded machine it
    // took the CPU the server needed to send them (the test once ran out of its deadline).
    var decoder = FrameDecoder()
    var frames: [Wire.Frame] = []
    var decodedBytes = 0
    var completed = 0
    while true {
        var buffer = raw.collector.bytes
        buffer.moveReaderIndex(forwardBy: decodedBytes)
        let start = buffer.readerIndex
        while let frame = try decoder.decode(buffer: &buffer) {
            if case .complete = frame.kind { completed += 1 }
            frames.append(frame)
        }
        decodedBytes += buffer.readerIndex - start
        if completed >= streams { return frames }
        guard clock.now < deadline else { throw TestTimeout() }
        try await Task.sleep(for: .milliseconds(200))
    }
}
