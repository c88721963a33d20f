import CirrusTestSupport
import CirrusWire
import NIOCore
import Testing

@testable import CirrusServer

/// A change feed sends a plain stored record as its bytes, its zone owners renamed in place: the
/// frame must be byte for byte the one the decoded record, mapped by ``ZoneOwnerMapping``, gives.
@Suite("Change feed records sent as stored")
struct SerializedRecordEventTests {
    let owners = ZoneOwnerMapping(databaseOwner: "_alice")

    static func recordID(_ name: String, owner: String = "_alice", zone: String = "Notes") -> Wire.RecordID {
        Wire.RecordID(recordName: name, zoneID: Wire.RecordZoneID(zoneName: zone, ownerName: owner))
    }

    static func reference(_ name: String, owner: String = "_alice") -> Wire.Reference {
        Wire.Reference(recordID: Self.recordID(name, owner: owner), action: .deleteSelf)
    }

    static func field(_ key: String, _ kind: Wire.FieldValue.Kind, encrypted: Bool = false) -> Wire.RecordField {
        Wire.RecordField(key: key, value: Wire.FieldValue(kind: kind), isEncrypted: encrypted)
    }

    /// Records of every shape a plain record takes.
    static let plainRecords: [Wire.Record] = [
        Wire.Record(recordID: recordID("bare"), recordType: "Note"),
        Wire.Record(
            recordID: recordID("every-kind"), recordType: "Note", recordChangeTag: "3-1a",
            creationDate: Wire.Timestamp(seconds: 1_700_000_000, nanos: 5),
            modificationDate: Wire.Timestamp(seconds: 1_700_000_001),
            // Creators are user record IDs: a decoded record's are not mapped, nor are these.
            creatorUserRecordID: recordID("_alice", zone: "_defaultZone"),
            lastModifiedUserRecordID: recordID("_alice", zone: "_defaultZone"),
            fields: [
                field("title", .stringValue("Groceries ✈︎")), field("count", .int64Value(-12)),
                field("ratio", .doubleValue(0.25)), field("blob", .bytesValue([0, 1, 2, 255])),
                field("when", .dateValue(Wire.Timestamp(seconds: 3))),
                field("where", .locationValue(Wire.Location(latitude: 48.1, longitude: 11.5))),
                field("tags", .stringList(Wire.StringList(values: ["a", "", "c"]))),
                field("secret", .stringValue("s"), encrypted: true),
                field("empty", .stringValue("")),
            ],
            changedKeys: ["title", "count"]),
        Wire.Record(
            recordID: recordID("linked"), recordType: "Item",
            fields: [
                field("to", .referenceValue(reference("bare"))),
                field("others", .referenceValue(reference("theirs", owner: "_bob"))),
                field(
                    "list",
                    .referenceList(
                        Wire.ReferenceList(values: [
                            reference("a"), reference("b", owner: "_bob"), reference("c", owner: "_alice2"),
                            reference("d", owner: "_alic"), reference("e", owner: "__defaultOwner__"),
                        ]))),
                field("noTarget", .referenceValue(Wire.Reference(action: .none))),
            ],
            parent: Wire.Reference(recordID: recordID("bare")),
            share: Wire.Reference(recordID: recordID("share-1"))),
        // Someone else's record (a shared zone): nothing is renamed.
        Wire.Record(
            recordID: recordID("theirs", owner: "_bob"), recordType: "Note",
            fields: [field("to", .referenceValue(reference("x", owner: "_bob")))],
            parent: Wire.Reference(recordID: recordID("p", owner: "_bob"))),
        // An owner left empty stays empty (as ``ZoneOwnerMapping`` leaves it).
        Wire.Record(recordID: recordID("ownerless", owner: ""), recordType: "Note"),
    ]

    /// The frame the server sends for `record` decoded and mapped.
    func expectedFrame(_ record: Wire.Record, streamID: UInt64, seq: UInt64) throws -> ByteBuffer {
        let mapped = owners.outbound(record)
        let outcome = Wire.RecordOutcome(recordID: mapped.recordID, outcome: .record(mapped))
        let event = Wire.Event(
            seq: seq,
            payload: .fetchRecordZoneChanges(Wire.FetchRecordZoneChangesEvent(callback: .recordWasChanged(outcome))))
        var buffer = ByteBuffer()
        try FrameEncoder.encode(Wire.Frame(streamID: streamID, kind: .event(event)), into: &buffer)
        return buffer
    }

