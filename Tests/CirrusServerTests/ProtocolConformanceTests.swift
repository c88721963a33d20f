import CirrusServer
import CirrusTestSupport
import CirrusWire
import Foundation
import Testing

/// A fetch of one record: any operation kind does for the rules of the stream.
let conformanceFetch = Wire.Open.Request.fetchRecords(Wire.FetchRecordsRequest(recordIDs: [recordID("x")]))

/// One test per rule of `Protos/cirrus/v1/frame.proto` and `errors.proto`, spoken in raw frames
/// against a real server over loopback TLS (no CirrusKit): the spec is what is tested. The
/// rows of the "what a failure ends" table not here are in ``TimedConformanceTests``
/// (timeouts, RATE_LIMITED, SHUTTING_DOWN), ``LongLivedConformanceTests`` (Resume) and
/// ``ServerProtocolTests`` (FRAME_TOO_LARGE, MALFORMED_FRAME, frames before Hello,
/// UNSUPPORTED_VERSION, NOT_AUTHENTICATED).
@Suite("Protocol conformance: Cancel, flow control, max_frame_bytes, what a failure ends")
struct ProtocolConformanceTests {
    /// A server whose operations emit five events and wait, after the second, at `gate`.
    private func withWaitingServer(
        configure: (inout ServerConfiguration) -> Void = { _ in },
        _ body: (Int, Gate) async throws -> Void
    ) async throws {
        let gate = Gate()
        try await withServer(configure: {
            $0.executor = SteppedExecutor(count: 5, pauseAfter: 2, gate: gate)
            configure(&$0)
        }) { _, port in
            // Whatever happens, the operations finish before the server shuts down.
            defer { gate.open() }
            try await body(port, gate)
        }
    }

    // MARK: - Cancel

    @Test func cancelOfAWaitingOperationIsAnsweredCancelledWithTheLastSeqSent() async throws {
        try await withWaitingServer { port, gate in
            let (client, _) = try await TestClient.conformant(port: port)
            try await client.open(conformanceFetch, streamID: 1)
            for seq in 1...2 {
                let frame = try await client.nextFrame()
                guard case .event(let event) = frame.kind else { throw UnexpectedFrame(frame: frame) }
                #expect(event.seq == UInt64(seq))
            }
            try await eventually("the operation waits") { gate.waiting == 1 }
            try await client.cancel(streamID: 1)
            let (events, complete) = try await client.untilComplete(streamID: 1)
            #expect(events.isEmpty)
            #expect(complete.error?.code == .operationCancelled)
            #expect(complete.lastSeq == 2)
            try await client.expectNothingPending()
        }
    }

    @Test func cancelOfAQueryWaitingForCreditIsAnsweredCancelled() async throws {
        try await withStorageServer { port in
            var alice = try await OperationClient.connect(port: port, user: "alice")
            let (_, saved) = try await alice.save((0..<3).map { note("q\($0)", title: "t\($0)") })
            #expect(saved.error == nil)
            let (client, _) = try await TestClient.conformant(port: port)
            let query = Wire.QueryRequest(start: .query(Wire.Query(recordType: "Note")))
            try await client.open(.query(query), streamID: 1, window: 1)
            let first = try await client.nextFrame()
            guard case .event(let event) = first.kind else { throw UnexpectedFrame(frame: first) }
            #expect(event.seq == 1)
            try await client.cancel(streamID: 1)
            let (events, complete) = try await client.untilComplete(streamID: 1)
            #expect(events.isEmpty, "no credit was granted")
            #expect(complete.error?.code == .operationCancelled)
            #expect(complete.lastSeq == 1)
            try await client.expectNothingPending()
        }
    }

    @Test func cancelOfAWatchIsAnsweredCancelled() async throws {
        try await withStorageServer { port in
            let (client, _) = try await TestClient.conformant(port: port)
            try await client.open(.watchNotifications(Wire.WatchNotificationsRequest()), streamID: 1, scope: .unspecified)
            // The watch says it is live, then waits for notifications.
            let first = try await client.nextFrame()
            guard case .event(let live) = first.kind, case .watchNotifications(let payload) = live.payload,
                case .live = payload.callback
            else { throw UnexpectedFrame(frame: first) }
            try await client.cancel(streamID: 1)
            let (events, complete) = try await client.untilComplete(streamID: 1)
            #expect(events.isEmpty)
            #expect(complete.error?.code == .operationCancelled)
            #expect(complete.lastSeq == 1)
            try await client.expectNothingPending()
        }
    }

    @Test func aCancelCrossingTheCompleteGetsNoSecondComplete() async throws {
        try await withStorageServer { port in
            let (client, _) = try await TestClient.conformant(port: port)
            for streamID in stride(from: UInt64(1), through: 39, by: 2) {
                try await client.open(conformanceFetch, streamID: streamID)
                try await client.cancel(streamID: streamID)
                let (events, complete) = try await client.untilComplete(streamID: streamID)
                // Either the fetch ended first (its Cancel is then ignored) or the Cancel did.
                #expect(complete.error?.code == .partialFailure || complete.error?.code == .operationCancelled, "\(complete)")
                #expect(complete.lastSeq == UInt64(events.count))
                try await client.expectNothingPending(nonce: streamID)
            }
        }
    }

