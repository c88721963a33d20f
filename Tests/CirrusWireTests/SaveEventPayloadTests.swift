import CirrusWire
import Testing

/// A saved record's event written directly (``Wire/ModifyRecordsPerRecordSave/directPayload``):
/// the very bytes protobuf-c writes for the event, and nothing for an event it does not cover.
@Suite("Save events written directly")
struct SaveEventPayloadTests {
    private static let zone = Wire.RecordZoneID(zoneName: "Notes", ownerName: "__defaultOwner__")

    private static func saved(_ name: String = "note-0001") -> Wire.Record {
        let user = Wire.RecordID(
            recordName: "_a1b2c3", zoneID: Wire.RecordZoneID(zoneName: "_defaultZone", ownerName: "__defaultOwner__"))
        return Wire.Record(
            recordID: Wire.RecordID(recordName: name, zoneID: zone), recordType: "Note", recordChangeTag: "7-3",
            creationDate: Wire.Timestamp(seconds: 1_700_000_000, nanos: 5),
            modificationDate: Wire.Timestamp(seconds: 1_700_000_001, nanos: 999_999_999),
            creatorUserRecordID: user, lastModifiedUserRecordID: user)
    }

    /// What protobuf-c writes for `save` as `Event.modify_records`.
    private static func protobufC(_ save: Wire.ModifyRecordsPerRecordSave) -> [UInt8] {
        Wire.ModifyRecordsEvent(callback: .perRecordSave(save)).serializedBytes()
    }

    @Test func aSavedRecordWithItsFieldsAsSentIsProtobufCsBytes() throws {
        let save = Wire.ModifyRecordsPerRecordSave(
            recordID: Self.saved().recordID, outcome: .record(Self.saved()), fieldsAsSent: true)
        let payload = try #require(save.directPayload)
        #expect(payload.bytes == Self.protobufC(save))
        #expect(try payload.decoded() == .modifyRecords(Wire.ModifyRecordsEvent(callback: .perRecordSave(save))))
    }

    /// Random events over IDs with and without zones, empty and two-byte-length strings, other
    /// scripts, absent and extreme dates, with and without `fields_as_sent`.
    @Test func randomSavesAreProtobufCsBytes() throws {
        var random = RandomRecordParts()
        var written = 0
        for round in 0..<500 {
            let save = Wire.ModifyRecordsPerRecordSave(
                recordID: random.id(), outcome: .record(random.record()), fieldsAsSent: random.bool())
            guard let payload = save.directPayload else {
                #expect(save.recordID == nil, "round \(round): only an event without an ID is left out")
                continue
            }
            written += 1
            #expect(payload.bytes == Self.protobufC(save), "round \(round): \(save)")
        }
        #expect(written > 300)
    }

    @Test func otherEventsGoOutAsMessages() {
        let id = Self.saved().recordID
        var withFields = Self.saved()
        withFields.fields = [Wire.RecordField(key: "title", value: Wire.FieldValue(kind: .stringValue("Groceries")))]
        var withParent = Self.saved()
        withParent.parent = Wire.Reference(recordID: Wire.RecordID(recordName: "list", zoneID: Self.zone))
        var withShare = Self.saved()
        withShare.share = Wire.Reference(recordID: Wire.RecordID(recordName: "share-1", zoneID: Self.zone))
        var withChangedKeys = Self.saved()
        withChangedKeys.changedKeys = ["title"]
        var aShare = Self.saved()
        aShare.recordType = "cloudkit.share"
        aShare.shareFields = Wire.ShareFields()
        for record in [withFields, withParent, withShare, withChangedKeys, aShare] {
            #expect(Wire.ModifyRecordsPerRecordSave(recordID: id, outcome: .record(record)).directPayload == nil)
        }
        let failed = Wire.ModifyRecordsPerRecordSave(
            recordID: id, outcome: .error(Wire.OperationError(code: .serverRecordChanged, message: "changed")))
        #expect(failed.directPayload == nil)
        #expect(Wire.ModifyRecordsPerRecordSave(recordID: id).directPayload == nil)
        #expect(Wire.ModifyRecordsPerRecordSave(outcome: .record(Self.saved())).directPayload == nil)
    }
}
