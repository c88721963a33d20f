import CirrusTestSupport
import CirrusWire
import Foundation
import Testing

@testable import CirrusModel

/// Protobuf bytes by hand, for messages the Swift types cannot express.
private enum Proto {
    static func varint(_ value: UInt64) -> [UInt8] {
        var value = value
        var out: [UInt8] = []
        while value >= 0x80 {
            out.append(UInt8(value & 0x7f) | 0x80)
            value >>= 7
        }
        return out + [UInt8(value)]
    }
    static func field(_ number: UInt64, bytes: [UInt8]) -> [UInt8] {
        varint(number << 3 | 2) + varint(UInt64(bytes.count)) + bytes
    }
    static func field(_ number: UInt64, varint value: UInt64) -> [UInt8] {
        varint(number << 3) + varint(value)
    }
    /// A Record "r" of type "T" whose one field `key` has the given FieldValue bytes.
    static func record(key: String, fieldValue: [UInt8]) -> [UInt8] {
        let recordID = field(1, bytes: Array("r".utf8))
        let recordField = field(1, bytes: Array(key.utf8)) + field(2, bytes: fieldValue)
        return field(1, bytes: recordID) + field(2, bytes: Array("T".utf8)) + field(8, bytes: recordField)
    }
}

@Suite struct WireInvalidInputTests {
    @Test func aZeroByteIsFoundWhereverItIs() {
        let long = String(repeating: "abcdefgh", count: 8)
        for string in ["", "a", "short", long, "ä😀 mixed", long + "é"] {
            #expect(!FieldValue.containsNUL(string), "\(string)")
            for cut in [0, string.utf8.count / 2, string.utf8.count] {
                var bytes = Array(string.utf8)
                bytes.insert(0, at: cut)
                let withZero = String(decoding: bytes, as: UTF8.self)
                #expect(FieldValue.containsNUL(withZero), "\(bytes)")
                // The same string through a substring, and bridged through NSString.
                #expect(FieldValue.containsNUL(String(withZero[...])))
                #expect(FieldValue.containsNUL(NSString(string: withZero) as String))
            }
        }
    }

    @Test func aRecordWithAZeroByteInAStringOrItsNameIsRefusedBeforeItIsSent() {
        func refusal(_ record: CKRecord) -> CKError? {
            do {
                _ = try record.wireRecordForSave(changedKeysOnly: false) { _ throws(CKError) in Wire.Asset() }
                return nil
            } catch {
                return error
            }
        }
        let plain = CKRecord(recordType: "Note", recordID: CKRecord.ID(recordName: "n1"))
        plain["title"] = "no zero here, and long enough not to be a small string"
        #expect(refusal(plain) == nil)
        for value in ["a\u{0}b", "a long string with a zero byte at its very end\u{0}"] {
            let record = CKRecord(recordType: "Note", recordID: CKRecord.ID(recordName: "n2"))
            record["title"] = value
            #expect(refusal(record)?.code == .invalidArguments, "\(value)")
        }
        let named = CKRecord(recordType: "Note", recordID: CKRecord.ID(recordName: "a name with a \u{0} inside it"))
        #expect(refusal(named)?.message?.contains("a record name contains U+0000") == true)
    }

    @Test func anUnknownFieldKindIsSkipped() throws {
        let bytes = Proto.record(key: "future", fieldValue: Proto.field(30, varint: 5))
        let wire = try Wire.Record(serializedBytes: bytes)
        let record = try CKRecord(wire: wire, assetDirectory: makeTemporaryDirectory())
        #expect(record["future"] == nil)
        #expect(record.allKeys().isEmpty)
        #expect(record.recordID.recordName == "r")
    }

    @Test func aFieldWithNoValueIsAbsent() throws {
        let wire = serverRecord(fields: [
            Wire.RecordField(key: "none"),
            Wire.RecordField(key: "empty", value: Wire.FieldValue()),
            Wire.RecordField(key: "", value: Wire.FieldValue(kind: .int64Value(1))),
            Wire.RecordField(key: "dup", value: Wire.FieldValue(kind: .int64Value(1))),
            Wire.RecordField(key: "dup", value: Wire.FieldValue(kind: .stringValue("last"))),
        ])
        let record = try CKRecord(wire: wire, assetDirectory: makeTemporaryDirectory())
        #expect(record.allKeys() == ["dup"])
        #expect(record["dup"] as? String == "last")
    }

