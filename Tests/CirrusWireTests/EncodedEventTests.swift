import CirrusWire
import NIOCore
import Testing

private func savedRecordEvent(seq: UInt64) -> Wire.Event {
    let zone = Wire.RecordZoneID(zoneName: "Notes", ownerName: "_alice")
    let record = Wire.Record(
        recordID: Wire.RecordID(recordName: "note-0001", zoneID: zone),
        recordType: "Note",
        recordChangeTag: "7f3a",
        fields: [
            Wire.RecordField(key: "title", value: Wire.FieldValue(kind: .stringValue("Groceries ✈︎"))),
            Wire.RecordField(key: "count", value: Wire.FieldValue(kind: .int64Value(12))),
        ]
    )
    let save = Wire.ModifyRecordsPerRecordSave(recordID: record.recordID, outcome: .record(record))
    return Wire.Event(seq: seq, payload: .modifyRecords(Wire.ModifyRecordsEvent(callback: .perRecordSave(save))))
}

@Suite("Events sent in the wire format they were stored in")
struct EncodedEventTests {
    @Test(arguments: [(UInt64(1), UInt64(7)), (300, 1), (.max, .max), (1, 0)])
    func theSplicedFrameIsByteForByteTheEncodedFrame(seq: UInt64, streamID: UInt64) throws {
        let event = savedRecordEvent(seq: seq)
        var expected = ByteBuffer()
        try FrameEncoder.encode(Wire.Frame(streamID: streamID, kind: .event(event)), into: &expected)
        var spliced = ByteBuffer()
        let encoded = try Wire.EncodedEvent(seq: seq, bytes: event.serializedBytes())
        try FrameEncoder.encode(streamID: streamID, event: encoded, into: &spliced)
        #expect(spliced == expected)
        #expect(FrameEncoder.frameBodySize(streamID: streamID, event: encoded) == expected.readableBytes - 4)
        #expect(try encoded.decoded() == event)
        #expect(Wire.EncodedEvent(event) == encoded)
    }

    @Test func anOversizeSplicedFrameIsRefusedAndWritesNothing() throws {
        let encoded = Wire.EncodedEvent(savedRecordEvent(seq: 1))
        var buffer = ByteBuffer(string: "kept")
        #expect(throws: WireError.self) {
            try FrameEncoder.encode(streamID: 3, event: encoded, into: &buffer, maximumFrameBytes: 20)
        }
        #expect(buffer == ByteBuffer(string: "kept"))
    }

    @Test func storedBytesWithAnotherSeqAreRefused() {
        let bytes = savedRecordEvent(seq: 5).serializedBytes()
        #expect(throws: WireError.self) { try Wire.EncodedEvent(seq: 6, bytes: bytes) }
    }

    @Test func storedBytesThatAreNotOneEventAreRefused() {
        let bytes = savedRecordEvent(seq: 5).serializedBytes()
        let malformed: [[UInt8]] = [
            [],  // no payload
            Wire.Event(seq: 5).serializedBytes(),  // no payload either
            Array(bytes.dropLast()),  // the payload runs past the end
            bytes + Array(bytes.dropFirst(2)),  // two payloads (seq 5 is the first two bytes)
            [0x08, 0x85],  // a cut-off varint
            [0x08] + Array(repeating: 0xFF, count: 11),  // an overlong varint
            [0x08, 0x05, 0xA5, 0x01, 0x00, 0x00, 0x00, 0x00],  // a fixed32 field 20
            [0x12, 0x00],  // field 2 is not a payload
        ]
        for bytes in malformed {
            #expect(throws: WireError.self, "\(bytes)") { try Wire.EncodedEvent(seq: 5, bytes: bytes) }
        }
    }
}
