@testable import CirrusWire
import Testing

/// A record's fields encoded ahead of the rest (``Wire/EncodedRecordFields``): the bytes must
/// decode to the record itself, and encodings of other fields must never be taken for its own.
@Suite("Record fields encoded ahead")
struct EncodedRecordFieldsTests {
    private static func record(_ title: String = "Groceries ✈︎") -> Wire.Record {
        let zone = Wire.RecordZoneID(zoneName: "Notes", ownerName: "_alice")
        return Wire.Record(
            recordID: Wire.RecordID(recordName: "note-0001", zoneID: zone),
            recordType: "Note",
            fields: [
                Wire.RecordField(key: "title", value: Wire.FieldValue(kind: .stringValue(title))),
                Wire.RecordField(key: "count", value: Wire.FieldValue(kind: .int64Value(12))),
                Wire.RecordField(key: "blob", value: Wire.FieldValue(kind: .bytesValue(Array(0..<200)))),
            ],
            parent: Wire.Reference(recordID: Wire.RecordID(recordName: "list", zoneID: zone)),
            changedKeys: ["title"]
        )
    }

    /// The writer's case: the record as stored gets its system fields after the fields were
    /// encoded; its bytes are its full encoding in another order.
    @Test func aRecordWithTheEncodedFieldsSerializesToItself() throws {
        let client = Self.record()
        let encoded = Wire.EncodedRecordFields(client.fields)
        var stored = client
        stored.recordChangeTag = "2-1"
        stored.creationDate = Wire.Timestamp(seconds: 1_700_000_000, nanos: 5)
        stored.modificationDate = Wire.Timestamp(seconds: 1_700_000_001, nanos: 0)
        stored.creatorUserRecordID = Wire.RecordID(recordName: "_alice")
        let bytes = stored.serializedBytes(reusing: encoded)
        #expect(try Wire.Record(serializedBytes: bytes) == stored)
        #expect(bytes.count == stored.serializedBytes().count)
        // The fields' own bytes were reused: they end the record.
        #expect(bytes.suffix(Wire.Record(fields: client.fields).serializedBytes().count)
            == ArraySlice(Wire.Record(fields: client.fields).serializedBytes()))
        #expect(bytes != stored.serializedBytes())
    }

    /// A field changed after the encoding, even in place through the record, makes the
    /// record's fields a copy of their own: they are encoded anew, never taken from the old.
    @Test func changedFieldsAreEncodedAnew() throws {
        var record = Self.record()
        let encoded = Wire.EncodedRecordFields(record.fields)
        record.fields[0].value = Wire.FieldValue(kind: .stringValue("changed"))
        #expect(record.serializedBytes(reusing: encoded) == record.serializedBytes())
        #expect(try Wire.Record(serializedBytes: record.serializedBytes(reusing: encoded)) == record)

        var fewer = Self.record()
        let all = Wire.EncodedRecordFields(fewer.fields)
        fewer.fields.removeLast()
        #expect(fewer.serializedBytes(reusing: all) == fewer.serializedBytes())
    }

    /// Equal fields built apart are not the encoded array: the record is encoded whole (the
    /// same bytes), which is always right.
    @Test func equalFieldsOfAnotherArrayAreEncodedWhole() throws {
        let record = Self.record()
        let other = Wire.EncodedRecordFields(Self.record().fields)
        #expect(record.serializedBytes(reusing: other) == record.serializedBytes())
        #expect(record.serializedBytes(reusing: nil) == record.serializedBytes())
        let empty = Wire.Record(recordType: "Note")
        #expect(empty.serializedBytes(reusing: Wire.EncodedRecordFields([])) == empty.serializedBytes())
    }

    /// The record's own parts are written by hand (``Wire/Record/serializedBytes(reusing:)``):
    /// byte for byte what protobuf-c writes for them, over IDs with and without zones, empty
    /// and long (two-byte length) strings, other scripts, and zero, negative and extreme dates.
    /// Written into one buffer reused round after round (``Wire/Record/serialize(reusing:into:)``,
    /// the writer's way), longer and shorter than the last, the bytes are the same.
    @Test func theHandWrittenPartsAreProtobufCsBytes() throws {
        var random = RandomRecordParts()
        let fields = Self.record().fields
        var reused: [UInt8] = []
        for round in 0..<500 {
            var record = random.record()
            record.fields = fields
            if round % 5 == 0 {
                record.parent = Wire.Reference(recordID: random.id())
                record.changedKeys = ["title"]
            }
            let encoded = Wire.EncodedRecordFields(record.fields)
            let bytes = record.serializedBytes(reusing: encoded)
            #expect(try Wire.Record(serializedBytes: bytes) == record, "round \(round): \(record)")
            record.serialize(reusing: round % 7 == 0 ? nil : encoded, into: &reused)
            #expect(reused == bytes || (round % 7 == 0 && reused == record.serializedBytes()), "round \(round): \(record)")
            var rest = record
            rest.fields = []
            #expect(bytes == rest.serializedBytes() + Wire.Record(fields: fields).serializedBytes(), "round \(round): \(record)")
        }
    }

    /// Whether `fields` hold a kind ``RecordFieldsWriter`` leaves to protobuf-c.
    private static func holdsUnwrittenKind(_ fields: [Wire.RecordField]) -> Bool {
        fields.contains { field in
            switch field.value?.kind {
            case .locationValue?, .assetValue?, .locationList?, .assetList?: true
            default: false
            }
        }
    }

    /// Fields are written straight from their values (``RecordFieldsWriter``): byte for byte
    /// what protobuf-c packs for them, over every kind and its defaults and extremes (empty
    /// keys and strings, absent values and values of no kind, zero, negative and extreme
    /// numbers, -0, infinities and NaN, lengths of one, two and three bytes, empty and long
    /// lists, references with and without IDs and zones, unknown actions); nil, never other
    /// bytes, for the kinds it leaves to protobuf-c.
    @Test func directlyWrittenFieldsAreProtobufCsBytes() {
        var random = RandomRecordParts()
        var written = 0
        for round in 0..<2_000 {
            let fields = random.fields()
            let packed = Wire.Record(fields: fields).serializedBytes()
            let direct = RecordFieldsWriter.bytes(of: fields)
            if Self.holdsUnwrittenKind(fields) {
                #expect(direct == nil, "round \(round): \(fields)")
            } else {
                #expect(direct == packed, "round \(round): \(fields)")
                written += 1
            }
            #expect(Wire.EncodedRecordFields(fields).bytes == packed, "round \(round): \(fields)")
        }
        // Most rounds hold only written kinds (a round of up to five fields, 4 kinds in 17 not).
        #expect(written > 600)
    }

    /// A string holding U+0000 is not written straight (protobuf-c would cut it short): the
    /// fields are packed through protobuf-c, as before.
    @Test func aStringWithANullIsLeftToProtobufC() {
        let fields = [
            Wire.RecordField(key: "a\u{0}b", value: Wire.FieldValue(kind: .int64Value(1))),
            Wire.RecordField(key: "note", value: Wire.FieldValue(kind: .stringValue("x\u{0}y"))),
        ]
        for field in fields {
            #expect(RecordFieldsWriter.bytes(of: [field]) == nil)
            #expect(Wire.EncodedRecordFields([field]).bytes == Wire.Record(fields: [field]).serializedBytes())
        }
    }
}
