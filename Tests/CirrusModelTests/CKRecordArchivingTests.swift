import CirrusWire
import Foundation
import Testing

@testable import CirrusModel

/// `encodeSystemFields(with:)` and `init(coder:)`: how a CloudKit app caches records.
@Suite("CKRecord: archiving the system fields")
struct CKRecordArchivingTests {
    private let zone = CKRecordZone.ID(zoneName: "Notes", ownerName: "_alice")

    /// A record as a fetch returns it: system fields set by the server, and fields.
    private func fetched() throws -> CKRecord {
        let wire = Wire.Record(
            recordID: Wire.RecordID(recordName: "n1", zoneID: Wire.RecordZoneID(zoneName: "Notes", ownerName: "_alice")),
            recordType: "Note",
            recordChangeTag: "k3-7f",
            creationDate: Wire.Timestamp(seconds: 1_732_000_000, nanos: 123_000_000),
            modificationDate: Wire.Timestamp(seconds: 1_732_000_100, nanos: 0),
            creatorUserRecordID: Wire.RecordID(recordName: "_alice"),
            lastModifiedUserRecordID: Wire.RecordID(recordName: "_bob"),
            fields: [Wire.RecordField(key: "title", value: Wire.FieldValue(kind: .stringValue("Groceries")))],
            parent: Wire.Reference(
                recordID: Wire.RecordID(recordName: "folder", zoneID: Wire.RecordZoneID(zoneName: "Notes", ownerName: "_alice")),
                action: .none))
        return try CKRecord(wire: wire)
    }

    private func archive(_ record: CKRecord) -> Data {
        let archiver = NSKeyedArchiver(requiringSecureCoding: true)
        record.encodeSystemFields(with: archiver)
        archiver.finishEncoding()
        return archiver.encodedData
    }

    private func unarchive(_ data: Data) throws -> CKRecord? {
        let unarchiver = try NSKeyedUnarchiver(forReadingFrom: data)
        unarchiver.requiresSecureCoding = true
        defer { unarchiver.finishDecoding() }
        return CKRecord(coder: unarchiver)
    }

    @Test func theSystemFieldsComeBackAndNothingElse() throws {
        let record = try fetched()
        let restored = try #require(try unarchive(archive(record)))
        #expect(restored.recordID == record.recordID)
        #expect(restored.recordType == "Note")
        #expect(restored.recordChangeTag == "k3-7f")
        #expect(restored.creationDate == record.creationDate)
        #expect(restored.modificationDate == record.modificationDate)
        #expect(restored.creatorUserRecordID == record.creatorUserRecordID)
        #expect(restored.lastModifiedUserRecordID == record.lastModifiedUserRecordID)
        #expect(restored.parent?.recordID == CKRecord.ID(recordName: "folder", zoneID: zone))
        #expect(restored.allKeys().isEmpty, "the record's own fields are not archived")
        #expect(restored.changedKeys().isEmpty)
    }

    @Test func aRestoredRecordSavesAgainstTheCachedChangeTag() throws {
        let restored = try #require(try unarchive(archive(try fetched())))
        restored["title"] = "Groceries and more"
        let wire = try restored.wireRecord(changedKeysOnly: true) { (asset) throws(CKError) in try asset.wireAsset(inlineContent: true) }
        #expect(wire.recordChangeTag == "k3-7f")
        #expect(wire.fields.map(\.key) == ["title"])
        #expect(wire.changedKeys == ["title"])
    }

    @Test func aNewRecordRoundTripsWithoutAChangeTag() throws {
        let record = CKRecord(recordType: "Draft", recordID: CKRecord.ID(recordName: "d", zoneID: zone))
        record["body"] = "unsaved"
        let restored = try #require(try unarchive(archive(record)))
        #expect(restored.recordID == record.recordID)
        #expect(restored.recordChangeTag == nil)
        #expect(restored.creationDate == nil)
    }

    @Test func aCoderWithoutSystemFieldsGivesNil() throws {
        // An archive of something else.
        let archiver = NSKeyedArchiver(requiringSecureCoding: true)
        archiver.encode("not a record", forKey: "title")
        archiver.finishEncoding()
        #expect(try unarchive(archiver.encodedData) == nil)

        // The key, but bytes that are no record.
        let garbage = NSKeyedArchiver(requiringSecureCoding: true)
        garbage.encode(Int64(1), forKey: "CirrusRecordSystemFieldsVersion")
        garbage.encode(Data([0xFF, 0xFF, 0xFF]), forKey: "CirrusRecordSystemFields")
        garbage.finishEncoding()
        #expect(try unarchive(garbage.encodedData) == nil)

        // A later format this version does not read.
        let later = NSKeyedArchiver(requiringSecureCoding: true)
        later.encode(Int64(2), forKey: "CirrusRecordSystemFieldsVersion")
        later.encode(Data(), forKey: "CirrusRecordSystemFields")
        later.finishEncoding()
        #expect(try unarchive(later.encodedData) == nil)
    }
}
