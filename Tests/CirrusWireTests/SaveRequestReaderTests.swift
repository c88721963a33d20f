import NIOCore
import Testing

@testable import CirrusWire

/// The frame opening a save of records read straight from its bytes (`SaveRequestReader`): the
/// frame protobuf-c decodes from the same bytes, or nil, for which `FrameDecoder` decodes the
/// generic way.
@Suite("Save requests read directly")
struct SaveRequestReaderTests {
    private static func direct(_ body: [UInt8]) -> Wire.Frame? {
        body.withUnsafeBytes { SaveRequestReader.frame($0) }
    }

    /// Equal, or (a NaN is not equal to itself) written to the same bytes.
    private static func same(_ a: Wire.Frame?, _ b: Wire.Frame?) -> Bool {
        a == b || (a != nil && b != nil && a?.serializedBytes() == b?.serializedBytes())
    }

    private static func varint(_ value: UInt64) -> [UInt8] {
        var out: [UInt8] = []
        ProtobufVarint.write(value, to: &out)
        return out
    }

    /// A length-delimited field.
    private static func field(_ number: UInt64, _ content: [UInt8]) -> [UInt8] {
        var out = varint(number << 3 | 2)
        out += varint(UInt64(content.count))
        return out + content
    }

    /// A save request's frame written by hand: one record of one field holding `value` (a
    /// `FieldValue`'s bytes), and `recordExtra` after the record's own parts.
    private static func body(value: [UInt8], recordExtra: [UInt8] = []) -> [UInt8] {
        let recordField = Self.field(1, Array("k".utf8)) + Self.field(2, value)
        var record = Self.field(1, Self.field(1, Array("r".utf8)))
        record += Self.field(2, Array("Note".utf8))
        record += Self.field(8, recordField)
        record += recordExtra
        let open = Self.field(1, Array("op".utf8)) + Self.field(20, Self.field(1, record))
        return [1 << 3, 3] + Self.field(4, open)
    }

    private static func frame(streamID: UInt64 = 3, _ open: Wire.Open) -> Wire.Frame {
        Wire.Frame(streamID: streamID, kind: .open(open))
    }

    private static func save(_ records: [Wire.Record], deleting: [Wire.RecordID] = []) -> Wire.Open {
        Wire.Open(
            operationID: "op-1", databaseScope: .private, containerIdentifier: "iCloud.test",
            request: .modifyRecords(Wire.ModifyRecordsRequest(recordsToSave: records, recordIDsToDelete: deleting)))
    }

    /// Random requests: records of every part a client sends (and the server-filled ones, which
    /// a client may send too), fields of every kind, deletions, policies, tokens, flags, a
    /// configuration and a group now and then.
    private struct RandomRequests {
        var parts = RandomRecordParts()
        var generator = SystemRandomNumberGenerator()

        mutating func chance(_ oneIn: Int) -> Bool { Int.random(in: 0..<oneIn, using: &generator) == 0 }

        mutating func record() -> Wire.Record {
            var record = parts.record()
            record.fields = parts.fields()
            if chance(4) { record.parent = parts.reference() }
            if chance(6) { record.share = parts.reference() }
            if chance(4) { record.changedKeys = parts.list { $0.name() } }
            if chance(40) { record.shareFields = Wire.ShareFields() }
            return record
        }

        mutating func configuration() -> Wire.OperationConfiguration? {
            guard !chance(3) else { return nil }
            return Wire.OperationConfiguration(
                containerIdentifier: chance(2) ? parts.name() : nil,
                qualityOfService: chance(2) ? [.unspecified, .utility, .userInitiated, .unrecognized(-9)].randomElement() : nil,
                allowsCellularAccess: chance(2) ? parts.bool() : nil, isLongLived: chance(2) ? parts.bool() : nil,
                timeoutIntervalForRequestMs: chance(2) ? UInt64(bitPattern: parts.int64()) : nil,
                timeoutIntervalForResourceMs: chance(2) ? 0 : nil)
        }

        mutating func open() -> Wire.Open {
            let records = (0..<(chance(8) ? 60 : Int.random(in: 0...4, using: &generator))).map { _ in record() }
            let request = Wire.ModifyRecordsRequest(
                recordsToSave: records, recordIDsToDelete: parts.list { $0.id() ?? Wire.RecordID() },
                savePolicy: [.unspecified, .ifServerRecordUnchanged, .changedKeys, .allKeys, .unrecognized(99)].randomElement() ?? .allKeys,
                clientChangeToken: chance(3) ? parts.bytes() : [], isAtomic: [nil, true, false].randomElement() ?? nil,
                failuresOnly: parts.bool(), omitFieldsAsSent: parts.bool())
            return Wire.Open(
                operationID: parts.name(), databaseScope: [.unspecified, .private, .public, .shared, .unrecognized(-1)].randomElement() ?? .private,
                containerIdentifier: parts.name(), configuration: configuration(),
                group: chance(5) ? Wire.OperationGroup(operationGroupID: parts.name(), quantity: 7, defaultConfiguration: configuration()) : nil,
                initialWindow: [0, 1, 64, UInt32.max].randomElement() ?? 0, request: .modifyRecords(request))
        }

