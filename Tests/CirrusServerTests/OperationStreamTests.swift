import CirrusServer
import CirrusTestSupport
import CirrusWire
import NIOConcurrencyHelpers
import NIOCore
import Testing

/// Emits `count` events (record-progress callbacks of a fetch), then succeeds; remembers
/// whether it was cancelled.
private struct CountingExecutor: OperationExecutor {
    let count: Int
    let cancelled = NIOLockedValueBox(false)
    let emitted = NIOLockedValueBox(0)

    func run(_ open: Wire.Open, caller: ClientIdentity, stream: OperationStream) async -> OperationCompletion {
        for index in 0..<self.count {
            let progress = Wire.RecordProgress(recordID: Wire.RecordID(recordName: "r\(index)"), progress: 1)
            do {
                try await stream.emit(.fetchRecords(Wire.FetchRecordsEvent(callback: .perRecordProgress(progress))))
                self.emitted.withLockedValue { $0 += 1 }
            } catch {
                self.cancelled.withLockedValue { $0 = true }
                return .failure(.operationCancelled, "cancelled")
            }
        }
        return .success()
    }
}

/// Emits `count` events in batches of `batch` with `emit(contentsOf:)`, then succeeds; counts
/// the batches that returned.
private struct BatchExecutor: OperationExecutor {
    let count: Int
    let batch: Int
    let batchesEmitted = NIOLockedValueBox(0)

    func run(_ open: Wire.Open, caller: ClientIdentity, stream: OperationStream) async -> OperationCompletion {
        for start in stride(from: 0, to: self.count, by: self.batch) {
            let payloads = (start..<min(start + self.batch, self.count)).map { index -> Wire.Event.Payload in
                let progress = Wire.RecordProgress(recordID: Wire.RecordID(recordName: "r\(index)"), progress: 1)
                return .fetchRecords(Wire.FetchRecordsEvent(callback: .perRecordProgress(progress)))
            }
            do {
                try await stream.emit(contentsOf: payloads)
                self.batchesEmitted.withLockedValue { $0 += 1 }
            } catch {
                return .failure(.operationCancelled, "cancelled")
            }
        }
        return .success()
    }
}

/// Emits an ordinary event, then one `DownloadAsset` chunk of each size in `chunks` sent from
/// its buffer (`emitAssetChunk`), then another ordinary event; content byte `i` of chunk `c`
/// is `UInt8(truncatingIfNeeded: c &+ i)`.
private struct ChunkExecutor: OperationExecutor {
    let chunks: [Int]

    static func content(chunk: Int, bytes: Int) -> [UInt8] {
        (0..<bytes).map { UInt8(truncatingIfNeeded: chunk &+ $0) }
    }

    func run(_ open: Wire.Open, caller: ClientIdentity, stream: OperationStream) async -> OperationCompletion {
        let progress = Wire.FetchRecordsEvent(
            callback: .perRecordProgress(Wire.RecordProgress(recordID: Wire.RecordID(recordName: "r"), progress: 1)))
        do {
            try await stream.emit(.fetchRecords(progress))
            var offset: UInt64 = 0
            for (index, bytes) in self.chunks.enumerated() {
                try await stream.emitAssetChunk(offset: offset, data: ByteBuffer(bytes: Self.content(chunk: index, bytes: bytes)))
                offset += UInt64(bytes)
            }
            try await stream.emit(.fetchRecords(progress))
        } catch {
            return .failure(.operationCancelled, "cancelled")
        }
        return .success()
    }
}

private func open(_ streamID: UInt64, window: UInt32) -> Wire.Frame {
    Wire.Frame(
        streamID: streamID,
        kind: .open(Wire.Open(operationID: "op-\(streamID)", initialWindow: window, request: .fetchRecords(.init())))
    )
}

private func expectEvent(_ frame: Wire.Frame, streamID: UInt64, seq: UInt64) {
    guard case .event(let event) = frame.kind else {
        Issue.record("expected Event \(seq), got \(frame)")
        return
    }
    #expect(frame.streamID == streamID)
    #expect(event.seq == seq)
}

@Suite("Operations stream their events under flow control")
struct OperationStreamTests {
    @Test func eventsArriveInOrderThenComplete() async throws {
        let executor = CountingExecutor(count: 500)
        try await withServer(configure: { $0.executor = executor }) { _, port in
            let client = try await TestClient.connect(port: port)
            _ = try await client.handshake()
            try await client.send(open(1, window: 1_000))
            for seq in 1...500 {
                expectEvent(try await client.nextFrame(), streamID: 1, seq: UInt64(seq))
            }
            let last = try await client.nextFrame()
            #expect(last.kind == .complete(Wire.Complete(lastSeq: 500)))
            await client.close()
        }
    }

