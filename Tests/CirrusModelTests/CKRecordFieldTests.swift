import CirrusWire
import Foundation
import Testing

@testable import CirrusModel

@Suite struct CKRecordFieldTests {
    @Test func newRecordHasAUUIDNameInTheDefaultZoneAndNoSystemFields() {
        let record = CKRecord(recordType: "Note")
        #expect(UUID(uuidString: record.recordID.recordName) != nil)
        #expect(record.recordID.zoneID == .default)
        #expect(record.recordType == "Note")
        #expect(record.recordChangeTag == nil)
        #expect(record.creationDate == nil)
        #expect(record.modificationDate == nil)
        #expect(record.creatorUserRecordID == nil)
        #expect(record.allKeys().isEmpty)
        #expect(record.changedKeys().isEmpty)
        #expect(CKRecord(recordType: "Note").recordID != record.recordID)
    }

    @Test func initialisersPlaceTheRecord() {
        let zone = CKRecordZone.ID(zoneName: "Notes")
        #expect(CKRecord(recordType: "Note", zoneID: zone).recordID.zoneID == zone)
        let id = CKRecord.ID(recordName: "n1", zoneID: zone)
        #expect(CKRecord(recordType: "Note", recordID: id).recordID == id)
    }

    @Test func valuesReadBackAsTheirTypes() throws {
        let record = CKRecord(recordType: "Note")
        let date = Date(timeIntervalSince1970: 1_700_000_000.25)
        record["title"] = "Groceries"
        record["count"] = 42
        record["ratio"] = 0.5
        record["data"] = Data([1, 2, 3])
        record["when"] = date
        record["tags"] = ["a", "b"]
        #expect(record["title"] as? String == "Groceries")
        #expect(record["count"] as? Int == 42)
        #expect(record["count"] as? Int64 == 42)
        #expect(record["count"] as? Int32 == 42)
        #expect(record["count"] as? Double == 42)
        #expect(record["ratio"] as? Double == 0.5)
        #expect(record["ratio"] as? Float == 0.5)
        #expect(record["ratio"] as? Int == nil)
        #expect(record["data"] as? Data == Data([1, 2, 3]))
        #expect(record["when"] as? Date == date)
        #expect(record["tags"] as? [String] == ["a", "b"])
        let typed: String? = record["title"]
        #expect(typed == "Groceries")
        let typedCount: Int? = record["count"]
        #expect(typedCount == 42)
        #expect(record.object(forKey: "title") as? String == "Groceries")
        #expect(record.allKeys() == ["count", "data", "ratio", "tags", "title", "when"])
    }

    @Test func boolIsStoredAsInt64AndReadsBackAsBoolOrInt() throws {
        let record = CKRecord(recordType: "Task")
        record["done"] = true
        record["open"] = false
        #expect(record.storedFields["done"] == .int64(1))
        #expect(record.storedFields["open"] == .int64(0))
        #expect(record["done"] as? Bool == true)
        #expect(record["open"] as? Bool == false)
        #expect(record["done"] as? Int == 1)
        let back = try roundTrip(record)
        #expect(back["done"] as? Bool == true)
        #expect(back["open"] as? Bool == false)
        record["two"] = 2
        #expect(record["two"] as? Bool == nil, "only 0 and 1 read as Bool, as NSNumber casts do")
        record["flags"] = [true, false, true]
        #expect(try roundTrip(record)["flags"] as? [Bool] == [true, false, true])
    }

    @Test func settingNilRemovesTheKeyAndCountsAsAChange() {
        let record = CKRecord(recordType: "Note")
        record["title"] = "x"
        record["title"] = nil
        #expect(record["title"] == nil)
        #expect(record.allKeys().isEmpty)
        #expect(record.changedKeys() == ["title"])
    }

    @Test func changedKeysTrackSetsInOrderWithoutRepeats() throws {
        let record = CKRecord(recordType: "Note")
        record["b"] = "1"
        record["a"] = 2
        record["b"] = "3"
        #expect(record.changedKeys() == ["b", "a"])
        let fetched = try CKRecord(wire: record.wireRecord, assetDirectory: makeTemporaryDirectory())
        #expect(fetched.changedKeys().isEmpty, "a record from the server has no changes")
        #expect(fetched.allKeys() == ["a", "b"])
        fetched["c"] = 1.5
        fetched["a"] = nil
        #expect(fetched.changedKeys() == ["c", "a"])
        #expect(try fetched.wireRecord.changedKeys == ["c", "a"])
    }

    @Test(arguments: [
        [("b", "1" as any CKRecordValue), ("a", 2), ("b", "3")],
        [("title", "x"), ("when", Date(timeIntervalSince1970: 1)), ("tags", ["p", "q"]), ("n", 1.5), ("ok", true)],
        [],
    ] as [[(String, any CKRecordValue)]])
    func aRecordMadeWithItsFieldsEqualsOneMadeFieldByField(_ fields: [(String, any CKRecordValue)]) throws {
        let id = CKRecord.ID(recordName: "r", zoneID: CKRecordZone.ID(zoneName: "Z"))
        let byField = CKRecord(recordType: "Row", recordID: id)
        for (key, value) in fields { byField[key] = value }
        let made = CKRecord(recordType: "Row", recordID: id, fields: fields)
        #expect(made.changedKeys() == byField.changedKeys())
        #expect(made.allKeys() == byField.allKeys())
        #expect(try made.wireRecord == byField.wireRecord)
        made["later"] = 1
        #expect(made.changedKeys() == byField.changedKeys() + ["later"])
    }