        /// Whether the reader covers `open`'s records: no share fields, no location or asset.
        static func covers(_ open: Wire.Open) -> Bool {
            guard case .modifyRecords(let request) = open.request else { return false }
            return request.recordsToSave.allSatisfy { record in
                record.shareFields == nil
                    && record.fields.allSatisfy { field in
                        switch field.value?.kind {
                        case .locationValue?, .assetValue?, .locationList?, .assetList?: false
                        default: true
                        }
                    }
            }
        }
    }

    /// Random requests, as protobuf-c writes their frames and as a client writing its records
    /// straight into the request does: each covered one is read, and read as protobuf-c reads it.
    @Test func randomSaveRequestsReadAsProtobufCReadsThem() throws {
        var random = RandomRequests()
        var covered = 0
        for round in 0..<600 {
            let open = random.open()
            let streamID: UInt64 = [0, 1, 3, 1 << 40].randomElement() ?? 1
            let frame = Self.frame(streamID: streamID, open)
            let body = frame.serializedBytes()
            let read = Self.direct(body)
            #expect((read != nil) == RandomRequests.covers(open), "round \(round): \(frame)")
            guard let read else { continue }
            covered += 1
            #expect(Self.same(read, frame), "round \(round)")
            #expect(Self.same(read, genericallyDecodedFrame(body)), "round \(round)")

            guard case .modifyRecords(var request) = open.request else { continue }
            var records = Wire.EncodedRecords()
            for record in request.recordsToSave { records.append(record) }
            request.recordsToSave = []
            var withoutRecords = open
            withoutRecords.request = .modifyRecords(request)
            var buffer = ByteBuffer()
            try FrameEncoder.encode(Self.frame(streamID: streamID, withoutRecords), appendingRecordsToSave: records, into: &buffer)
            let written = Array(buffer.readableBytesView.dropFirst(FrameDecoder.lengthPrefixBytes))
            #expect(Self.same(Self.direct(written), frame), "round \(round): the records written into the request")
        }
        #expect(covered > 150)
    }