    // MARK: - Flow control

    @Test func windowOnStreamZeroIsAFlowControlViolation() async throws {
        try await withServer { _, port in
            let (client, _) = try await TestClient.conformant(port: port)
            try await client.send(Wire.Frame(streamID: 0, kind: .window(Wire.Window(credit: 5))))
            #expect(try await client.expectConnectionError() == .flowControlViolation)
        }
    }

    @Test func windowsRaisingTheCreditAbove2To32AreAFlowControlViolation() async throws {
        try await withWaitingServer { port, gate in
            let (client, _) = try await TestClient.conformant(port: port)
            try await client.open(conformanceFetch, streamID: 1, window: 2)
            try await eventually("the operation waits") { gate.waiting == 1 }
            try await client.send(Wire.Frame(streamID: 1, kind: .window(Wire.Window(credit: .max - 10))))
            try await client.send(Wire.Frame(streamID: 1, kind: .window(Wire.Window(credit: .max - 10))))
            #expect(try await client.expectConnectionError() == .flowControlViolation)
        }
    }

    // MARK: - max_frame_bytes

    @Test(arguments: [
        (UInt32(0), UInt32(4_194_304)), (16_384, 16_384), (100_000, 100_000), (8_388_608, 4_194_304),
    ])
    func helloAckSaysTheSmallerMaxFrameBytes(asked: UInt32, effective: UInt32) async throws {
        try await withServer { _, port in
            let (_, ack) = try await TestClient.conformant(port: port, maxFrameBytes: asked)
            #expect(ack.limits?.maxFrameBytes == effective)
        }
    }

    @Test func maxFrameBytesBelowTheFloorIsRefused() async throws {
        try await withServer { _, port in
            let client = try await TestClient.connect(port: port)
            try await client.send(Wire.Frame(streamID: 0, kind: .hello(TestClient.hello(maxFrameBytes: 1_000))))
            let error = try await client.waitForClose()
            #expect(error?.code == .protocolViolation)
            #expect(error?.message.contains("16384") == true, "\(String(describing: error))")
        }
    }

    @Test func aRecordLargerThanTheClientsLimitEndsTheFetchWithLimitExceeded() async throws {
        try await withStorageServer { port in
            try await saveSmallAndBig(port: port)
            // The client's decoder refuses any frame above 16 KiB: an oversize one would fail here.
            let (client, ack) = try await TestClient.conformant(port: port, maxFrameBytes: 16_384)
            #expect(ack.limits?.maxFrameBytes == 16_384)
            try await client.open(.fetchRecords(Wire.FetchRecordsRequest(recordIDs: [recordID("small"), recordID("big")])), streamID: 1)
            try await expectSmallThenLimitExceeded(client, streamID: 1)
            // Only that stream ended.
            try await client.open(.fetchRecords(Wire.FetchRecordsRequest(recordIDs: [recordID("small")])), streamID: 3)
            let (again, done) = try await client.untilComplete(streamID: 3)
            #expect(again.count == 1)
            #expect(done.error == nil)
        }
    }

    /// The same through a change feed, whose plain records go out as stored bytes
    /// (`Wire.EncodedPayload`): the connection refuses the oversize one before sending it.
    @Test func aRecordLargerThanTheClientsLimitEndsTheChangeFeedWithLimitExceeded() async throws {
        try await withStorageServer { port in
            try await saveSmallAndBig(port: port)
            let (client, _) = try await TestClient.conformant(port: port, maxFrameBytes: 16_384)
            let zone = Wire.RecordZoneID(zoneName: "_defaultZone", ownerName: "__defaultOwner__")
            let request = Wire.FetchRecordZoneChangesRequest(zoneConfigurations: [Wire.ZoneChangesConfiguration(zoneID: zone)])
            try await client.open(.fetchRecordZoneChanges(request), streamID: 1)
            try await expectSmallThenLimitExceeded(client, streamID: 1)
            try await client.expectNothingPending()
        }
    }

    /// Events already in wire format are framed together, several to a write: the ones before
    /// an oversize record still go out, each a frame of its own in order, then the stream ends.
    @Test func theRecordsBeforeAnOversizeOneInAChangeFeedArriveFramedInOrder() async throws {
        try await withStorageServer { port in
            var alice = try await OperationClient.connect(port: port, user: "alice")
            let records = ["a", "b", "c"].map { note($0, title: $0) } + [note("big", title: String(repeating: "x", count: 40_000))]
                + [note("d", title: "d")]
            let (_, saved) = try await alice.save(records)
            #expect(saved.error == nil)
            let (client, _) = try await TestClient.conformant(port: port, maxFrameBytes: 16_384)
            let zone = Wire.RecordZoneID(zoneName: "_defaultZone", ownerName: "__defaultOwner__")
            let request = Wire.FetchRecordZoneChangesRequest(zoneConfigurations: [Wire.ZoneChangesConfiguration(zoneID: zone)])
            try await client.open(.fetchRecordZoneChanges(request), streamID: 1)
            let (events, complete) = try await client.untilComplete(streamID: 1)
            #expect(events.map(\.seq) == [1, 2, 3])
            let names = events.compactMap { event -> String? in
                guard case .fetchRecordZoneChanges(let payload)? = event.payload,
                    case .recordWasChanged(let record)? = payload.callback
                else { return nil }
                return record.recordID?.recordName
            }
            #expect(names == ["a", "b", "c"])
            #expect(complete.error?.code == .limitExceeded)
            #expect(complete.lastSeq == 3)
            try await client.expectNothingPending()
        }
    }

