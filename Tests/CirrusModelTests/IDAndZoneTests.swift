import CirrusWire
import Foundation
import Testing

@testable import CirrusModel

@Suite struct IDAndZoneTests {
    @Test func defaultsMatchCloudKit() {
        #expect(CKCurrentUserDefaultName == "__defaultOwner__")
        #expect(CKRecordZone.ID.defaultZoneName == "_defaultZone")
        #expect(CKRecordZone.ID.default == CKRecordZone.ID(zoneName: "_defaultZone", ownerName: "__defaultOwner__"))
        #expect(CKRecordZone.ID() == .default)
        #expect(CKRecord.ID(recordName: "a").zoneID == .default)
        #expect(CKRecordZone.default().zoneID == .default)
        #expect(CKRecord.SystemType.share == "cloudkit.share")
        #expect(CKRecord.SystemType.userRecord == "Users")
        #expect(CKRecord.SystemType.zoneShare == "cloudkit.zoneshare")
    }

    @Test func idsAreHashableValues() {
        let zone = CKRecordZone.ID(zoneName: "Z", ownerName: "_alice")
        let a = CKRecord.ID(recordName: "x", zoneID: zone)
        let b = CKRecord.ID(recordName: "x", zoneID: CKRecordZone.ID(zoneName: "Z", ownerName: "_alice"))
        #expect(a == b && a.hash == b.hash)
        #expect(Set([a, b]).count == 1)
        // Same hash is not same ID: names that differ still compare unequal.
        #expect(a != CKRecord.ID(recordName: "y", zoneID: zone) && zone != CKRecordZone.ID(zoneName: "Y", ownerName: "_alice"))
        #expect(a != CKRecord.ID(recordName: "x"))
        #expect(a != CKRecord.ID(recordName: "x", zoneID: CKRecordZone.ID(zoneName: "Z", ownerName: "_bob")))
        let tokens: [CKRecordZone.ID: CKServerChangeToken] = [zone: CKServerChangeToken(opaqueBytes: [1])]
        #expect(tokens[CKRecordZone.ID(zoneName: "Z", ownerName: "_alice")] == CKServerChangeToken(opaqueBytes: [1]))
    }

    @Test func idsAreCodable() throws {
        let id = CKRecord.ID(recordName: "x", zoneID: CKRecordZone.ID(zoneName: "Z"))
        let data = try JSONEncoder().encode(id)
        let decoded = try JSONDecoder().decode(CKRecord.ID.self, from: data)
        #expect(decoded == id && decoded.hash == id.hash && decoded.zoneID.hash == id.zoneID.hash)
        #expect(Set([id, decoded]).count == 1)
        let token = CKServerChangeToken(opaqueBytes: [0, 255, 7])
        #expect(try JSONDecoder().decode(CKServerChangeToken.self, from: JSONEncoder().encode(token)) == token)
    }