    /// Bytes cut short, changed, inserted or repeated: whatever the direct reader returns is what
    /// protobuf-c decodes, and where that refuses the bytes, the direct reader returns nil.
    @Test func alteredBytesReadAsProtobufCReadsThemOrNotAtAll() throws {
        var random = RandomRequests()
        var generator = SystemRandomNumberGenerator()
        var readDirectly = 0
        var refused = 0
        for round in 0..<3_000 {
            var open = random.open()
            guard RandomRequests.covers(open), case .modifyRecords(var request) = open.request else { continue }
            request.recordsToSave = Array(request.recordsToSave.prefix(3))
            open.request = .modifyRecords(request)
            var body = Self.frame(open).serializedBytes()
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
                #expect(Self.same(read, generic), "round \(round): \(body)")
            }
        }
        #expect(readDirectly > 100)
        #expect(refused > 100)
    }

    @Test func otherFramesAndRequestsAreLeftToProtobufC() throws {
        let id = Wire.RecordID(recordName: "note-1", zoneID: Wire.RecordZoneID(zoneName: "Notes", ownerName: "__defaultOwner__"))
        func record(_ kind: Wire.FieldValue.Kind) -> Wire.Record {
            var record = Wire.Record(recordID: id, recordType: "Note")
            record.fields = [
                Wire.RecordField(key: "title", value: Wire.FieldValue(kind: .stringValue("Groceries"))),
                Wire.RecordField(key: "other", value: Wire.FieldValue(kind: kind)),
            ]
            return record
        }
        var share = Wire.Record(recordID: id, recordType: "cloudkit.share")
        share.shareFields = Wire.ShareFields()
        let frames: [Wire.Frame] = [
            Self.frame(Self.save([record(.locationValue(Wire.Location(latitude: 1)))])),
            Self.frame(Self.save([record(.assetValue(Wire.Asset(size: 1)))])),
            Self.frame(Self.save([record(.locationList(Wire.LocationList()))])),
            Self.frame(Self.save([record(.assetList(Wire.AssetList()))])),
            Self.frame(Self.save([record(.stringValue("a")), share])),
            Self.frame(Wire.Open(operationID: "op-2", request: .fetchRecords(Wire.FetchRecordsRequest(recordIDs: [id])))),
            Self.frame(Wire.Open(operationID: "op-3")),
            Wire.Frame(streamID: 1, kind: .cancel(Wire.Cancel())),
            Wire.Frame(streamID: 1, kind: .window(Wire.Window(credit: 8))),
            Wire.Frame(streamID: 7),
            Wire.Frame(),
        ]
        for frame in frames {
            let body = frame.serializedBytes()
            #expect(Self.direct(body) == nil, "\(frame)")
            #expect(genericallyDecodedFrame(body) == frame)
        }
    }

    /// The shapes protobuf-c reads its own way: lists packed in several runs (joined) are read;
    /// a list not packed, a run of doubles not a multiple of eight bytes, a oneof given twice, a
    /// singular field given twice and an unknown field are left to it.
    @Test func listsOneofsAndRepeatedFieldsReadAsProtobufCReadsThem() throws {
        let cases: [(name: String, body: [UInt8], read: Bool)] = [
            ("an int64 list in one run", Self.body(value: Self.field(12, Self.field(1, Self.varint(1) + Self.varint(300)))), true),
            ("an int64 list in two runs", Self.body(value: Self.field(12, Self.field(1, Self.varint(1)) + Self.field(1, Self.varint(UInt64.max)))), true),
            ("an int64 list not packed", Self.body(value: Self.field(12, [1 << 3, 5, 1 << 3, 6])), false),
            ("a double list of 16 bytes", Self.body(value: Self.field(13, Self.field(1, [UInt8](repeating: 0x3F, count: 16)))), true),
            ("a double list of 12 bytes", Self.body(value: Self.field(13, Self.field(1, [UInt8](repeating: 0x3F, count: 12)))), false),
            ("an empty run", Self.body(value: Self.field(12, Self.field(1, []))), true),
            ("two kinds", Self.body(value: Self.field(1, Array("a".utf8)) + [2 << 3, 5]), false),
            ("a string kind twice", Self.body(value: Self.field(1, Array("a".utf8)) + Self.field(1, Array("b".utf8))), false),
            ("a record type twice", Self.body(value: [2 << 3, 1], recordExtra: Self.field(2, Array("Other".utf8))), false),
            ("an unknown record part", Self.body(value: [2 << 3, 1], recordExtra: Self.field(30, [])), false),
            ("changed keys", Self.body(value: [2 << 3, 1], recordExtra: Self.field(11, Array("a".utf8)) + Self.field(11, Array("b".utf8))), true),
        ]
        for (name, body, read) in cases {
            let direct = Self.direct(body)
            let generic = genericallyDecodedFrame(body)
            #expect((direct != nil) == read, "\(name)")
            #expect((generic != nil) == (name != "a double list of 12 bytes"), "\(name): protobuf-c reads it (all but that)")
            #expect(direct == nil || Self.same(direct, generic), "\(name)")
        }
    }

    /// A frame whose records protobuf-c would unpack into more than a decode may take (empty
    /// fields, two bytes each on the wire, a C struct and a pointer each unpacked) is left to the
    /// generic path, which refuses it: the reader does not build what protobuf-c would not.
    @Test func aFrameTooBigToUnpackIsLeftToTheGenericPathWhichRefusesIt() throws {
        func body(emptyFields: Int) -> [UInt8] {
            var record = Self.field(2, Array("Note".utf8))
            for _ in 0..<emptyFields { record += [8 << 3 | 2, 0] }
            return [1 << 3, 3] + Self.field(4, Self.field(1, Array("op".utf8)) + Self.field(20, Self.field(1, record) + [3 << 3, 3]))
        }
        let big = body(emptyFields: 1_600_000)
        #expect(big.count < FrameDecoder.defaultMaximumFrameBytes)
        #expect(genericallyDecodedFrame(big) == nil)
        #expect(Self.direct(big) == nil)
        // A tenth of it is read, and read as protobuf-c reads it.
        let small = body(emptyFields: 160_000)
        let read = try #require(Self.direct(small))
        #expect(Self.same(read, genericallyDecodedFrame(small)))
    }

    /// The frame decoder reads a save request as it reads any frame, and refuses one holding a
    /// string with a NUL as before.
    @Test func theFrameDecoderReadsSaveRequestsAndRefusesWhatItRefused() throws {
        var record = Wire.Record(recordID: Wire.RecordID(recordName: "n1"), recordType: "Note")
        record.fields = [Wire.RecordField(key: "title", value: Wire.FieldValue(kind: .stringValue("Groceries")))]
        let frame = Self.frame(Self.save([record], deleting: [Wire.RecordID(recordName: "old")]))
        var buffer = ByteBuffer()
        try FrameEncoder.encode(frame, into: &buffer)
        var decoder = FrameDecoder()
        #expect(try decoder.decode(buffer: &buffer) == frame)

        // A string with a NUL, written whole (protobuf-c would cut it short).
        let body = Self.body(value: Self.field(1, Array("a\u{0}b".utf8)))
        #expect(Self.direct(body) == nil)
        #expect(genericallyDecodedFrame(body) == nil)
        buffer.clear()
        buffer.writeInteger(UInt32(body.count))
        buffer.writeBytes(body)
        #expect(throws: WireError.self) { try decoder.decode(buffer: &buffer) }
    }
}
