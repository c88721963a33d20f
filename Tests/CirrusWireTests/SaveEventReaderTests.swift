import NIOCore
import Testing

@testable import CirrusWire

/// A saved record's event read straight from its bytes (`SaveEventReader`): the frame protobuf-c
/// decodes from the same bytes, or nil, for which `FrameDecoder` decodes the generic way.
@Suite("Save events read directly")
struct SaveEventReaderTests {
    private static func direct(_ body: [UInt8]) -> Wire.Frame? {
        body.withUnsafeBytes { SaveEventReader.frame($0) }
    }

    private static func frame(streamID: UInt64, seq: UInt64, _ save: Wire.ModifyRecordsPerRecordSave) -> Wire.Frame {
        Wire.Frame(
            streamID: streamID,
            kind: .event(Wire.Event(seq: seq, payload: .modifyRecords(Wire.ModifyRecordsEvent(callback: .perRecordSave(save))))))
    }

    private static func randomSave(_ random: inout RandomRecordParts) -> Wire.ModifyRecordsPerRecordSave {
        Wire.ModifyRecordsPerRecordSave(recordID: random.id(), outcome: .record(random.record()), fieldsAsSent: random.bool())
    }

    /// Random saves, as protobuf-c writes their frames and as the server's direct writer does:
    /// each is read, and read as protobuf-c reads it.
    @Test func randomSaveEventsReadAsProtobufCReadsThem() throws {
        var random = RandomRecordParts()
        for round in 0..<500 {
            let save = Self.randomSave(&random)
            let streamID: UInt64 = [0, 1, 3, 1 << 40].randomElement() ?? 1
            let seq: UInt64 = [0, 1, 127, 128, UInt64.max].randomElement() ?? 1
            let frame = Self.frame(streamID: streamID, seq: seq, save)
            let body = frame.serializedBytes()
            let read = try #require(Self.direct(body), "round \(round): \(frame)")
            #expect(read == frame, "round \(round)")
            #expect(read == genericallyDecodedFrame(body), "round \(round)")
            if let payload = save.directPayload {
                var buffer = ByteBuffer()
                try FrameEncoder.encode(streamID: streamID, seq: seq, payload: payload, into: &buffer)
                let written = Array(buffer.readableBytesView.dropFirst(FrameDecoder.lengthPrefixBytes))
                #expect(Self.direct(written) == frame, "round \(round): the server's own bytes")
            }
        }
    }

    /// The ID the server writes twice (the save's and its record's) and a last modifier who is the
    /// creator are read once and the value used again; IDs of the same length that differ in a
    /// byte, or that differ in length, are each read as they are.
    @Test func repeatedIDsReadAsProtobufCReadsThem() throws {
        var random = RandomRecordParts()
        var generator = SystemRandomNumberGenerator()
        /// `id` with the last byte of its name changed (same length), or with a name one longer.
        func altered(_ id: Wire.RecordID?) -> Wire.RecordID? {
            var id = id ?? Wire.RecordID(recordName: "n")
            if id.recordName.isEmpty || Bool.random(using: &generator) {
                id.recordName += "x"
            } else {
                let last = id.recordName.utf8.last == UInt8(ascii: "y") ? "z" : "y"
                id.recordName = String(id.recordName.dropLast()) + last
            }
            return id
        }
        var reused = 0
        for round in 0..<600 {
            let id = random.id()
            var record = random.record()
            let sameID = round % 3 != 2
            let sameUser = round % 2 == 0
            record.recordID = sameID ? id : altered(id)
            record.lastModifiedUserRecordID = sameUser ? record.creatorUserRecordID : altered(record.creatorUserRecordID)
            if sameID && id != nil { reused += 1 }
            let save = Wire.ModifyRecordsPerRecordSave(recordID: id, outcome: .record(record), fieldsAsSent: random.bool())
            let frame = Self.frame(streamID: 3, seq: UInt64(round), save)
            var bodies = [frame.serializedBytes()]
            if let payload = save.directPayload {
                var buffer = ByteBuffer()
                try FrameEncoder.encode(streamID: 3, seq: UInt64(round), payload: payload, into: &buffer)
                bodies.append(Array(buffer.readableBytesView.dropFirst(FrameDecoder.lengthPrefixBytes)))
            }
            for body in bodies {
                let read = try #require(Self.direct(body), "round \(round): \(frame)")
                #expect(read == frame, "round \(round)")
                #expect(read == genericallyDecodedFrame(body), "round \(round)")
            }
        }
        #expect(reused > 100)
    }