    /// An operation that ends right after its last event hands its completion over with the
    /// drain of that event: each stream still gets its events, then its `Complete` counting
    /// them, whatever the others do.
    @Test func aCompletionRightAfterTheLastEventFollowsIt() async throws {
        let executor = CountingExecutor(count: 1)
        try await withServer(configure: { $0.executor = executor }) { _, port in
            let client = try await TestClient.connect(port: port)
            _ = try await client.handshake()
            for round in 0..<20 {
                let streams = (1...16).map { UInt64(round * 32 + $0 * 2 + 1) }
                for streamID in streams { try await client.send(open(streamID, window: 10)) }
                var events: Set<UInt64> = []
                var completed: Set<UInt64> = []
                while completed.count < streams.count {
                    let frame = try await client.nextFrame()
                    switch frame.kind {
                    case .event(let event):
                        #expect(event.seq == 1)
                        #expect(!completed.contains(frame.streamID), "an event after its stream's Complete")
                        events.insert(frame.streamID)
                    case .complete(let complete):
                        #expect(complete == Wire.Complete(lastSeq: 1))
                        #expect(events.contains(frame.streamID), "a Complete before its stream's event")
                        completed.insert(frame.streamID)
                    default:
                        Issue.record("unexpected frame \(frame)")
                    }
                }
                #expect(events == Set(streams))
            }
            await client.close()
        }
    }

    @Test func theServerWaitsForCredit() async throws {
        let executor = CountingExecutor(count: 10)
        try await withServer(configure: { $0.executor = executor }) { _, port in
            let client = try await TestClient.connect(port: port)
            _ = try await client.handshake()
            try await client.send(open(1, window: 3))
            for seq in 1...3 {
                expectEvent(try await client.nextFrame(), streamID: 1, seq: UInt64(seq))
            }
            // Without credit nothing more comes: a Ping overtakes the waiting events.
            try await client.send(Wire.Frame(streamID: 0, kind: .ping(Wire.Ping(nonce: 1))))
            #expect(try await client.nextFrame().kind == .pong(Wire.Pong(nonce: 1)))
            #expect(executor.emitted.withLockedValue { $0 } == 3)

            try await client.send(Wire.Frame(streamID: 1, kind: .window(Wire.Window(credit: 100))))
            for seq in 4...10 {
                expectEvent(try await client.nextFrame(), streamID: 1, seq: UInt64(seq))
            }
            #expect(try await client.nextFrame().kind == .complete(Wire.Complete(lastSeq: 10)))
            await client.close()
        }
    }

    @Test func batchesLargerThanTheOutboxArriveInOrder() async throws {
        // Batches of 300 are queued 64 events (the outbox cap) at a time.
        let executor = BatchExecutor(count: 700, batch: 300)
        try await withServer(configure: { $0.executor = executor }) { _, port in
            let client = try await TestClient.connect(port: port)
            _ = try await client.handshake()
            try await client.send(open(1, window: 1_000))
            for seq in 1...700 {
                expectEvent(try await client.nextFrame(), streamID: 1, seq: UInt64(seq))
            }
            #expect(try await client.nextFrame().kind == .complete(Wire.Complete(lastSeq: 700)))
            #expect(executor.batchesEmitted.withLockedValue { $0 } == 3)
            await client.close()
        }
    }

    @Test func aBatchBeyondTheCreditWaitsForIt() async throws {
        let executor = BatchExecutor(count: 20, batch: 20)
        try await withServer(configure: { $0.executor = executor }) { _, port in
            let client = try await TestClient.connect(port: port)
            _ = try await client.handshake()
            try await client.send(open(1, window: 5))
            for seq in 1...5 {
                expectEvent(try await client.nextFrame(), streamID: 1, seq: UInt64(seq))
            }
            // The rest of the batch waits for credit: a Ping overtakes it.
            try await client.send(Wire.Frame(streamID: 0, kind: .ping(Wire.Ping(nonce: 1))))
            #expect(try await client.nextFrame().kind == .pong(Wire.Pong(nonce: 1)))
            #expect(executor.batchesEmitted.withLockedValue { $0 } == 0)
            try await client.send(Wire.Frame(streamID: 1, kind: .window(Wire.Window(credit: 10))))
            for seq in 6...15 {
                expectEvent(try await client.nextFrame(), streamID: 1, seq: UInt64(seq))
            }
            try await client.send(Wire.Frame(streamID: 0, kind: .ping(Wire.Ping(nonce: 2))))
            #expect(try await client.nextFrame().kind == .pong(Wire.Pong(nonce: 2)))
            try await client.send(Wire.Frame(streamID: 1, kind: .window(Wire.Window(credit: 10))))
            for seq in 16...20 {
                expectEvent(try await client.nextFrame(), streamID: 1, seq: UInt64(seq))
            }
            #expect(try await client.nextFrame().kind == .complete(Wire.Complete(lastSeq: 20)))
            #expect(executor.batchesEmitted.withLockedValue { $0 } == 1)
            await client.close()
        }
    }

