import CirrusWire
import Foundation
import Testing

@testable import CirrusModel

/// A record written straight from its values (`CKRecord.writeForSave(changedKeysOnly:to:)`):
/// the bytes protobuf-c packs for the message `wireRecordForSave` builds, or nothing at all
/// when that message's values would not come back as themselves.
@Suite("Records written straight to bytes")
struct CKRecordWireBytesTests {
    private static func noAsset(_: CKAsset) throws(CKError) -> Wire.Asset { Wire.Asset() }
    private static let names = ["a", "note-0001", "Ünïcødé ✈︎ 記録", String(repeating: "x", count: 300)]
    private static let keys = ["a", "title", "Ünï", "k_1", "zz", String(repeating: "k", count: 200)]
    private static let strings = ["", "hello", "Ünïcødé ✈︎ 記録", String(repeating: "é", count: 10_000)]
    private static let doubles: [Double] = [0, -0.0, 1.5, -1e300, .infinity, -.infinity, .leastNonzeroMagnitude]
    private static let integers: [Int64] = [0, 1, -1, 127, 128, .min, .max, 1_700_000_000]
    private static let dates = [
        Date(timeIntervalSince1970: 1_700_000_000), Date(timeIntervalSince1970: 0), Date(timeIntervalSince1970: -2_000_000_000.5),
        Date(timeIntervalSince1970: 1_700_000_000.123), Date(timeIntervalSince1970: 1_700_000_000.123_456_789_1),
        Date(timeIntervalSinceReferenceDate: 0.3), .distantFuture, .distantPast,
    ]

    private static func value(_ rng: inout SystemRandomNumberGenerator) -> any CKRecordValue {
        func data() -> Data { Data((0..<[0, 3, 20_000].randomElement(using: &rng)!).map { UInt8(truncatingIfNeeded: $0) }) }
        switch Int.random(in: 0..<13, using: &rng) {
        case 0: return strings.randomElement(using: &rng)!
        case 1: return integers.randomElement(using: &rng)!
        case 2: return doubles.randomElement(using: &rng)!
        case 3: return data()
        case 4: return dates.randomElement(using: &rng)!
        case 5: return (0..<Int.random(in: 0..<4, using: &rng)).map { _ in strings.randomElement(using: &rng)! }
        case 6:
            return (0..<Int.random(in: 0..<4, using: &rng)).map { _ in integers.randomElement(using: &rng)! }
        case 7:
            return (1..<Int.random(in: 2..<5, using: &rng)).map { _ in doubles.randomElement(using: &rng)! + 0.5 }
        case 8: return (0..<Int.random(in: 0..<3, using: &rng)).map { _ in data() }
        case 9: return (0..<Int.random(in: 0..<3, using: &rng)).map { _ in dates.randomElement(using: &rng)! }
        case 10: return CKRecord.Reference(recordID: CKRecord.ID(recordName: "target"), action: .deleteSelf)
        case 11: return CKLocation(latitude: 47.3, longitude: 8.5)
        default: return true
        }
    }

    /// A new record or a server's copy, with random fields, encrypted fields and parent.
    private static func record(_ rng: inout SystemRandomNumberGenerator) throws -> CKRecord {
        let zone =
            Bool.random(using: &rng)
            ? CKRecordZone.ID() : CKRecordZone.ID(zoneName: names.randomElement(using: &rng)!, ownerName: "_alice")
        let id = CKRecord.ID(recordName: names.randomElement(using: &rng)!, zoneID: zone)
        let record: CKRecord
        if Bool.random(using: &rng) {
            record = CKRecord(recordType: ["Note", "Ünï"].randomElement(using: &rng)!, recordID: id)
        } else {
            var wire = serverRecord(
                name: id.recordName, fields: [Wire.RecordField(key: "old", value: Wire.FieldValue(kind: .stringValue("o")))])
            wire.recordID = id.wireRecordID
            if Bool.random(using: &rng) { wire.share = Wire.Reference(recordID: Wire.RecordID(recordName: "share-1"), action: .none) }
            if Bool.random(using: &rng) { wire.creationDate = nil }
            record = try CKRecord(wire: wire, assetDirectory: makeTemporaryDirectory())
        }
        for _ in 0..<Int.random(in: 0..<6, using: &rng) {
            let key = keys.randomElement(using: &rng)!
            if Int.random(in: 0..<4, using: &rng) == 0 {
                record.encryptedValues[key] = strings.randomElement(using: &rng)!
            } else {
                record[key] = value(&rng)
            }
        }
        if Int.random(in: 0..<8, using: &rng) == 0 { record["old"] = nil }
        if Bool.random(using: &rng) { record.setParent(CKRecord.ID(recordName: "parent", zoneID: zone)) }
        return record
    }