    /// Bytes cut short, changed, inserted or repeated: whatever the direct reader returns is what
    /// protobuf-c decodes, and where that refuses the bytes, the direct reader returns nil.
    @Test func alteredBytesReadAsProtobufCReadsThemOrNotAtAll() throws {
        var random = RandomRecordParts()
        var generator = SystemRandomNumberGenerator()
        var readDirectly = 0
        var refused = 0
        for round in 0..<3_000 {
            var body = Self.frame(streamID: 5, seq: 9, Self.randomSave(&random)).serializedBytes()
            guard !body.isEmpty else { continue }
            let at = Int.random(in: 0..<body.count, using: &generator)
            switch round % 4 {
            case 0: body.removeLast(Int.random(in: 1...body.count, using: &generator))
            case 1: body[at] = UInt8.random(in: 0...255, using: &generator)
            case 2: body.insert(UInt8.random(in: 0...255, using: &generator), at: at)
            default: body += body[at...]
            }
            let generic = genericallyDecodedFrame(body)
            if generic == nil { refused += 1 }
            if let read = Self.direct(body) {
                readDirectly += 1
                #expect(read == generic, "round \(round): \(body)")
            }
        }
        #expect(readDirectly > 100)
        #expect(refused > 100)
    }

    @Test func otherFramesAreLeftToProtobufC() throws {
        let id = Wire.RecordID(recordName: "note-1", zoneID: Wire.RecordZoneID(zoneName: "Notes", ownerName: "__defaultOwner__"))
        var withFields = Wire.Record(recordID: id, recordType: "Note")
        withFields.fields = [Wire.RecordField(key: "title", value: Wire.FieldValue(kind: .stringValue("Groceries")))]
        var withParent = Wire.Record(recordID: id, recordType: "Note")
        withParent.parent = Wire.Reference(recordID: id)
        let failed = Wire.ModifyRecordsPerRecordSave(
            recordID: id, outcome: .error(Wire.OperationError(code: .serverRecordChanged, message: "changed")))
        let frames: [Wire.Frame] = [
            Self.frame(streamID: 1, seq: 1, Wire.ModifyRecordsPerRecordSave(recordID: id, outcome: .record(withFields))),
            Self.frame(streamID: 1, seq: 1, Wire.ModifyRecordsPerRecordSave(recordID: id, outcome: .record(withParent))),
            Self.frame(streamID: 1, seq: 2, failed),
            Wire.Frame(
                streamID: 1,
                kind: .event(
                    Wire.Event(
                        seq: 3,
                        payload: .modifyRecords(
                            Wire.ModifyRecordsEvent(
                                callback: .perRecordDelete(Wire.ModifyRecordsPerRecordDelete(recordID: id))))))),
            Wire.Frame(streamID: 1, kind: .event(Wire.Event(seq: 4))),
            Wire.Frame(streamID: 1, kind: .window(Wire.Window(credit: 8))),
            Wire.Frame(streamID: 1, kind: .complete(Wire.Complete())),
            Wire.Frame(streamID: 7),
            Wire.Frame(),
        ]
        for frame in frames {
            let body = frame.serializedBytes()
            #expect(Self.direct(body) == nil, "\(frame)")
            #expect(genericallyDecodedFrame(body) == frame)
        }
    }