    /// Saves "small" and "big", a record of about 40 KB, as alice.
    private func saveSmallAndBig(port: Int) async throws {
        var alice = try await OperationClient.connect(port: port, user: "alice")
        let big = note("big", title: String(repeating: "x", count: 40_000))
        let (_, saved) = try await alice.save([note("small", title: "s"), big])
        #expect(saved.error == nil)
    }

    /// The stream sends "small" (seq 1), then ends with `LIMIT_EXCEEDED` naming the 16 KiB limit.
    private func expectSmallThenLimitExceeded(_ client: TestClient, streamID: UInt64) async throws {
        let (events, complete) = try await client.untilComplete(streamID: streamID)
        #expect(events.map(\.seq) == [1], "the small record arrives")
        #expect(complete.error?.code == .limitExceeded)
        #expect(complete.error?.message.contains("16384") == true, "\(complete)")
        #expect(complete.lastSeq == 1)
    }

    // MARK: - What a failure ends

    @Test(arguments: [
        ("Cancel on stream 0", [Wire.Frame(streamID: 0, kind: .cancel(Wire.Cancel()))], Wire.ErrorCode.protocolViolation),
        ("Event from a client", [Wire.Frame(streamID: 1, kind: .event(Wire.Event(seq: 1)))], .protocolViolation),
        ("Complete from a client", [Wire.Frame(streamID: 1, kind: .complete(Wire.Complete()))], .protocolViolation),
        ("second Hello", [Wire.Frame(streamID: 0, kind: .hello(TestClient.hello(maxFrameBytes: 0)))], .protocolViolation),
        ("Open on stream 0", [Wire.Frame(streamID: 0, kind: .open(Wire.Open(operationID: "a", request: conformanceFetch)))], .protocolViolation),
        (
            "stream ID reused",
            [
                Wire.Frame(streamID: 3, kind: .open(Wire.Open(operationID: "a", request: conformanceFetch))),
                Wire.Frame(streamID: 1, kind: .open(Wire.Open(operationID: "b", request: conformanceFetch))),
            ],
            .protocolViolation
        ),
        ("Ping off stream 0", [Wire.Frame(streamID: 1, kind: .ping(Wire.Ping(nonce: 1)))], .protocolViolation),
        ("Frame with no kind", [Wire.Frame(streamID: 0, kind: nil)], .unknownFrameKind),
    ])
    func connectionLevelFailuresEndTheConnection(_ what: String, frames: [Wire.Frame], code: Wire.ErrorCode) async throws {
        try await withWaitingServer { port, _ in
            let (client, _) = try await TestClient.conformant(port: port)
            for frame in frames {
                try await client.send(frame)
            }
            #expect(try await client.expectConnectionError() == code, "\(what)")
        }
    }

    @Test func streamLevelFailuresEndOnlyTheirStream() async throws {
        try await withWaitingServer(configure: { $0.connection.maximumConcurrentStreams = 1 }) { port, gate in
            let (client, _) = try await TestClient.conformant(port: port)
            // An Open with no request this server knows.
            try await client.open(nil, streamID: 1)
            #expect(try await client.untilComplete(streamID: 1).complete.error?.code == .unknownFrameKind)
            // A Resume of an operation that does not exist.
            let resume = Wire.Resume(operationID: "nothing", lastSeq: 0)
            try await client.send(Wire.Frame(streamID: 3, kind: .resume(resume)))
            #expect(try await client.untilComplete(streamID: 3).complete.error?.code == .unknownOperation)
            // One stream beyond max_concurrent_streams.
            try await client.open(conformanceFetch, streamID: 5)
            for _ in 1...2 {
                let frame = try await client.nextFrame()
                guard case .event = frame.kind, frame.streamID == 5 else { throw UnexpectedFrame(frame: frame) }
            }
            try await eventually("the operation waits") { gate.waiting == 1 }
            try await client.open(conformanceFetch, streamID: 7)
            #expect(try await client.untilComplete(streamID: 7).complete.error?.code == .tooManyStreams)
            try await client.expectNothingPending()
        }
    }

    @Test func aDatabaseKindWithNoScopeIsBadDatabase() async throws {
        try await withStorageServer { port in
            let (client, _) = try await TestClient.conformant(port: port)
            try await client.open(conformanceFetch, streamID: 1, scope: .unspecified)
            #expect(try await client.untilComplete(streamID: 1).complete.error?.code == .badDatabase)
            try await client.expectNothingPending()
        }
    }
}