    @Test("Random records: protobuf-c's bytes and the values sent, or nothing where the message is needed")
    func randomRecords() throws {
        var rng = SystemRandomNumberGenerator()
        var direct = 0
        var packed = 0
        for _ in 0..<1_000 {
            let record = try Self.record(&rng)
            let changedKeysOnly = Int.random(in: 0..<4, using: &rng) == 0
            let (wire, sent) = try record.wireRecordForSave(changedKeysOnly: changedKeysOnly, encodeAsset: Self.noAsset)
            var written = Wire.EncodedRecords()
            written.append(Wire.Record(recordType: "before"))
            let before = written
            let values = record.writeForSave(changedKeysOnly: changedKeysOnly, to: &written)
            if let sent {
                var expected = before
                expected.append(wire)
                #expect(written == expected)
                #expect(values?.fields == sent.fields)
                #expect(values?.encryptedFields == sent.encryptedFields)
                direct += 1
            } else {
                #expect(values == nil)
                #expect(written == before)
                packed += 1
            }
        }
        // Both ways are taken often enough to mean something.
        #expect(direct > 200)
        #expect(packed > 200)
    }

    @Test("NaN, a record of no fields and one of many: the same bytes")
    func edges() throws {
        let nan = CKRecord(recordType: "Note")
        nan["x"] = Double.nan
        nan["list"] = [Double.nan, -0.0]
        let empty = CKRecord(recordType: "Note", recordID: CKRecord.ID(recordName: "e"))
        let many = CKRecord(recordType: "Note")
        for i in 0..<400 { many["field\(i)"] = i }
        for record in [nan, empty, many] {
            let (wire, sent) = try record.wireRecordForSave(changedKeysOnly: false, encodeAsset: Self.noAsset)
            #expect(sent != nil)
            var expected = Wire.EncodedRecords()
            expected.append(wire)
            var written = Wire.EncodedRecords()
            #expect(record.writeForSave(changedKeysOnly: false, to: &written) != nil)
            #expect(written == expected)
        }
    }

    @Test("U+0000 anywhere, assets, shares: nothing written, and the message's own answer stands")
    func leftToTheMessage() throws {
        var records: [CKRecord] = []
        let nulValue = CKRecord(recordType: "T")
        nulValue["s"] = "a\u{0}b"
        let nulList = CKRecord(recordType: "T")
        nulList["s"] = ["ok", "a\u{0}"]
        let nulKey = CKRecord(recordType: "T")
        nulKey["a\u{0}b"] = 1
        let nulType = CKRecord(recordType: "T\u{0}")
        let nulName = CKRecord(recordType: "T", recordID: CKRecord.ID(recordName: "\u{0}"))
        records += [nulValue, nulList, nulKey, nulType, nulName]
        for record in records {
            var written = Wire.EncodedRecords()
            #expect(record.writeForSave(changedKeysOnly: false, to: &written) == nil)
            #expect(written.count == 0 && written.bytes.isEmpty)
            #expect(throws: CKError.self) { try record.wireRecord }
        }
        // A key set and removed again is still a changed key. A save sends changed keys only
        // under the `changedKeys` policy: there the writer leaves it to the message (which sends
        // it as protobuf-c does); under any other the key is not sent, and the record is written.
        let removed = CKRecord(recordType: "T")
        removed["a\u{0}b"] = 1
        removed["a\u{0}b"] = nil
        removed["ok"] = 2
        var written = Wire.EncodedRecords()
        #expect(removed.writeForSave(changedKeysOnly: true, to: &written) == nil)
        #expect(written.count == 0)
        #expect(throws: Never.self) { try removed.wireRecord }
        #expect(removed.writeForSave(changedKeysOnly: false, to: &written) != nil)
        let (message, _) = try removed.wireRecordForSave(changedKeysOnly: false, encodeAsset: Self.noAsset)
        #expect(message.changedKeys.isEmpty)
        #expect(try written.decoded() == [message])
        #expect(try removed.wireRecord.changedKeys == ["a\u{0}b", "ok"])

        let file = try makeTemporaryDirectory().appendingPathComponent("a.bin")
        try Data([1, 2, 3]).write(to: file)
        let asset = CKRecord(recordType: "T")
        asset["file"] = CKAsset(fileURL: file)
        let emptyList = CKRecord(recordType: "T")
        emptyList["files"] = [CKAsset]()
        for changedKeysOnly in [false, true] {
            for record in [asset, emptyList, nulValue, removed] {
                #expect(
                    record.hasAssetsToSend(changedKeysOnly: changedKeysOnly)
                        == !record.assetsToSend(changedKeysOnly: changedKeysOnly).isEmpty)
            }
            #expect(asset.hasAssetsToSend(changedKeysOnly: changedKeysOnly))
            #expect(!nulValue.hasAssetsToSend(changedKeysOnly: changedKeysOnly))
        }
        let share = CKShare(rootRecord: CKRecord(recordType: "Note"))
        for record in [asset, share as CKRecord] {
            var written = Wire.EncodedRecords()
            #expect(record.writeForSave(changedKeysOnly: false, to: &written) == nil)
            #expect(written.count == 0)
        }
    }
}
