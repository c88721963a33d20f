import CirrusWire
import Foundation
import Testing

@testable import CirrusModel

/// One field value to send through model → wire → bytes → wire → model.
struct ValueCase: Sendable, CustomTestStringConvertible {
    let name: String
    let value: any CKRecordValue
    var testDescription: String { name }
}

private let zone = CKRecordZone.ID(zoneName: "Z", ownerName: "_alice")
private let target = CKRecord.ID(recordName: "target", zoneID: zone)
private let when = Date(timeIntervalSince1970: 1_732_000_000.123_456_7)
private let place = CKLocation(
    coordinate: .init(latitude: 47.3769, longitude: 8.5417), altitude: 408, horizontalAccuracy: 5,
    verticalAccuracy: 3, course: 90.5, courseAccuracy: 2, speed: 1.25, speedAccuracy: 0.5, timestamp: when)

private let valueCases: [ValueCase] = [
    ValueCase(name: "ascii string", value: "hello"),
    ValueCase(name: "empty string", value: ""),
    ValueCase(name: "unicode string", value: "Zürich 🌧️ 東京 \u{202E}rtl e\u{301} \u{10FFFF}"),
    ValueCase(name: "Int.max", value: Int.max),
    ValueCase(name: "Int.min", value: Int.min),
    ValueCase(name: "Int64 zero", value: Int64(0)),
    ValueCase(name: "Int32.min", value: Int32.min),
    ValueCase(name: "UInt32.max", value: UInt32.max),
    ValueCase(name: "double", value: -1234.5678e-300),
    ValueCase(name: "double infinity", value: Double.infinity),
    ValueCase(name: "greatest finite double", value: Double.greatestFiniteMagnitude),
    ValueCase(name: "float", value: Float(3.25)),
    ValueCase(name: "true", value: true),
    ValueCase(name: "NSNumber int", value: NSNumber(value: 7)),
    ValueCase(name: "NSNumber double", value: NSNumber(value: 7.5)),
    ValueCase(name: "bytes", value: Data((0...255).map { UInt8($0) })),
    ValueCase(name: "empty bytes", value: Data()),
    ValueCase(name: "date with sub-microsecond part", value: when),
    ValueCase(name: "date before 1970", value: Date(timeIntervalSince1970: -2_000_000_000.5)),
    ValueCase(name: "distant future", value: Date.distantFuture),
    ValueCase(name: "distant past", value: Date.distantPast),
    ValueCase(name: "reference none", value: CKRecord.Reference(recordID: target, action: .none)),
    ValueCase(name: "reference deleteSelf", value: CKRecord.Reference(recordID: target, action: .deleteSelf)),
    ValueCase(name: "location", value: place),
    ValueCase(name: "location lat/lon", value: CKLocation(latitude: -33.86, longitude: 151.21)),
    ValueCase(name: "string list", value: ["a", "", "ü", "🌧️"]),
    ValueCase(name: "empty string list", value: [String]()),
    ValueCase(name: "int list extremes", value: [Int64.min, -1, 0, 1, Int64.max]),
    ValueCase(name: "empty int list", value: [Int]()),
    ValueCase(name: "double list", value: [0.1, -0.0, 1e308]),
    ValueCase(name: "empty double list", value: [Double]()),
    ValueCase(name: "bool list", value: [true, false]),
    ValueCase(name: "bytes list", value: [Data([1]), Data(), Data([0xff, 0])]),
    ValueCase(name: "date list", value: [when, Date(timeIntervalSince1970: 0)]),
    ValueCase(name: "empty date list", value: [Date]()),
    ValueCase(
        name: "reference list",
        value: [
            CKRecord.Reference(recordID: target, action: .none),
            CKRecord.Reference(recordID: CKRecord.ID(recordName: "t2", zoneID: zone), action: .deleteSelf),
        ]),
    ValueCase(name: "empty reference list", value: [CKRecord.Reference]()),
    ValueCase(name: "location list", value: [place, CKLocation(latitude: 0, longitude: 0)]),
    ValueCase(name: "NSNumber mixed list", value: [NSNumber(value: 1), NSNumber(value: 2.5)]),
]

@Suite struct CKRecordWireRoundTripTests {
    @Test(arguments: valueCases)
    func valueSurvivesTheRoundTrip(_ valueCase: ValueCase) throws {
        let record = CKRecord(recordType: "Everything", recordID: CKRecord.ID(recordName: "r", zoneID: zone))
        record["v"] = valueCase.value
        let stored = try #require(record.storedFields["v"])
        let back = try roundTrip(record)
        #expect(back.storedFields["v"] == stored)
        #expect(back.recordID == record.recordID)
        #expect(back.recordType == "Everything")
        #expect(back.allKeys() == ["v"])
    }

