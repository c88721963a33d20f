import Foundation
import Testing

@testable import CirrusModel

/// `NSSecureCoding` on the identity and token types, as CloudKit apps use it: archived with
/// `NSKeyedArchiver` (secure coding required) and read back with `NSKeyedUnarchiver`.
@Suite("IDs and change tokens: NSSecureCoding")
struct SecureCodingTests {
    private let zone = CKRecordZone.ID(zoneName: "Notes", ownerName: "_alice")

    private func roundTrip<T: NSObject & NSSecureCoding>(_ value: T, secure: Bool = true) throws -> T? {
        let data = try NSKeyedArchiver.archivedData(withRootObject: value, requiringSecureCoding: secure)
        return try NSKeyedUnarchiver.unarchivedObject(ofClass: T.self, from: data)
    }

    @Test func everyTypeSupportsSecureCoding() {
        #expect(CKRecord.ID.supportsSecureCoding)
        #expect(CKRecordZone.ID.supportsSecureCoding)
        #expect(CKServerChangeToken.supportsSecureCoding)
    }

    @Test func zoneIDsRoundTrip() throws {
        let back = try #require(try self.roundTrip(self.zone))
        #expect(back == self.zone)
        #expect(back.zoneName == "Notes" && back.ownerName == "_alice")
        #expect(try self.roundTrip(CKRecordZone.ID.default) == .default)
        #expect(try self.roundTrip(self.zone, secure: false) == self.zone)
    }

    @Test func recordIDsRoundTripWithTheirZone() throws {
        let id = CKRecord.ID(recordName: "note-é-1", zoneID: self.zone)
        let back = try #require(try self.roundTrip(id))
        #expect(back == id)
        #expect(back.recordName == "note-é-1")
        #expect(back.zoneID == self.zone)
        #expect(back.hash == id.hash)
        #expect(Set([id, back]).count == 1)
    }

    @Test func changeTokensRoundTrip() throws {
        let token = CKServerChangeToken(opaqueBytes: [0, 1, 255, 7, 0])
        let back = try #require(try self.roundTrip(token))
        #expect(back == token)
        #expect(back.opaqueBytes == [0, 1, 255, 7, 0])
        #expect(try self.roundTrip(CKServerChangeToken(opaqueBytes: [])) == CKServerChangeToken(opaqueBytes: []))
    }

    /// Several objects in one archive, the way an app keeps its tokens per zone.
    @Test func aKeyedArchiveHoldsSeveral() throws {
        let archiver = NSKeyedArchiver(requiringSecureCoding: true)
        let token = CKServerChangeToken(opaqueBytes: [9, 9])
        archiver.encode(self.zone, forKey: "zone")
        archiver.encode(token, forKey: "token")
        archiver.encode(CKRecord.ID(recordName: "r", zoneID: self.zone), forKey: "record")
        archiver.finishEncoding()
        let unarchiver = try NSKeyedUnarchiver(forReadingFrom: archiver.encodedData)
        unarchiver.requiresSecureCoding = true
        defer { unarchiver.finishDecoding() }
        #expect(unarchiver.decodeObject(of: CKRecordZone.ID.self, forKey: "zone") == self.zone)
        #expect(unarchiver.decodeObject(of: CKServerChangeToken.self, forKey: "token") == token)
        #expect(unarchiver.decodeObject(of: CKRecord.ID.self, forKey: "record") == CKRecord.ID(recordName: "r", zoneID: self.zone))
    }

    /// A keyed archive that lacks a field decodes to nil rather than a half-made ID.
    @Test func missingFieldsDecodeToNil() throws {
        let archiver = NSKeyedArchiver(requiringSecureCoding: true)
        archiver.encode("Notes" as NSString, forKey: "zoneName")
        archiver.finishEncoding()
        let unarchiver = try NSKeyedUnarchiver(forReadingFrom: archiver.encodedData)
        unarchiver.requiresSecureCoding = true
        #expect(CKRecordZone.ID(coder: unarchiver) == nil)
        #expect(CKRecord.ID(coder: unarchiver) == nil)
        #expect(CKServerChangeToken(coder: unarchiver) == nil)
        unarchiver.finishDecoding()
    }

    /// Equality is by value and never across types; copies are the same immutable object.
    @Test func equalityIsByValue() {
        let a = CKRecordZone.ID(zoneName: "Notes", ownerName: "_alice")
        #expect(a.isEqual(self.zone))
        #expect(!a.isEqual(CKRecordZone.ID(zoneName: "Notes")))
        #expect(!a.isEqual("Notes"))
        #expect(!a.isEqual(nil))
        #expect(a.copy() as? CKRecordZone.ID === a)
        let token = CKServerChangeToken(opaqueBytes: [1])
        #expect(token != CKServerChangeToken(opaqueBytes: [2]))
        #expect(!CKRecord.ID(recordName: "Notes", zoneID: a).isEqual(a))
    }

    /// Codable keeps the shape the value types had, so saved sync-engine state still decodes.
    @Test func codableShapeIsUnchanged() throws {
        let json = #"{"recordName":"x","zoneID":{"zoneName":"Z","ownerName":"_a"}}"#
        let id = try JSONDecoder().decode(CKRecord.ID.self, from: Data(json.utf8))
        #expect(id == CKRecord.ID(recordName: "x", zoneID: CKRecordZone.ID(zoneName: "Z", ownerName: "_a")))
        let token = try JSONDecoder().decode(CKServerChangeToken.self, from: Data(#"{"opaqueBytes":[1,2]}"#.utf8))
        #expect(token.opaqueBytes == [1, 2])
    }
}