    @Test func twoListKindsInOneValueDecodeAsOneTypedList() throws {
        let strings = Proto.field(11, bytes: Proto.field(1, bytes: Array("a".utf8)))
        let ints = Proto.field(12, bytes: Proto.field(1, bytes: Proto.varint(7)))
        let wire = try Wire.Record(serializedBytes: Proto.record(key: "mixed", fieldValue: strings + ints))
        let record = try CKRecord(wire: wire, assetDirectory: makeTemporaryDirectory())
        let value = try #require(record.storedFields["mixed"])
        switch value {
        case .int64List, .stringList: break  // protobuf oneof: one kind wins
        default: Issue.record("unexpected kind \(value)")
        }
    }

    @Test func invalidUTF8InAStringDoesNotCrash() throws {
        let value = Proto.field(1, bytes: [0x61, 0xff, 0xfe, 0x62])
        if let wire = try? Wire.Record(serializedBytes: Proto.record(key: "s", fieldValue: value)) {
            let record = try CKRecord(wire: wire, assetDirectory: makeTemporaryDirectory())
            #expect(record["s"] is String)
        }
    }

    @Test(arguments: [
        ("no record ID", Wire.Record(recordType: "T")),
        ("empty record name", Wire.Record(recordID: Wire.RecordID(recordName: ""), recordType: "T")),
        ("empty zone name", Wire.Record(recordID: Wire.RecordID(recordName: "r", zoneID: Wire.RecordZoneID()), recordType: "T")),
        ("empty record type", Wire.Record(recordID: Wire.RecordID(recordName: "r"))),
        (
            "reference without target",
            Wire.Record(
                recordID: Wire.RecordID(recordName: "r"), recordType: "T",
                fields: [Wire.RecordField(key: "ref", value: Wire.FieldValue(kind: .referenceValue(Wire.Reference())))])
        ),
        (
            "reference list element without target",
            Wire.Record(
                recordID: Wire.RecordID(recordName: "r"), recordType: "T",
                fields: [
                    Wire.RecordField(
                        key: "refs",
                        value: Wire.FieldValue(
                            kind: .referenceList(
                                Wire.ReferenceList(values: [
                                    Wire.Reference(recordID: Wire.RecordID(recordName: "ok")), Wire.Reference(),
                                ]))))
                ])
        ),
        (
            "parent without target",
            Wire.Record(recordID: Wire.RecordID(recordName: "r"), recordType: "T", parent: Wire.Reference())
        ),
        (
            "creator with empty name",
            Wire.Record(
                recordID: Wire.RecordID(recordName: "r"), recordType: "T",
                creatorUserRecordID: Wire.RecordID(recordName: ""))
        ),
    ])
    func invalidRecordsThrowAClearError(_ name: String, _ wire: Wire.Record) throws {
        let directory = try makeTemporaryDirectory()
        do {
            _ = try CKRecord(wire: wire, assetDirectory: directory)
            Issue.record("\(name) was accepted")
        } catch {
            #expect(error.code == .invalidArguments)
            #expect(!(error.message ?? "").isEmpty)
        }
    }

    @Test func theFailingFieldIsNamed() throws {
        let wire = serverRecord(fields: [
            Wire.RecordField(key: "owner", value: Wire.FieldValue(kind: .referenceValue(Wire.Reference())))
        ])
        do {
            _ = try CKRecord(wire: wire, assetDirectory: makeTemporaryDirectory())
            Issue.record("accepted")
        } catch {
            #expect(error.localizedDescription.contains("owner"))
        }
    }

    @Test func mutatedBytesNeverCrashTheConversion() throws {
        let directory = try makeTemporaryDirectory()
        let record = CKRecord(recordType: "Fuzz", recordID: CKRecord.ID(recordName: "f", zoneID: CKRecordZone.ID(zoneName: "Z")))
        record["s"] = "text"
        record["i"] = [1, 2, 3]
        record["d"] = Date(timeIntervalSince1970: 1_700_000_000)
        record["r"] = CKRecord.Reference(recordID: CKRecord.ID(recordName: "t"), action: .deleteSelf)
        record["l"] = CKLocation(latitude: 1, longitude: 2)
        record.setParent(CKRecord.ID(recordName: "p"))
        let bytes = try record.wireRecord.serializedBytes()
        var generator = SplitMix64(seed: 0xC1_2205)
        var decoded = 0
        for _ in 0..<3_000 {
            var mutated = bytes
            for _ in 0..<Int(generator.next() % 4 + 1) {
                let index = Int(generator.next() % UInt64(mutated.count))
                mutated[index] = UInt8(truncatingIfNeeded: generator.next())
            }
            guard let wire = try? Wire.Record(serializedBytes: mutated) else { continue }
            decoded += 1
            do {
                let back = try CKRecord(wire: wire, assetDirectory: directory)
                _ = try? back.wireRecord
            } catch {
                #expect(!(error.message ?? "").isEmpty)
            }
        }
        #expect(decoded > 0)
    }
}