    @Test func readBackTypesMatchAfterTheRoundTrip() throws {
        let record = CKRecord(recordType: "T")
        record["i"] = Int64.max
        record["d"] = 2.5
        record["s"] = "x"
        record["l"] = [1, 2, 3]
        record["r"] = CKRecord.Reference(recordID: target, action: .deleteSelf)
        record["loc"] = place
        let back = try roundTrip(record)
        #expect(back["i"] as? Int64 == Int64.max)
        #expect(back["d"] as? Double == 2.5)
        #expect(back["s"] as? String == "x")
        #expect(back["l"] as? [Int] == [1, 2, 3])
        #expect((back["r"] as? CKRecord.Reference)?.action == .deleteSelf)
        #expect(back["loc"] as? CKLocation == place)
    }

    @Test func systemFieldsComeFromTheServer() throws {
        let wire = serverRecord(fields: [])
        let record = try CKRecord(wire: wire, assetDirectory: makeTemporaryDirectory())
        #expect(record.recordChangeTag == "tag-1")
        #expect(record.creationDate == Date(timeIntervalSince1970: 1_700_000_000))
        #expect(record.modificationDate == Date(timeIntervalSince1970: 1_700_000_100.5))
        #expect(record.creatorUserRecordID == CKRecord.ID(recordName: "_alice"))
        #expect(record.lastModifiedUserRecordID == CKRecord.ID(recordName: "_bob"))
        #expect(record.recordID == CKRecord.ID(recordName: "r1", zoneID: zone))
        let again = try record.wireRecord
        #expect(again.recordChangeTag == "tag-1")
        #expect(again.creationDate == wire.creationDate)
        #expect(again.modificationDate == wire.modificationDate)

        // The same user created and last changed it: both read back.
        var same = wire
        same.lastModifiedUserRecordID = wire.creatorUserRecordID
        let own = try CKRecord(wire: same, assetDirectory: makeTemporaryDirectory())
        #expect(own.creatorUserRecordID == CKRecord.ID(recordName: "_alice"))
        #expect(own.lastModifiedUserRecordID == CKRecord.ID(recordName: "_alice"))
        #expect(try own.wireRecord.lastModifiedUserRecordID?.recordName == "_alice")
    }

    @Test func aKnownIDIsUsedOnlyWhenTheMessageNamesIt() throws {
        let wire = serverRecord(fields: [])
        let known = CKRecord.ID(recordName: "r1", zoneID: CKRecordZone.ID(zoneName: "Z", ownerName: "_alice"))
        let record = try CKRecord.decoded(wire: wire, knownID: known, assetDirectory: makeTemporaryDirectory())
        #expect(record.recordID === known)
        // Another name, zone or owner: the ID read from the message, not the known one.
        for other in [
            CKRecord.ID(recordName: "r2", zoneID: zone),
            CKRecord.ID(recordName: "r1", zoneID: CKRecordZone.ID(zoneName: "Y", ownerName: "_alice")),
            CKRecord.ID(recordName: "r1", zoneID: CKRecordZone.ID(zoneName: "Z", ownerName: "_bob")),
        ] {
            let decoded = try CKRecord.decoded(wire: wire, knownID: other, assetDirectory: makeTemporaryDirectory())
            #expect(decoded.recordID !== other)
            #expect(decoded.recordID == CKRecord.ID(recordName: "r1", zoneID: zone))
        }
        // A message without a zone or owner names the default zone and the current user.
        let bare = Wire.RecordID(recordName: "r1")
        #expect(CKRecord.ID(recordName: "r1").isNamed(by: bare))
        #expect(!CKRecord.ID(recordName: "r1", zoneID: zone).isNamed(by: bare))
        let ownerless = Wire.RecordID(recordName: "r1", zoneID: Wire.RecordZoneID(zoneName: "Z"))
        #expect(CKRecord.ID(recordName: "r1", zoneID: CKRecordZone.ID(zoneName: "Z")).isNamed(by: ownerless))
        #expect(!CKRecord.ID(recordName: "r1", zoneID: zone).isNamed(by: ownerless))
    }

    @Test func aKnownUserIDIsUsedOnlyWhenTheMessageNamesTheCreator() throws {
        let wire = serverRecord(fields: [])  // created by _alice, last changed by _bob
        let alice = CKRecord.ID(recordName: "_alice")
        let record = try CKRecord.decoded(wire: wire, knownUserID: alice, assetDirectory: makeTemporaryDirectory())
        #expect(record.creatorUserRecordID === alice)
        #expect(record.lastModifiedUserRecordID == CKRecord.ID(recordName: "_bob"))
        // Another user: the creator read from the message.
        let carol = CKRecord.ID(recordName: "_carol")
        let other = try CKRecord.decoded(wire: wire, knownUserID: carol, assetDirectory: makeTemporaryDirectory())
        #expect(other.creatorUserRecordID !== carol)
        #expect(other.creatorUserRecordID == alice)
    }