    /// The frame the server sends for `record` kept serialized.
    func splicedFrame(_ record: Wire.Record, streamID: UInt64, seq: UInt64) throws -> ByteBuffer {
        let stored = try #require(Wire.SerializedRecord(plain: record.serializedBytes()))
        let renaming = try #require(owners.serializedRecordRenaming)
        let payload = try #require(stored.recordWasChangedPayload(renaming))
        var buffer = ByteBuffer()
        try FrameEncoder.encode(streamID: streamID, seq: seq, payload: payload, into: &buffer)
        #expect(FrameEncoder.frameBodySize(streamID: streamID, seq: seq, payload: payload) == buffer.readableBytes - 4)
        return buffer
    }

    @Test(arguments: [(UInt64(1), UInt64(1)), (0, 300), (.max, .max), (7, 0)])
    func aPlainRecordsFrameIsByteForByteTheMappedRecordsFrame(streamID: UInt64, seq: UInt64) throws {
        for record in Self.plainRecords {
            let spliced = try splicedFrame(record, streamID: streamID, seq: seq)
            #expect(spliced == (try expectedFrame(record, streamID: streamID, seq: seq)), "\(record.recordID?.recordName ?? "")")
        }
    }

    @Test func theMappedIDsAreTheCallersAndTheDecodedPayloadMatches() throws {
        let record = Self.plainRecords[2]
        let stored = try #require(Wire.SerializedRecord(plain: record.serializedBytes()))
        let payload = try #require(stored.recordWasChangedPayload(renamingOwner: "_alice", to: "__defaultOwner__"))
        guard case .fetchRecordZoneChanges(let event) = try payload.decoded(),
            case .recordWasChanged(let outcome) = event.callback, case .record(let sent) = outcome.outcome
        else {
            Issue.record("not a recordWasChanged event")
            return
        }
        #expect(outcome.recordID == Self.recordID("linked", owner: "__defaultOwner__"))
        #expect(sent.parent?.recordID?.zoneID?.ownerName == "__defaultOwner__")
        guard case .referenceList(let list) = sent.fields[2].value?.kind else {
            Issue.record("no list")
            return
        }
        #expect(list.values.map { $0.recordID?.zoneID?.ownerName } == ["__defaultOwner__", "_bob", "_alice2", "_alic", "__defaultOwner__"])
        #expect(try stored.decoded() == record)
    }