    @Test func changedKeysOnlyEncodingSendsJustTheChangedFields() throws {
        let fetched = try CKRecord(
            wire: serverRecord(fields: [
                Wire.RecordField(key: "a", value: Wire.FieldValue(kind: .int64Value(1))),
                Wire.RecordField(key: "b", value: Wire.FieldValue(kind: .int64Value(2))),
            ]),
            assetDirectory: makeTemporaryDirectory())
        fetched["b"] = 3
        fetched["gone"] = nil
        let wire = try fetched.wireRecord(changedKeysOnly: true) { (asset) throws(CKError) in
            try asset.wireAsset(inlineContent: true)
        }
        #expect(wire.fields.map(\.key) == ["b"])
        #expect(wire.changedKeys == ["b", "gone"])
        #expect(wire.recordChangeTag == "tag-1")
    }

    @Test func parentIsAReferenceWithActionNone() {
        let parent = CKRecord(recordType: "List")
        let child = CKRecord(recordType: "Item")
        child.setParent(parent)
        #expect(child.parent == CKRecord.Reference(record: parent, action: .none))
        child.parent = CKRecord.Reference(recordID: parent.recordID, action: .deleteSelf)
        #expect(child.parent?.action == CKRecord.ReferenceAction.none)
        child.setParent(nil as CKRecord.ID?)
        #expect(child.parent == nil)
        #expect(child.changedKeys().isEmpty, "parent is a system field, not a key")
    }

    @Test func encryptedValuesAreSeparateFromPlainFields() throws {
        let record = CKRecord(recordType: "Secret")
        record.encryptedValues["pin"] = "1234"
        record["title"] = "t"
        #expect(record["pin"] == nil)
        #expect(record.encryptedValues["pin"] as? String == "1234")
        #expect(record.allKeys() == ["title"])
        #expect(record.encryptedValues.allKeys() == ["pin"])
        let wire = try record.wireRecord
        #expect(wire.fields.first { $0.key == "pin" }?.isEncrypted == true)
        let back = try roundTrip(record)
        #expect(back.encryptedValues["pin"] as? String == "1234")
        #expect(back["pin"] == nil)
    }

    /// A key holds one value: setting it as the other kind (plain or encrypted) moves it.
    @Test func aKeySetAsTheOtherKindMovesThere() throws {
        let record = CKRecord(recordType: "Secret")
        record["pin"] = "plain"
        record.encryptedValues["pin"] = "1234"
        #expect(record["pin"] == nil)
        #expect(record.encryptedValues["pin"] as? String == "1234")
        record["other"] = "o"
        record["pin"] = "visible"
        #expect(record.encryptedValues["pin"] == nil)
        #expect(record["pin"] as? String == "visible")
        #expect(record.allKeys() == ["other", "pin"])
        #expect(record.encryptedValues.allKeys().isEmpty)

        // A wire record naming a key twice, plain then encrypted, decodes to the last.
        var wire = try record.wireRecord
        wire.fields.append(Wire.RecordField(key: "pin", value: Wire.FieldValue(kind: .stringValue("again")), isEncrypted: true))
        let decoded = try CKRecord(wire: wire)
        #expect(decoded["pin"] == nil)
        #expect(decoded.encryptedValues["pin"] as? String == "again")
        #expect(decoded["other"] as? String == "o")
    }

    @Test func keyValueCodingSpellingsAndIdentityEquality() {
        let record = CKRecord(recordType: "Note")
        record.setValue("x", forKey: "title")
        record.setObject(3, forKey: "n")
        #expect(record.value(forKey: "title") as? String == "x")
        #expect(record.object(forKey: "n") as? Int == 3)
        record.setValue(nil, forKey: "title")
        #expect(record.allKeys() == ["n"])
        let same = CKRecord(recordType: "Note", recordID: record.recordID)
        #expect(record == record)
        #expect(record != same)
        #expect(Set([record, record, same]).count == 2)
        let asValue: CKRecordValue = "legacy spelling" as CKRecordValue
        record["legacy"] = asValue
        #expect(record["legacy"] as? String == "legacy spelling")
    }

    @Test func copyIsIndependent() throws {
        let record = CKRecord(recordType: "Note")
        record["a"] = 1
        let copy = try #require(record.copy() as? CKRecord)
        copy["a"] = 2
        #expect(record["a"] as? Int == 1)
        #expect(copy["a"] as? Int == 2)
        #expect(copy.recordID == record.recordID)
    }

    @Test func concurrentWritersNeverCorruptTheRecord() async {
        let record = CKRecord(recordType: "Counter")
        await withTaskGroup(of: Void.self) { group in
            for writer in 0..<8 {
                group.addTask {
                    for i in 0..<500 {
                        record["k\(writer)"] = i
                        _ = record.allKeys()
                        _ = record["k\((writer + 1) % 8)"]
                    }
                }
            }
        }
        #expect(record.allKeys().count == 8)
        #expect(record["k0"] as? Int == 499)
    }
}