    /// Varints written longer than they need be: keys and lengths of five bytes are read, of six
    /// they are left to the generic path (protobuf-c refuses them); a bool of ten bytes is true
    /// when any byte holds a bit, even one a 64-bit value drops.
    @Test func paddedVarintsReadAsProtobufCReadsThem() throws {
        /// `value` as a varint of exactly `bytes` bytes (0x80-padded).
        func varint(_ value: UInt64, bytes: Int) -> [UInt8] {
            var out: [UInt8] = []
            var value = value
            for index in 0..<bytes {
                let last = index == bytes - 1
                out.append(UInt8(truncatingIfNeeded: value & 0x7F) | (last ? 0 : 0x80))
                value >>= 7
            }
            return out
        }
        func field(_ number: UInt64, _ content: [UInt8], keyBytes: Int = 1, lengthBytes: Int = 1) -> [UInt8] {
            varint(number << 3 | 2, bytes: max(keyBytes, number >= 16 ? 2 : 1)) + varint(UInt64(content.count), bytes: lengthBytes)
                + content
        }
        func frame(streamIDKeyBytes: Int = 1, eventLengthBytes: Int = 1, asSent: [UInt8] = [1]) -> [UInt8] {
            let save = field(1, field(1, Array("note-1".utf8))) + field(2, field(2, Array("Note".utf8))) + [4 << 3] + asSent
            let event = [1 << 3, 9] + field(20, field(2, save))
            return varint(1 << 3, bytes: streamIDKeyBytes) + [3] + field(5, event, lengthBytes: eventLengthBytes)
        }
        let cases: [(name: String, body: [UInt8], read: Bool)] = [
            ("canonical", frame(), true),
            ("a five-byte key", frame(streamIDKeyBytes: 5), true),
            ("a six-byte key", frame(streamIDKeyBytes: 6), false),
            ("a five-byte length", frame(eventLengthBytes: 5), true),
            ("a six-byte length", frame(eventLengthBytes: 6), false),
            ("a ten-byte true", frame(asSent: [UInt8](repeating: 0x80, count: 9) + [0x02]), true),
            ("a ten-byte false", frame(asSent: varint(0, bytes: 10)), true),
            ("an eleven-byte bool", frame(asSent: varint(1, bytes: 11)), false),
        ]
        for (name, body, read) in cases {
            let direct = Self.direct(body)
            #expect((direct != nil) == read, "\(name)")
            #expect(direct == nil || direct == genericallyDecodedFrame(body), "\(name)")
            if !read { #expect(genericallyDecodedFrame(body) == nil, "\(name): protobuf-c refuses it too") }
        }
        guard case .event(let event)? = Self.direct(frame(asSent: [UInt8](repeating: 0x80, count: 9) + [0x02]))?.kind,
            case .modifyRecords(let payload) = event.payload, case .perRecordSave(let save) = payload.callback
        else {
            Issue.record("a ten-byte true is not read")
            return
        }
        #expect(save.fieldsAsSent)
    }

    /// A string holding a NUL (which protobuf-c would cut short) is left to the generic path,
    /// which refuses it: the frame decoder's answer is the same as for any other frame.
    @Test func aStringHoldingNULIsRefusedAsTheGenericPathRefusesIt() throws {
        let id = Wire.RecordID(recordName: "note\u{0}-1", zoneID: Wire.RecordZoneID(zoneName: "Notes", ownerName: "__defaultOwner__"))
        let save = Wire.ModifyRecordsPerRecordSave(recordID: id, outcome: .record(Wire.Record(recordID: id, recordType: "Note")))
        // Written by the server's direct writer, which writes every byte of a string.
        var buffer = ByteBuffer()
        try FrameEncoder.encode(streamID: 1, seq: 1, payload: try #require(save.directPayload), into: &buffer)
        let body = Array(buffer.readableBytesView.dropFirst(FrameDecoder.lengthPrefixBytes))
        #expect(body.contains(0))
        #expect(Self.direct(body) == nil)
        #expect(genericallyDecodedFrame(body) == nil)
        var decoder = FrameDecoder()
        #expect(throws: WireError.self) { try decoder.decode(buffer: &buffer) }
    }

    /// Invalid UTF-8 is repaired as the generic path repairs it, and CloudKit's owner name reads
    /// as the same string.
    @Test func invalidUTF8AndTheDefaultOwnerReadAsTheyDoThroughProtobufC() throws {
        var body = Self.frame(
            streamID: 1, seq: 1,
            Wire.ModifyRecordsPerRecordSave(
                recordID: Wire.RecordID(recordName: "ab", zoneID: Wire.RecordZoneID(zoneName: "Z", ownerName: "__defaultOwner__")),
                outcome: .record(Wire.Record(recordType: "Note")))
        ).serializedBytes()
        let name = try #require(body.firstIndex(of: UInt8(ascii: "a")))
        body[name] = 0xC3  // the first byte of a two-byte sequence, cut off by "b"
        let read = try #require(Self.direct(body))
        #expect(read == genericallyDecodedFrame(body))
        guard case .event(let event) = read.kind, case .modifyRecords(let payload) = event.payload,
            case .perRecordSave(let save) = payload.callback
        else {
            Issue.record("not a save event: \(read)")
            return
        }
        #expect(save.recordID?.recordName == "\u{FFFD}b")
        #expect(save.recordID?.zoneID?.ownerName == "__defaultOwner__")
    }
}
