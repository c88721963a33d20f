import CirrusWire
import Foundation
import Testing

@testable import CirrusModel

/// The directory this test process keeps its temporary asset directories in, removed when the
/// process exits (so a run leaves nothing behind in the system's temporary directory).
private let temporaryRoot: URL = {
    let url = FileManager.default.temporaryDirectory
        .appendingPathComponent("CirrusModelTests-\(UUID().uuidString)", isDirectory: true)
    atexit { try? FileManager.default.removeItem(at: temporaryRoot) }
    return url
}()

/// A fresh directory under the temporary directory, for asset files.
func makeTemporaryDirectory() throws -> URL {
    let url = temporaryRoot.appendingPathComponent(UUID().uuidString, isDirectory: true)
    try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    return url
}

/// The record sent through the whole path: model → wire → bytes → wire → model.
func roundTrip(_ record: CKRecord, assetDirectory: URL? = nil) throws -> CKRecord {
    let wire = try record.wireRecord
    let bytes = wire.serializedBytes()
    let decoded = try Wire.Record(serializedBytes: bytes)
    #expect(decoded == wire)
    return try CKRecord(wire: decoded, assetDirectory: assetDirectory ?? makeTemporaryDirectory())
}

extension CKRecord {
    /// The stored plain fields, for exact comparisons.
    var storedFields: [FieldKey: FieldValue] { withState { $0.fields } }
    var storedEncryptedFields: [FieldKey: FieldValue] { withState { $0.encryptedFields } }
}

/// A record as the server would send it: the given fields, a change tag and dates.
func serverRecord(
    name: String = "r1",
    type: String = "Note",
    fields: [Wire.RecordField]
) -> Wire.Record {
    Wire.Record(
        recordID: Wire.RecordID(recordName: name, zoneID: Wire.RecordZoneID(zoneName: "Z", ownerName: "_alice")),
        recordType: type,
        recordChangeTag: "tag-1",
        creationDate: Wire.Timestamp(seconds: 1_700_000_000, nanos: 0),
        modificationDate: Wire.Timestamp(seconds: 1_700_000_100, nanos: 500_000_000),
        creatorUserRecordID: Wire.RecordID(recordName: "_alice"),
        lastModifiedUserRecordID: Wire.RecordID(recordName: "_bob"),
        fields: fields)
}