    @Test func idsConvertToAndFromTheWire() throws {
        let id = CKRecord.ID(recordName: "x", zoneID: CKRecordZone.ID(zoneName: "Z", ownerName: "_alice"))
        let wire = id.wireRecordID
        #expect(wire == Wire.RecordID(recordName: "x", zoneID: Wire.RecordZoneID(zoneName: "Z", ownerName: "_alice")))
        #expect(try CKRecord.ID(wire: Wire.RecordID(serializedBytes: wire.serializedBytes())) == id)
        #expect(try CKRecord.ID(wire: Wire.RecordID(recordName: "y")) == CKRecord.ID(recordName: "y"))
        #expect(
            try CKRecordZone.ID(wire: Wire.RecordZoneID(zoneName: "Z", ownerName: ""))
                == CKRecordZone.ID(zoneName: "Z", ownerName: CKCurrentUserDefaultName))
    }

    @Test func emptyNamesFromTheWireAreRefused() {
        #expect(throws: CKError.self) { try CKRecord.ID(wire: Wire.RecordID(recordName: "")) }
        #expect(throws: CKError.self) {
            try CKRecord.ID(wire: Wire.RecordID(recordName: "x", zoneID: Wire.RecordZoneID(zoneName: "")))
        }
        do {
            _ = try CKRecordZone.ID(wire: Wire.RecordZoneID())
            Issue.record("an empty zone name was accepted")
        } catch {
            #expect(error.code == .invalidArguments)
            #expect(error.localizedDescription.contains("zone name"))
        }
    }

    @Test func zonesHaveCapabilitiesAndConvert() throws {
        let custom = CKRecordZone(zoneName: "Notes")
        #expect(custom.zoneID == CKRecordZone.ID(zoneName: "Notes", ownerName: CKCurrentUserDefaultName))
        #expect(custom.capabilities.contains([.fetchChanges, .atomic]))
        #expect(CKRecordZone.default().capabilities.isEmpty)
        custom.encryptionScope = .perZone
        let wire = custom.wireZone
        #expect(wire.encryptionScope == .perZone)
        let back = try CKRecordZone(wire: Wire.RecordZone(serializedBytes: wire.serializedBytes()))
        #expect(back.zoneID == custom.zoneID)
        #expect(back.capabilities == custom.capabilities)
        #expect(back.encryptionScope == .perZone)
        let shared = try CKRecordZone(
            wire: Wire.RecordZone(
                zoneID: Wire.RecordZoneID(zoneName: "S", ownerName: "_bob"),
                capabilities: Wire.ZoneCapabilities(fetchChanges: true, atomic: true, sharing: true, zoneWideSharing: true),
                share: Wire.Reference(recordID: Wire.RecordID(recordName: "cloudkit.zoneshare"), action: .none)))
        #expect(shared.capabilities == [.fetchChanges, .atomic, .sharing, .zoneWideSharing])
        #expect(shared.share?.recordID.recordName == CKRecord.nameZoneWideShare)
        #expect(shared.encryptionScope == .perRecord)
        #expect(throws: CKError.self) { try CKRecordZone(wire: Wire.RecordZone()) }
    }

    @Test func referencesConvertWithBothActions() throws {
        let id = CKRecord.ID(recordName: "t")
        for action in [CKRecord.ReferenceAction.none, .deleteSelf] {
            let reference = CKRecord.Reference(recordID: id, action: action)
            #expect(try CKRecord.Reference(wire: reference.wireReference) == reference)
        }
        #expect(CKRecord.Reference(recordID: id, action: .deleteSelf).wireReference.action == .deleteSelf)
        #expect(CKRecord.Reference(recordID: id, action: .none).wireReference.action == .none)
        let unspecified = Wire.Reference(recordID: id.wireRecordID, action: .unspecified)
        #expect(try CKRecord.Reference(wire: unspecified).action == .none)
        let unknown = Wire.Reference(recordID: id.wireRecordID, action: .unrecognized(9))
        #expect(try CKRecord.Reference(wire: unknown).action == .none)
        #expect(throws: CKError.self) { try CKRecord.Reference(wire: Wire.Reference(action: .deleteSelf)) }
        #expect(CKRecord.ReferenceAction.none.rawValue == 0)
        #expect(CKRecord.ReferenceAction.deleteSelf.rawValue == 1)
    }

    @Test func databaseScopeKeepsApplesRawValuesAndConverts() {
        #expect(CKDatabaseScope.public.rawValue == 1)
        #expect(CKDatabaseScope.private.rawValue == 2)
        #expect(CKDatabaseScope.shared.rawValue == 3)
        for scope in CKDatabaseScope.allCases {
            #expect(CKDatabaseScope(wire: scope.wireScope) == scope)
            #expect(Int(scope.wireScope.rawValue) == scope.rawValue)
        }
        #expect(CKDatabaseScope(wire: .unspecified) == nil)
        #expect(CKDatabaseScope(wire: .unrecognized(42)) == nil)
    }

    @Test func changeTokensConvertByteForByte() throws {
        let token = CKServerChangeToken(opaqueBytes: [0, 1, 2, 255])
        let wire = try Wire.ServerChangeToken(serializedBytes: token.wireToken.serializedBytes())
        #expect(CKServerChangeToken(wire: wire) == token)
    }

    @Test func locationsConvertAndMeasureDistance() throws {
        let zurich = CKLocation(latitude: 47.3769, longitude: 8.5417)
        let geneva = CKLocation(latitude: 46.2044, longitude: 6.1432)
        let distance = zurich.distance(from: geneva)
        #expect(abs(distance - 224_000) < 2_000)
        #expect(zurich.distance(from: zurich) == 0)
        #expect(CKLocation(wire: zurich.wireLocation) == zurich)
        let noTimestamp = CKLocation(wire: Wire.Location(latitude: 1, longitude: 2))
        #expect(noTimestamp.timestamp == Date(timeIntervalSince1970: 0))
        let aliased: CLLocation = CLLocation(latitude: 1, longitude: 2)
        #expect(aliased.coordinate == CLLocationCoordinate2D(latitude: 1, longitude: 2))
    }
}
