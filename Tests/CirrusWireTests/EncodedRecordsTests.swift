import CirrusWire
import NIOCore
import Testing

/// Records written ahead into a modify-records `Open` (``Wire/EncodedRecords``,
/// ``FrameEncoder/encode(_:appendingRecordsToSave:into:maximumFrameBytes:)``) and the
/// ``ProtobufWriter`` that writes them: the same bytes protobuf-c packs for the whole frame.
@Suite("Records written ahead into an Open")
struct EncodedRecordsTests {
    private static func bytes(_ encode: (inout ByteBuffer) throws -> Void) rethrows -> [UInt8] {
        var buffer = ByteBuffer()
        try encode(&buffer)
        return Array(buffer.readableBytesView)
    }

    /// A record of random parts and fields, now and then one far over 16 KiB (a length of
    /// three bytes).
    private static func record(_ parts: inout RandomRecordParts) -> Wire.Record {
        var record = parts.record()
        for i in 0..<Int.random(in: 0..<4) {
            let kind: Wire.FieldValue.Kind =
                switch Int.random(in: 0..<5) {
                case 0: .stringValue(parts.name())
                case 1: .int64Value(Int64.random(in: .min ... .max))
                case 2: .doubleValue(Double.random(in: -1e9...1e9))
                case 3: .bytesValue(Array(repeating: 7, count: Int.random(in: 0...1) == 0 ? 3 : 20_000))
                default: .dateValue(parts.date() ?? Wire.Timestamp())
                }
            record.fields.append(Wire.RecordField(key: "f\(i)", value: Wire.FieldValue(kind: kind), isEncrypted: parts.bool()))
        }
        if parts.bool() { record.parent = Wire.Reference(recordID: parts.id(), action: .none) }
        if parts.bool() { record.changedKeys = ["f0", parts.name()] }
        return record
    }

    @Test("An Open with records written ahead is the frame with the records in its request, byte for byte")
    func sameBytes() throws {
        var parts = RandomRecordParts()
        for _ in 0..<300 {
            let records = (0..<Int.random(in: 0..<6)).map { _ in Self.record(&parts) }
            var request = Wire.ModifyRecordsRequest(
                recordIDsToDelete: (0..<Int.random(in: 0..<3)).compactMap { _ in parts.id() },
                savePolicy: [.unspecified, .allKeys, .changedKeys, .ifServerRecordUnchanged].randomElement() ?? .allKeys,
                clientChangeToken: parts.bool() ? [] : [1, 2, 3],
                isAtomic: [nil, true, false].randomElement() ?? nil,
                failuresOnly: parts.bool(),
                omitFieldsAsSent: parts.bool())
            var open = Wire.Open(
                operationID: parts.name(), databaseScope: parts.bool() ? .private : .unspecified,
                containerIdentifier: parts.name(), initialWindow: parts.bool() ? 0 : 64)
            if parts.bool() { open.group = Wire.OperationGroup(operationGroupID: parts.name(), name: parts.name()) }
            let streamID: UInt64 = [0, 1, 300, .max].randomElement() ?? 1
            var whole = open
            request.recordsToSave = records
            whole.request = .modifyRecords(request)
            let expected = try Self.bytes {
                try FrameEncoder.encode(Wire.Frame(streamID: streamID, kind: .open(whole)), into: &$0)
            }
            request.recordsToSave = []
            open.request = .modifyRecords(request)
            var written = Wire.EncodedRecords()
            for record in records { written.append(record) }
            #expect(written.count == records.count)
            #expect(try written.decoded() == records)
            let frame = Wire.Frame(streamID: streamID, kind: .open(open))
            let actual = try Self.bytes { try FrameEncoder.encode(frame, appendingRecordsToSave: written, into: &$0) }
            #expect(actual == expected)
            var buffer = ByteBuffer(bytes: actual)
            var decoder = FrameDecoder()
            #expect(try decoder.decode(buffer: &buffer) == Wire.Frame(streamID: streamID, kind: .open(whole)))
        }
    }

    @Test("An Open written for storage decodes to the same Open, and is protobuf-c's bytes where no record has rarer parts")
    func storedOpen() throws {
        var parts = RandomRecordParts()
        for round in 0..<300 {
            var records = (0..<Int.random(in: 0..<6)).map { _ in Self.record(&parts) }
            if round % 10 == 0, !records.isEmpty {
                // A field kind the direct writer leaves to protobuf-c.
                records[0].fields.append(Wire.RecordField(
                    key: "at", value: Wire.FieldValue(kind: .locationValue(Wire.Location(latitude: 1, longitude: 2)))))
            }
            let request = Wire.ModifyRecordsRequest(
                recordsToSave: records,
                recordIDsToDelete: (0..<Int.random(in: 0..<3)).compactMap { _ in parts.id() },
                savePolicy: [.unspecified, .allKeys, .changedKeys].randomElement() ?? .allKeys,
                clientChangeToken: parts.bool() ? [] : [1, 2, 3],
                isAtomic: [nil, true, false].randomElement() ?? nil,
                failuresOnly: parts.bool())
            var open = Wire.Open(
                operationID: parts.name(), databaseScope: parts.bool() ? .private : .unspecified,
                containerIdentifier: parts.name(), initialWindow: parts.bool() ? 0 : 64, request: .modifyRecords(request))
            if parts.bool() { open.configuration = Wire.OperationConfiguration(isLongLived: true) }
            if parts.bool() { open.group = Wire.OperationGroup(operationGroupID: parts.name(), name: parts.name()) }
            let stored = open.serializedBytesWritingRecords()
            #expect(try Wire.Open(serializedBytes: stored) == open)
            if records.allSatisfy({ $0.parent == nil && $0.changedKeys.isEmpty }) {
                #expect(stored == open.serializedBytes())
            }
        }
        // Another request, or a save of no records: protobuf-c's bytes.
        let fetch = Wire.Open(operationID: "f", request: .fetchRecords(Wire.FetchRecordsRequest(recordIDs: [Wire.RecordID(recordName: "r")])))
        #expect(fetch.serializedBytesWritingRecords() == fetch.serializedBytes())
        let empty = Wire.Open(operationID: "e", request: .modifyRecords(Wire.ModifyRecordsRequest(isAtomic: true)))
        #expect(empty.serializedBytesWritingRecords() == empty.serializedBytes())
    }