    @Test func aSavedRecordTakesTheValuesItWasSentWithOnlyWhenTheyDecodeBackAsThemselves() throws {
        let record = CKRecord(recordType: "Note", recordID: CKRecord.ID(recordName: "r1", zoneID: zone))
        record["title"] = "hello"
        record["count"] = 7
        record["ratio"] = 0.25
        record["blob"] = Data([1, 2, 3])
        record["tags"] = ["a", "b"]
        record["when"] = Date(timeIntervalSince1970: 1_700_000_000)
        record.encryptedValues["secret"] = "s"
        let noAsset: (CKAsset) throws(CKError) -> Wire.Asset = { _ in Wire.Asset() }
        let (wire, sent) = try record.wireRecordForSave(changedKeysOnly: false, encodeAsset: noAsset)
        let values = try #require(sent)
        // The server's saved record without its fields (fields_as_sent): the client fills them in.
        var saved = serverRecord(fields: [])
        saved.fields = []
        let directory = try makeTemporaryDirectory()
        let taken = try CKRecord.decoded(wire: saved, fields: wire.fields, sentValues: values, assetDirectory: directory)
        let decoded = try CKRecord.decoded(wire: saved, fields: wire.fields, assetDirectory: directory)
        #expect(taken.withState { $0.fields } == decoded.withState { $0.fields })
        #expect(taken.withState { $0.encryptedFields } == decoded.withState { $0.encryptedFields })
        #expect(taken["title"] as? String == "hello")
        #expect(taken.encryptedValues["secret"] as? String == "s")
        #expect(taken.changedKeys().isEmpty)
        #expect(taken.recordChangeTag == "tag-1")

        // Values that would decode as something else leave the record to be decoded.
        let reference = CKRecord(recordType: "Note", recordID: CKRecord.ID(recordName: "r3", zoneID: zone))
        reference["link"] = CKRecord.Reference(recordID: target, action: .none)
        let location = CKRecord(recordType: "Note", recordID: CKRecord.ID(recordName: "r4", zoneID: zone))
        location["where"] = place
        for other in [reference, location] {
            #expect(try other.wireRecordForSave(changedKeysOnly: false, encodeAsset: noAsset).sent == nil)
        }
        for seconds in [1_700_000_000.123_456_789_1, 1_700_000_000.000_000_1, -2_000_000_000.5, 0.3] {
            let date = Date(timeIntervalSince1970: seconds)
            let dated = CKRecord(recordType: "Note", recordID: CKRecord.ID(recordName: "r2", zoneID: zone))
            dated["when"] = date
            let exact = Date(wireTimestamp: date.wireTimestamp) == date
            #expect((try dated.wireRecordForSave(changedKeysOnly: false, encodeAsset: noAsset).sent != nil) == exact, "\(seconds)")
        }
        // Only some fields sent (the changedKeys policy): nothing kept.
        let fetched = try CKRecord(wire: serverRecord(fields: [
            Wire.RecordField(key: "a", value: Wire.FieldValue(kind: .stringValue("x"))),
            Wire.RecordField(key: "b", value: Wire.FieldValue(kind: .stringValue("y"))),
        ]), assetDirectory: directory)
        fetched["a"] = "z"
        #expect(try fetched.wireRecordForSave(changedKeysOnly: true, encodeAsset: noAsset).sent == nil)
        #expect(try fetched.wireRecordForSave(changedKeysOnly: false, encodeAsset: noAsset).sent != nil)
    }

    @Test func parentAndShareSurviveTheRoundTrip() throws {
        var wire = serverRecord(fields: [])
        wire.parent = CKRecord.Reference(recordID: target, action: .none).wireReference
        wire.share = Wire.Reference(recordID: Wire.RecordID(recordName: "share-1"), action: .none)
        let record = try CKRecord(wire: wire, assetDirectory: makeTemporaryDirectory())
        #expect(record.parent?.recordID == target)
        #expect(record.share?.recordID.recordName == "share-1")
        let back = try roundTrip(record)
        #expect(back.parent == record.parent)
        #expect(back.share == record.share)
    }

    @Test func stringWithNULIsRefusedNotTruncated() throws {
        let record = CKRecord(recordType: "T")
        record["s"] = "a\u{0}b"
        #expect(throws: CKError.self) { try record.wireRecord }
        do {
            _ = try record.wireRecord
        } catch {
            #expect(error.code == .invalidArguments)
        }
        record["s"] = ["ok", "a\u{0}"]
        #expect(throws: CKError.self) { try record.wireRecord }
        record["s"] = nil
        record["a\u{0}b"] = 1
        #expect(throws: CKError.self) { try record.wireRecord }
        record["a\u{0}b"] = nil
        #expect(throws: Never.self) { try record.wireRecord }
        record["r"] = CKRecord.Reference(recordID: CKRecord.ID(recordName: "x\u{0}"), action: .none)
        #expect(throws: CKError.self) { try record.wireRecord }
        #expect(throws: CKError.self) { try CKRecord(recordType: "T\u{0}").wireRecord }
        #expect(throws: CKError.self) { try CKRecord(recordType: "T", recordID: CKRecord.ID(recordName: "\u{0}")).wireRecord }
    }

    @Test func newRecordSendsAnEmptyChangeTagAndItsChangedKeys() throws {
        let record = CKRecord(recordType: "Note")
        record["title"] = "t"
        let wire = try record.wireRecord
        #expect(wire.recordChangeTag == "")
        #expect(wire.changedKeys == ["title"])
        #expect(wire.creationDate == nil)
        #expect(wire.recordID?.zoneID == Wire.RecordZoneID(zoneName: "_defaultZone", ownerName: "__defaultOwner__"))
    }
}
