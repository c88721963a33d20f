import CirrusModel
import Foundation
import Testing

@testable import CirrusKit

@Suite("CKSyncEngine state")
struct SyncEngineStateTests {
    static let zone = CKRecordZone.ID(zoneName: "Items")

    static func id(_ name: String) -> CKRecord.ID { CKRecord.ID(recordName: name, zoneID: zone) }

    static func roundTrip(_ serialization: CKSyncEngine.State.Serialization) throws -> CKSyncEngine.State.Serialization {
        try JSONDecoder().decode(CKSyncEngine.State.Serialization.self, from: JSONEncoder().encode(serialization))
    }

    @Test func aSerializationRoundTripsEverythingTheEngineNeeds() throws {
        var contents = CKSyncEngine.State.Contents()
        contents.databaseToken = CKServerChangeToken(opaqueBytes: [1, 2, 3])
        contents.zoneTokens = [Self.zone: CKServerChangeToken(opaqueBytes: [4]), .default: CKServerChangeToken(opaqueBytes: [5])]
        contents.zonesNeedingFetch = [Self.zone]
        contents.pendingRecordZoneChanges = [.saveRecord(Self.id("a")), .deleteRecord(Self.id("b"))]
        let zone = CKRecordZone(zoneID: Self.zone)
        zone.encryptionScope = .perZone
        contents.pendingDatabaseChanges = [.saveZone(zone), .deleteZone(CKRecordZone.ID(zoneName: "Old"))]
        contents.hasPendingUntrackedChanges = true
        contents.userRecordName = "_alice"
        contents.subscriptionSaved = true
        contents.inFlightSend = .init(operationID: "op-1", changes: [.saveRecord(Self.id("a"))])
        let restored = try Self.roundTrip(CKSyncEngine.State.Serialization(contents)).contents
        #expect(restored.databaseToken == contents.databaseToken)
        #expect(restored.zoneTokens == contents.zoneTokens)
        #expect(restored.zonesNeedingFetch == contents.zonesNeedingFetch)
        #expect(restored.pendingRecordZoneChanges == contents.pendingRecordZoneChanges)
        #expect(restored.pendingDatabaseChanges == contents.pendingDatabaseChanges)
        if case .saveZone(let restoredZone) = restored.pendingDatabaseChanges.first {
            #expect(restoredZone.encryptionScope == .perZone)
        } else {
            Issue.record("the zone save did not come back")
        }
        #expect(restored.hasPendingUntrackedChanges)
        #expect(restored.userRecordName == "_alice")
        #expect(restored.subscriptionSaved)
        #expect(restored.inFlightSend == contents.inFlightSend)
    }