    @Test func randomRecordsAreSentAsTheirMappedSelves() throws {
        var random = SplitMix64(seed: 0x5E71_A11C)
        let owners = ["_alice", "_bob", "", "_alice_", "__defaultOwner__"]
        func id(_ name: String) -> Wire.RecordID {
            Self.recordID(name, owner: owners[Int(random.next() % UInt64(owners.count))], zone: "z\(random.next() % 3)")
        }
        func reference() -> Wire.Reference { Wire.Reference(recordID: id("r\(random.next() % 100)"), action: .none) }
        for round in 0..<300 {
            var fields: [Wire.RecordField] = []
            for index in 0..<Int(random.next() % 6) {
                let kind: Wire.FieldValue.Kind
                switch random.next() % 5 {
                case 0: kind = .referenceValue(reference())
                case 1: kind = .referenceList(Wire.ReferenceList(values: (0..<Int(random.next() % 4)).map { _ in reference() }))
                case 2: kind = .stringValue(String(repeating: "x", count: Int(random.next() % 300)))
                case 3: kind = .int64Value(Int64(bitPattern: random.next()))
                default: kind = .bytesValue((0..<Int(random.next() % 200)).map { _ in UInt8(truncatingIfNeeded: random.next()) })
                }
                fields.append(Self.field("f\(index)", kind))
            }
            let record = Wire.Record(
                recordID: id("n\(round)"), recordType: "T", fields: fields,
                parent: random.next() % 2 == 0 ? reference() : nil, share: random.next() % 3 == 0 ? reference() : nil)
            let streamID = random.next() % 1_000
            #expect(
                try splicedFrame(record, streamID: streamID, seq: UInt64(round + 1))
                    == expectedFrame(record, streamID: streamID, seq: UInt64(round + 1)), "round \(round)")
        }
    }

    @Test func recordsOnlyADecodedRecordCanCarryAreNotPlain() {
        let asset = Wire.Asset(sha256: Array(repeating: 7, count: 32), size: 3)
        let notPlain: [(String, Wire.Record)] = [
            ("an asset", Wire.Record(recordID: Self.recordID("a"), fields: [Self.field("f", .assetValue(asset))])),
            (
                "an asset list",
                Wire.Record(recordID: Self.recordID("a"), fields: [Self.field("f", .assetList(Wire.AssetList(values: [asset])))])
            ),
            ("share fields", Wire.Record(recordID: Self.recordID("s"), recordType: "cloudkit.share", shareFields: Wire.ShareFields())),
            ("no record ID", Wire.Record(recordType: "Note")),
            ("an ID without a zone", Wire.Record(recordID: Wire.RecordID(recordName: "a"))),
            (
                "a parent without a zone",
                Wire.Record(recordID: Self.recordID("a"), parent: Wire.Reference(recordID: Wire.RecordID(recordName: "p")))
            ),
            (
                "a listed reference without a zone",
                Wire.Record(
                    recordID: Self.recordID("a"),
                    fields: [
                        Self.field(
                            "l", .referenceList(Wire.ReferenceList(values: [Wire.Reference(recordID: Wire.RecordID(recordName: "x"))])))
                    ])
            ),
        ]
        for (what, record) in notPlain {
            #expect(Wire.SerializedRecord(plain: record.serializedBytes()) == nil, "\(what)")
        }
    }

    @Test func malformedBytesAreNotPlainAndEveryPlainPrefixDecodes() throws {
        let bytes = Self.plainRecords[2].serializedBytes()
        for length in 0..<bytes.count {
            let prefix = Array(bytes.prefix(length))
            // A cut at a field boundary is a shorter, well-formed record; any other is refused.
            if Wire.SerializedRecord(plain: prefix) != nil {
                #expect(throws: Never.self, "prefix of \(length)") { try Wire.Record(serializedBytes: prefix) }
            }
        }
        let id = Self.recordID("a").serializedBytes()
        let malformed: [[UInt8]] = [
            [0x08, 0x01],  // record_id as a varint
            [0x0A, UInt8(id.count)] + id + [0x0B],  // a group
            [0x0A, UInt8(id.count)] + id + [0x12, 0x05, 0x41],  // a length past the end
            [0x0A, UInt8(id.count)] + id + [0x10] + Array(repeating: 0xFF, count: 11),  // an overlong varint
            [0x0A, 0x05, 0x0A, 0x00, 0x12, 0x00],  // a record ID longer than the bytes left
            [0x0A, 0x06, 0x0A, 0x00, 0x12, 0x02, 0x10, 0x01],  // an owner name as a varint
            [0x00, 0x00],  // field 0
        ]
        for bytes in malformed {
            #expect(Wire.SerializedRecord(plain: bytes) == nil, "\(bytes)")
        }
    }

    @Test func thePublicDatabaseSendsRecordsDecoded() {
        // Its owner is "": a decoded record's absent owners would become `__defaultOwner__`.
        #expect(ZoneOwnerMapping(databaseOwner: "").serializedRecordRenaming == nil)
        #expect(owners.serializedRecordRenaming != nil)
    }

    @Test func anOversizePayloadFrameIsRefusedAndWritesNothing() throws {
        let stored = try #require(Wire.SerializedRecord(plain: Self.plainRecords[1].serializedBytes()))
        let payload = try #require(stored.recordWasChangedPayload(renamingOwner: "_alice", to: "__defaultOwner__"))
        var buffer = ByteBuffer(string: "kept")
        #expect(throws: WireError.self) {
            try FrameEncoder.encode(streamID: 3, seq: 1, payload: payload, into: &buffer, maximumFrameBytes: 64)
        }
        #expect(buffer == ByteBuffer(string: "kept"))
    }
}
