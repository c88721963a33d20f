// Bytes a peer sends → FrameDecoder (length prefix, size bound) → Frame decode → the server's
// connection state machine, which admits or refuses each frame as ConnectionHandler would.
import CirrusWire
import FuzzSupport
import NIOCore

/// Frames the target feeds the state machine from one input at most; inputs are short anyway.
private let maximumFrames = 64

@_cdecl("LLVMFuzzerInitialize")
public func initialize(_ argc: FuzzArgc, _ argv: FuzzArgv) -> CInt {
    SeedWriter.writeIfRequested(frameSeeds)
    return 0
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzFrame(_ start: UnsafeRawPointer?, _ count: Int) -> CInt {
    var buffer = ByteBuffer(bytes: FuzzInput.bytes(start, count))
    var decoder = FrameDecoder()
    var machine = ConnectionStateMachine(role: .server, configuration: .init(), now: .now())
    for _ in 0..<maximumFrames {
        // The body the decoder is about to read: it reads a saved record's event and a save
        // request directly, and must read them as the generic decoder does.
        let body = buffer.getInteger(at: buffer.readerIndex, as: UInt32.self).flatMap { length in
            buffer.getBytes(at: buffer.readerIndex + FrameDecoder.lengthPrefixBytes, length: Int(length))
        }
        let frame: Wire.Frame
        do {
            guard let decoded = try decoder.decode(buffer: &buffer) else { return 0 }
            frame = decoded
        } catch {
            return 0  // The server answers with a ConnectionError and closes.
        }
        // (Compared as bytes: a NaN in a location is never equal to itself.)
        if let body, (try? Wire.Frame(serializedBytes: body))?.serializedBytes() != frame.serializedBytes() {
            fatalError("the frame decoder and the generic decoder disagree: \(frame)")
        }
        // Whatever decodes must encode again, and that encoding must decode and encode to the
        // same bytes. (Bytes, not values: a NaN in a location is never equal to itself.)
        let reencoded = frame.serializedBytes()
        guard let again = try? Wire.Frame(serializedBytes: reencoded), again.serializedBytes() == reencoded else {
            fatalError("a decoded frame does not survive re-encoding: \(frame)")
        }
        switch machine.receive(frame, now: .now()) {
        case .helloReceived:
            _ = machine.send(Wire.Frame(streamID: 0, kind: .helloAck(Wire.HelloAck(protocolVersion: Wire.protocolVersion))))
        case .openStream(let streamID, _), .resumeStream(let streamID, _):
            // Answer at once, as an executor that refuses the request would.
            let complete = Wire.Complete(error: Wire.OperationError(code: .invalidArguments, message: "fuzz"))
            _ = machine.send(Wire.Frame(streamID: streamID, kind: .complete(complete)))
        case .sendPong(let nonce):
            _ = machine.send(Wire.Frame(streamID: 0, kind: .pong(Wire.Pong(nonce: nonce))))
        case .closeWithError, .peerClosed:
            return 0
        case .none, .helloAckReceived, .refuseStream, .cancelStream, .completionAcknowledged, .creditAvailable, .deliver,
            .peerGoingAway:
            break
        }
    }
    return 0
}

/// Length-prefixed encodings of real frames: a handshake, then operations and control frames.
private func frameSeeds() -> [[UInt8]] {
    func prefixed(_ frames: [Wire.Frame]) -> [UInt8] {
        var bytes: [UInt8] = []
        for frame in frames {
            let body = frame.serializedBytes()
            let length = UInt32(body.count)
            bytes += [UInt8(length >> 24), UInt8((length >> 16) & 0xff), UInt8((length >> 8) & 0xff), UInt8(length & 0xff)]
            bytes += body
        }
        return bytes
    }
    let hello = Wire.Frame(
        streamID: 0,
        kind: .hello(Wire.Hello(protocolVersion: Wire.protocolVersion, clientName: "CirrusKit", clientVersion: "1.0", bearerToken: "secret",
                                limits: Wire.Limits(maxFrameBytes: 65_536, maxConcurrentStreams: 8))))
    var seeds: [[UInt8]] = [prefixed([hello])]
    for (index, open) in SampleRequests.opens.enumerated() {
        seeds.append(prefixed([hello, Wire.Frame(streamID: UInt64(2 * index + 1), kind: .open(open))]))
    }
    seeds.append(prefixed([
        hello,
        Wire.Frame(streamID: 1, kind: .open(SampleRequests.opens[0])),
        Wire.Frame(streamID: 1, kind: .window(Wire.Window(credit: 10))),
        Wire.Frame(streamID: 1, kind: .cancel(Wire.Cancel(reason: "user", completionAcknowledged: true))),
        Wire.Frame(streamID: 3, kind: .resume(Wire.Resume(operationID: "op-0", lastSeq: 2, initialWindow: 5))),
        Wire.Frame(streamID: 0, kind: .ping(Wire.Ping(nonce: 9))),
        Wire.Frame(streamID: 0, kind: .pong(Wire.Pong(nonce: 1))),
        Wire.Frame(streamID: 0, kind: .goAway(Wire.GoAway(lastStreamID: 3))),
    ]))
    // A location of NaN: the fuzzer's first find, a false alarm of an earlier round-trip check.
    let nan = Wire.Query(
        recordType: "Note",
        predicate: Wire.QueryPredicate(node: .distance(Wire.DistancePredicate(
            key: "place", fromLocation: Wire.Location(latitude: .nan, longitude: 2.3), radiusMeters: 1000, comparisonOperator: .less))))
    seeds.append(prefixed([hello, Wire.Frame(streamID: 9, kind: .open(Wire.Open(
        operationID: "op-nan", databaseScope: .public, containerIdentifier: SampleRequests.container,
        request: .query(Wire.QueryRequest(start: .query(nan))))))]))
    seeds.append(prefixed([hello, Wire.Frame(streamID: 0, kind: .error(Wire.ConnectionError(code: .protocolViolation, message: "bye")))]))
    seeds.append([0x00, 0x40, 0x00, 0x01])  // a length just over the 4 MiB bound
    // A saved record's event (what a client receives per record saved; `FrameDecoder` reads it
    // directly).
    let user = Wire.RecordID(recordName: "_alice")
    let note = Wire.RecordID(recordName: "note-1", zoneID: Wire.RecordZoneID(zoneName: "Notes", ownerName: "__defaultOwner__"))
    let saved = Wire.Record(
        recordID: note, recordType: "Note", recordChangeTag: "2-1", creationDate: Wire.Timestamp(seconds: 1_700_000_000, nanos: 5),
        modificationDate: Wire.Timestamp(seconds: 1_700_000_000, nanos: 5), creatorUserRecordID: user, lastModifiedUserRecordID: user)
    let save = Wire.ModifyRecordsPerRecordSave(recordID: note, outcome: .record(saved), fieldsAsSent: true)
    seeds.append(prefixed([
        hello, Wire.Frame(streamID: 1, kind: .open(SampleRequests.opens[0])),
        Wire.Frame(streamID: 1, kind: .event(Wire.Event(seq: 1, payload: .modifyRecords(Wire.ModifyRecordsEvent(callback: .perRecordSave(save)))))),
    ]))
    return seeds
}