    @Test("Over the frame limit the Open is refused and nothing is written")
    func frameLimit() throws {
        var written = Wire.EncodedRecords()
        written.append(Wire.Record(recordID: Wire.RecordID(recordName: "r"), recordType: String(repeating: "T", count: 500)))
        let frame = Wire.Frame(streamID: 1, kind: .open(Wire.Open(operationID: "op", request: .modifyRecords(Wire.ModifyRecordsRequest()))))
        let size = try Self.bytes { try FrameEncoder.encode(frame, appendingRecordsToSave: written, into: &$0) }.count - 4
        var buffer = ByteBuffer(bytes: [9, 9])
        #expect(throws: WireError.self) {
            try FrameEncoder.encode(frame, appendingRecordsToSave: written, into: &buffer, maximumFrameBytes: size - 1)
        }
        #expect(Array(buffer.readableBytesView) == [9, 9])
        try FrameEncoder.encode(frame, appendingRecordsToSave: written, into: &buffer, maximumFrameBytes: size)
        #expect(buffer.readableBytes == 2 + 4 + size)
    }

    @Test("Records go only into an Open of a modify-records request without records of its own")
    func otherFrames() {
        var written = Wire.EncodedRecords()
        written.append(Wire.Record(recordID: Wire.RecordID(recordName: "r"), recordType: "T"))
        let frames: [Wire.Frame] = [
            Wire.Frame(streamID: 0, kind: .ping(Wire.Ping(nonce: 1))),
            Wire.Frame(streamID: 1, kind: .open(Wire.Open(operationID: "op"))),
            Wire.Frame(streamID: 1, kind: .open(Wire.Open(operationID: "op", request: .fetchRecords(Wire.FetchRecordsRequest())))),
            Wire.Frame(
                streamID: 1,
                kind: .open(
                    Wire.Open(
                        operationID: "op",
                        request: .modifyRecords(Wire.ModifyRecordsRequest(recordsToSave: [Wire.Record(recordType: "Own")]))))),
        ]
        for frame in frames {
            var buffer = ByteBuffer()
            #expect(throws: WireError.self) { try FrameEncoder.encode(frame, appendingRecordsToSave: written, into: &buffer) }
            #expect(buffer.readableBytes == 0)
        }
    }

    @Test("A record whose writer gives up leaves the records before it as they were")
    func unwritableRecord() throws {
        var written = Wire.EncodedRecords()
        let first = Wire.Record(recordID: Wire.RecordID(recordName: "a"), recordType: "T")
        written.append(first)
        let before = written
        // As `CKRecord.writeForSave` writes: begin, write, end kept or not.
        func write(_ body: (inout ProtobufWriter) throws(ProtobufWriter.Unwritable) -> Int) -> Int? {
            var record = written.beginRecord()
            let result = try? body(&record.writer)
            written.endRecord(record, keeping: result != nil)
            return result
        }
        let result = write { (out) throws(ProtobufWriter.Unwritable) in
            try out.string(2, String(repeating: "x", count: 300))
            try out.string(3, "with\u{0}NUL")
            return 1
        }
        #expect(result == nil)
        #expect(written == before)
        let second = write { (out) throws(ProtobufWriter.Unwritable) in
            try out.string(2, "Note")
            return 2
        }
        #expect(second == 2)
        #expect(try written.decoded() == [first, Wire.Record(recordType: "Note")])
    }

    @Test("The writer's scalars, strings and nested lengths are protobuf-c's")
    func writerMatchesProtobufC() throws {
        for seconds: Int64 in [0, 1, -1, .min, .max, 1_700_000_000] {
            for nanos: Int32 in [0, 1, -5, .max, .min] {
                var out = ProtobufWriter()
                out.int64(1, seconds)
                out.int32(2, nanos)
                #expect(out.bytes == Wire.Timestamp(seconds: seconds, nanos: nanos).serializedBytes())
            }
        }
        // Nested lengths of one, two and three bytes: the content moves behind the longer ones.
        for count in [0, 1, 120, 127, 128, 300, 16_383, 16_384, 70_000] {
            let name = String(repeating: "é", count: count / 2) + String(repeating: "x", count: count % 2)
            var out = ProtobufWriter()
            try out.message(1) { (id) throws(ProtobufWriter.Unwritable) in
                try id.string(1, name)
                try id.message(2) { (zone) throws(ProtobufWriter.Unwritable) in try zone.string(1, name) }
            }
            try out.string(2, "Note")
            let record = Wire.Record(
                recordID: Wire.RecordID(recordName: name, zoneID: Wire.RecordZoneID(zoneName: name)), recordType: "Note")
            #expect(out.bytes == record.serializedBytes(), "\(count)")
        }
        var out = ProtobufWriter()
        #expect(throws: ProtobufWriter.Unwritable.self) { try out.stringAlways(1, "a\u{0}b") }
    }
}