    @Test func aSerializationOfAnotherVersionOrDamagedIsRefusedWithAClearError() throws {
        let good = try JSONEncoder().encode(CKSyncEngine.State.Serialization(.init()))
        var object = try #require(try JSONSerialization.jsonObject(with: good) as? [String: Any])
        object["version"] = 2
        let newer = try JSONSerialization.data(withJSONObject: object)
        let error = #expect(throws: DecodingError.self) {
            try JSONDecoder().decode(CKSyncEngine.State.Serialization.self, from: newer)
        }
        #expect("\(String(describing: error))".contains("version 2"))
        object["version"] = 1
        object["pendingDatabaseChanges"] = [["neither": true]]
        let damaged = try JSONSerialization.data(withJSONObject: object)
        #expect(throws: DecodingError.self) {
            try JSONDecoder().decode(CKSyncEngine.State.Serialization.self, from: damaged)
        }
        #expect(throws: DecodingError.self) {
            try JSONDecoder().decode(CKSyncEngine.State.Serialization.self, from: Data("{}".utf8))
        }
    }

    @Test func pendingChangesKeepTheirOrderOnceAndTheLastOfSaveAndDeleteWins() {
        let state = CKSyncEngine.State(.init())
        state.add(pendingRecordZoneChanges: [.saveRecord(Self.id("a")), .saveRecord(Self.id("b")), .saveRecord(Self.id("a"))])
        #expect(state.pendingRecordZoneChanges == [.saveRecord(Self.id("a")), .saveRecord(Self.id("b"))])
        state.add(pendingRecordZoneChanges: [.deleteRecord(Self.id("a"))])
        #expect(state.pendingRecordZoneChanges == [.saveRecord(Self.id("b")), .deleteRecord(Self.id("a"))])
        state.remove(pendingRecordZoneChanges: [.saveRecord(Self.id("b"))])
        #expect(state.pendingRecordZoneChanges == [.deleteRecord(Self.id("a"))])

        state.add(pendingDatabaseChanges: [.saveZone(CKRecordZone(zoneID: Self.zone))])
        state.add(pendingDatabaseChanges: [.saveZone(CKRecordZone(zoneID: Self.zone))])
        #expect(state.pendingDatabaseChanges.count == 1)
        state.add(pendingDatabaseChanges: [.deleteZone(Self.zone)])
        #expect(state.pendingDatabaseChanges == [.deleteZone(Self.zone)])
        state.remove(pendingDatabaseChanges: [.deleteZone(Self.zone)])
        #expect(state.pendingDatabaseChanges.isEmpty)
    }

    @Test func aChangeAddedAgainDuringItsSendStaysPendingAfterTheSend() {
        let state = CKSyncEngine.State(.init())
        let a = CKSyncEngine.PendingRecordZoneChange.saveRecord(Self.id("a"))
        let b = CKSyncEngine.PendingRecordZoneChange.saveRecord(Self.id("b"))
        state.add(pendingRecordZoneChanges: [a, b])
        state.beginSend(operationID: "op", changes: [a, b])
        #expect(state.serialization.contents.inFlightSend?.operationID == "op")
        state.add(pendingRecordZoneChanges: [a])  // edited again while the send is in flight
        state.finishSend(done: [a, b])
        #expect(state.pendingRecordZoneChanges == [a])
        #expect(state.serialization.contents.inFlightSend == nil)
    }

    @Test func aChangeAddedAgainWhileItsBatchIsBuiltStaysPendingAfterTheSend() {
        let state = CKSyncEngine.State(.init())
        let a = CKSyncEngine.PendingRecordZoneChange.saveRecord(Self.id("a"))
        let b = CKSyncEngine.PendingRecordZoneChange.saveRecord(Self.id("b"))
        state.add(pendingRecordZoneChanges: [a, b])
        state.beginBatch()
        state.add(pendingRecordZoneChanges: [a])  // edited again after the delegate read it
        state.beginSend(operationID: "op", changes: [a, b])
        state.finishSend(done: [a, b])
        #expect(state.pendingRecordZoneChanges == [a])
        // The next batch starts afresh.
        state.beginBatch()
        state.beginSend(operationID: "op2", changes: [a])
        state.finishSend(done: [a])
        #expect(state.pendingRecordZoneChanges.isEmpty)
    }

    @Test func aRestoredInFlightSendStillProtectsChangesAddedAgain() {
        var contents = CKSyncEngine.State.Contents()
        let a = CKSyncEngine.PendingRecordZoneChange.saveRecord(Self.id("a"))
        contents.pendingRecordZoneChanges = [a]
        contents.inFlightSend = .init(operationID: "op", changes: [a])
        let state = CKSyncEngine.State(contents)
        state.add(pendingRecordZoneChanges: [a])
        state.finishSend(done: [a])
        #expect(state.pendingRecordZoneChanges == [a])
    }

    @Test func stateUpdatesAreProducedOnlyAfterChanges() {
        let state = CKSyncEngine.State(.init())
        #expect(state.takeUpdate() == nil)
        state.add(pendingRecordZoneChanges: [.saveRecord(Self.id("a"))])
        #expect(state.takeUpdate()?.contents.pendingRecordZoneChanges.count == 1)
        #expect(state.takeUpdate() == nil)
        state.remove(pendingRecordZoneChanges: [.saveRecord(Self.id("zzz"))])
        #expect(state.takeUpdate() == nil)
    }

    @Test func aBatchTakesAtMost400ChangesAndLeavesOutRecordsTheProviderLacks() async throws {
        let changes = (0..<500).map { CKSyncEngine.PendingRecordZoneChange.saveRecord(Self.id("r\($0)")) }
            + [.deleteRecord(Self.id("gone"))]
        let batch = try #require(
            await CKSyncEngine.RecordZoneChangeBatch(pendingChanges: changes) { id in
                id.recordName == "r1" ? nil : CKRecord(recordType: "Item", recordID: id)
            })
        // The save left out does not count against the 400.
        #expect(batch.recordsToSave.count == 400)
        #expect(batch.recordsToSave.last?.recordID == Self.id("r400"))
        #expect(batch.skippedSaves == [Self.id("r1")])
        #expect(batch.recordIDsToDelete.isEmpty)
        #expect(!batch.atomicByZone)
        let empty = await CKSyncEngine.RecordZoneChangeBatch(pendingChanges: []) { _ in nil }
        #expect(empty == nil)
        let deletes = try #require(await CKSyncEngine.RecordZoneChangeBatch(pendingChanges: [.deleteRecord(Self.id("x"))]) { _ in nil })
        #expect(deletes.recordIDsToDelete == [Self.id("x")])
    }

    @Test func sendScopesSelectChangesByZoneOrRecord() {
        let other = CKRecordZone.ID(zoneName: "Other")
        let inItems = CKSyncEngine.PendingRecordZoneChange.saveRecord(Self.id("a"))
        let inOther = CKSyncEngine.PendingRecordZoneChange.saveRecord(CKRecord.ID(recordName: "b", zoneID: other))
        #expect(CKSyncEngine.SendChangesOptions.Scope.all.contains(inOther))
        #expect(CKSyncEngine.SendChangesOptions.Scope.zoneIDs([Self.zone]).contains(inItems))
        #expect(!CKSyncEngine.SendChangesOptions.Scope.zoneIDs([Self.zone]).contains(inOther))
        #expect(!CKSyncEngine.SendChangesOptions.Scope.allExcluding([Self.zone]).contains(inItems))
        #expect(CKSyncEngine.SendChangesOptions.Scope.recordIDs([Self.id("a")]).contains(inItems))
        #expect(!CKSyncEngine.SendChangesOptions.Scope.recordIDs([Self.id("a")]).contains(inOther))
        #expect(CKSyncEngine.FetchChangesOptions.Scope.allExcluding([other]).contains(Self.zone))
    }
}