    @Test func cancelStopsTheOperation() async throws {
        let executor = CountingExecutor(count: 1_000)
        try await withServer(configure: { $0.executor = executor }) { _, port in
            let client = try await TestClient.connect(port: port)
            _ = try await client.handshake()
            try await client.send(open(1, window: 2))
            expectEvent(try await client.nextFrame(), streamID: 1, seq: 1)
            expectEvent(try await client.nextFrame(), streamID: 1, seq: 2)
            try await client.send(Wire.Frame(streamID: 1, kind: .cancel(Wire.Cancel(reason: "test"))))
            try await client.send(Wire.Frame(streamID: 0, kind: .ping(Wire.Ping(nonce: 2))))
            // Stream 1 ends with the Complete that confirms the Cancel, and nothing more.
            let cancelled = Wire.Complete(lastSeq: 2, error: Wire.OperationError(code: .operationCancelled, message: "the operation was cancelled"))
            #expect(try await client.nextFrame() == Wire.Frame(streamID: 1, kind: .complete(cancelled)))
            #expect(try await client.nextFrame().kind == .pong(Wire.Pong(nonce: 2)))
            try await eventually(timeout: .seconds(20)) { executor.cancelled.withLockedValue { $0 } }
            #expect(executor.emitted.withLockedValue { $0 } == 2)
            await client.close()
        }
    }

    @Test func disconnectCancelsTheOperation() async throws {
        let executor = CountingExecutor(count: 1_000)
        try await withServer(configure: { $0.executor = executor }) { _, port in
            let client = try await TestClient.connect(port: port)
            _ = try await client.handshake()
            try await client.send(open(1, window: 1))
            expectEvent(try await client.nextFrame(), streamID: 1, seq: 1)
            await client.close()
            try await eventually(timeout: .seconds(20)) { executor.cancelled.withLockedValue { $0 } }
        }
    }

    @Test func streamsAreMultiplexed() async throws {
        let executor = CountingExecutor(count: 50)
        try await withServer(configure: { $0.executor = executor }) { _, port in
            let client = try await TestClient.connect(port: port)
            _ = try await client.handshake()
            try await client.send(open(1, window: 100))
            try await client.send(open(3, window: 100))
            var nextSeq: [UInt64: UInt64] = [1: 1, 3: 1]
            var completed = Set<UInt64>()
            while completed.count < 2 {
                let frame = try await client.nextFrame()
                switch frame.kind {
                case .event(let event):
                    #expect(event.seq == nextSeq[frame.streamID])
                    nextSeq[frame.streamID, default: 0] += 1
                case .complete(let complete):
                    #expect(complete.lastSeq == 50)
                    completed.insert(frame.streamID)
                default:
                    Issue.record("unexpected \(frame)")
                }
            }
            #expect(nextSeq == [1: 51, 3: 51])
            await client.close()
        }
    }

    @Test func assetChunksSentFromTheirBuffersArriveAsEventsInOrder() async throws {
        let chunks = [1, 16_384, 1 << 20, 300_000, 7]
        try await withServer(configure: { $0.executor = ChunkExecutor(chunks: chunks) }) { _, port in
            let (client, _) = try await TestClient.conformant(port: port)
            try await client.send(open(1, window: 3))
            var received: [Wire.Event] = []
            while received.count < chunks.count + 2 {
                let frame = try await client.nextFrame()
                guard case .event(let event) = frame.kind else {
                    Issue.record("expected an event, got \(frame)")
                    return
                }
                received.append(event)
                // One credit at a time after the first window: chunks wait for credit too.
                try await client.send(Wire.Frame(streamID: 1, kind: .window(Wire.Window(credit: 1))))
            }
            #expect(received.map(\.seq) == Array(1...UInt64(chunks.count + 2)))
            var offset: UInt64 = 0
            for (index, bytes) in chunks.enumerated() {
                let chunk = Wire.AssetChunk(offset: offset, data: ChunkExecutor.content(chunk: index, bytes: bytes))
                #expect(received[index + 1].payload == .downloadAsset(Wire.DownloadAssetEvent(callback: .chunk(chunk))))
                offset += UInt64(bytes)
            }
            #expect(try await client.nextFrame().kind == .complete(Wire.Complete(lastSeq: UInt64(chunks.count + 2))))
            await client.close()
        }
    }

    @Test func anAssetChunkAboveTheClientsMaxFrameBytesEndsItsStreamWithLimitExceeded() async throws {
        try await withServer(configure: { $0.executor = ChunkExecutor(chunks: [100, 20_000]) }) { _, port in
            // The client's decoder refuses any frame above 16 KiB: an oversize one would fail here.
            let (client, _) = try await TestClient.conformant(port: port, maxFrameBytes: 16_384)
            try await client.send(open(1, window: 10))
            let (events, complete) = try await client.untilComplete(streamID: 1)
            #expect(events.map(\.seq) == [1, 2], "the progress event and the small chunk arrive")
            #expect(complete.error?.code == .limitExceeded)
            #expect(complete.error?.message.contains("16384") == true, "\(complete)")
            #expect(complete.lastSeq == 2)
            try await client.expectNothingPending()
            await client.close()
        }
    }
}

