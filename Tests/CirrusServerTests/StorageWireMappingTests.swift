import CirrusStore
import CirrusWire
import Testing

@testable import CirrusServer

/// The one place the store's domain outcomes become protocol events and errors
/// (`StoreError+Wire.swift` and the executors' event builders).
@Suite("Storage outcomes on the wire")
struct StorageWireMappingTests {
    /// alice's private database: the store names her zones `_alice`, she names them `__defaultOwner__`.
    let owners = ZoneOwnerMapping(databaseOwner: "_alice")
    let storeZone = Wire.RecordZoneID(zoneName: "_defaultZone", ownerName: "_alice")

    private func stored(_ name: String, title: String) -> Wire.Record {
        Wire.Record(
            recordID: Wire.RecordID(recordName: name, zoneID: storeZone), recordType: "Note", recordChangeTag: "1-2",
            fields: [Wire.RecordField(key: "title", value: Wire.FieldValue(kind: .stringValue(title)))])
    }

    @Test(arguments: [
        (StoreError.Code.limitExceeded, Wire.ErrorCode.limitExceeded),
        (.invalidArguments, .invalidArguments),
        (.badDatabase, .badDatabase),
        (.zoneNotFound, .zoneNotFound),
        (.changeTokenExpired, .changeTokenExpired),
        (.corruptData, .internalError),
        (.storageFailure, .internalError),
        (.duplicateOperation, .duplicateOperationID),
        (.unknownOperation, .unknownOperation),
    ] as [(StoreError.Code, Wire.ErrorCode)])
    func aStoreErrorKeepsItsProtocolCodeAndMessage(code: StoreError.Code, wire: Wire.ErrorCode) {
        let error = StoreError(code, "what went wrong").operationError
        #expect(error == Wire.OperationError(code: wire, message: "what went wrong"))
    }

    @Test func zoneOwnersAreMappedInEveryIDOfARecordAndBack() {
        let mine = Wire.RecordZoneID(zoneName: "Z", ownerName: ZoneOwnerMapping.currentUser)
        let bobs = Wire.RecordZoneID(zoneName: "Z", ownerName: "_bob")
        func reference(_ name: String, _ zone: Wire.RecordZoneID?) -> Wire.Reference {
            Wire.Reference(recordID: Wire.RecordID(recordName: name, zoneID: zone), action: .none)
        }
        let sent = Wire.Record(
            recordID: Wire.RecordID(recordName: "r", zoneID: nil), recordType: "Note",
            fields: [
                Wire.RecordField(key: "ref", value: Wire.FieldValue(kind: .referenceValue(reference("a", mine)))),
                Wire.RecordField(key: "other", value: Wire.FieldValue(kind: .referenceValue(reference("b", bobs)))),
                Wire.RecordField(
                    key: "list",
                    value: Wire.FieldValue(kind: .referenceList(Wire.ReferenceList(values: [reference("c", bobs), reference("d", mine)])))),
                Wire.RecordField(key: "title", value: Wire.FieldValue(kind: .stringValue("t"))),
            ],
            parent: reference("p", Wire.RecordZoneID(zoneName: "Z", ownerName: "")), share: reference("s", bobs))
        let stored = owners.inbound(sent)
        let alices = Wire.RecordZoneID(zoneName: "Z", ownerName: "_alice")
        #expect(stored.recordID == Wire.RecordID(recordName: "r", zoneID: Wire.RecordZoneID(zoneName: "_defaultZone", ownerName: "_alice")))
        #expect(stored.parent == reference("p", alices))
        #expect(stored.share == reference("s", bobs))
        #expect(stored.fields[0].value?.kind == .referenceValue(reference("a", alices)))
        #expect(stored.fields[1] == sent.fields[1])
        #expect(stored.fields[2].value?.kind == .referenceList(Wire.ReferenceList(values: [reference("c", bobs), reference("d", alices)])))
        #expect(stored.fields[3] == sent.fields[3])
        #expect(sent.recordID?.zoneID == nil, "the sent record is not changed")

        let back = owners.outbound(stored)
        #expect(back.recordID == Wire.RecordID(recordName: "r", zoneID: Wire.RecordZoneID(zoneName: "_defaultZone", ownerName: ZoneOwnerMapping.currentUser)))
        #expect(back.parent == reference("p", mine))
        #expect(back.fields[0].value?.kind == .referenceValue(reference("a", mine)))
        #expect(back.fields[2].value?.kind == .referenceList(Wire.ReferenceList(values: [reference("c", bobs), reference("d", mine)])))
        #expect(back.share == reference("s", bobs))
        // A record of another owner's zone crosses unchanged both ways.
        let foreign = Wire.Record(recordID: Wire.RecordID(recordName: "x", zoneID: bobs), recordType: "Note", parent: reference("y", bobs))
        #expect(owners.inbound(foreign) == foreign)
        #expect(owners.outbound(foreign) == foreign)
        // In the public database (owner ""), an absent owner is the database's both ways in, and
        // the current user's on the way out.
        let publicOwners = ZoneOwnerMapping(databaseOwner: "")
        let unowned = Wire.RecordID(recordName: "r", zoneID: Wire.RecordZoneID(zoneName: "_defaultZone", ownerName: ""))
        #expect(publicOwners.inbound(unowned) == unowned)
        #expect(publicOwners.outbound(unowned).zoneID?.ownerName == ZoneOwnerMapping.currentUser)
    }

    @Test func anUnreachableDatabaseIsAServiceUnavailableWithARetryAfter() throws {
        let error = StoreError(.unavailable, "PostgreSQL: the server closed the connection").operationError
        #expect(error.code == .serviceUnavailable)
        #expect(error.message == "PostgreSQL: the server closed the connection")
        let retryAfter = try #require(error.retryAfterSeconds)
        #expect(retryAfter > 0)
        // Errors that trying again does not cure carry no advice.
        #expect(StoreError(.storageFailure, "disk I/O").operationError.retryAfterSeconds == nil)
    }

    @Test(arguments: [
        (ItemFailure.Code.unknownItem, Wire.ErrorCode.unknownItem),
        (.zoneNotFound, .zoneNotFound),
        (.serverRecordChanged, .serverRecordChanged),
        (.batchRequestFailed, .batchRequestFailed),
        (.invalidArguments, .invalidArguments),
        (.permissionFailure, .permissionFailure),
        (.assetFileNotFound, .assetFileNotFound),
        (.assetFileModified, .assetFileModified),
        (.limitExceeded, .limitExceeded),
    ] as [(ItemFailure.Code, Wire.ErrorCode)])
    func anItemFailureBecomesItsCloudKitNamesake(code: ItemFailure.Code, wire: Wire.ErrorCode) {
        #expect(owners.outbound(ItemFailure(code, "item 3 failed")) == Wire.OperationError(code: wire, message: "item 3 failed"))
    }

    @Test func aConflictCarriesTheServerRecordAsTheClientNamesIt() {
        let server = stored("n", title: "server")
        let client = stored("n", title: "client")
        let error = owners.outbound(
            ItemFailure(.serverRecordChanged, "record n was changed on the server", serverRecord: server, clientRecord: client))
        #expect(error.code == .serverRecordChanged)
        #expect(error.message == "record n was changed on the server")
        #expect(error.serverRecord == owners.outbound(server))
        #expect(error.serverRecord?.recordID?.zoneID?.ownerName == "__defaultOwner__")
        #expect(error.clientRecord == owners.outbound(client))
        #expect(error.ancestorRecord == nil)
    }

    @Test func aModificationBecomesOneEventPerItemSavesFirst() {
        let saved = stored("a", title: "saved")
        let server = stored("b", title: "theirs")
        let result = RecordModificationResult(
            saves: [
                RecordSaveOutcome(id: saved.recordID, result: .success(saved)),
                RecordSaveOutcome(
                    id: server.recordID,
                    result: .failure(ItemFailure(.serverRecordChanged, "record b was changed on the server", serverRecord: server))),
                RecordSaveOutcome(id: nil, result: .failure(ItemFailure(.invalidArguments, "record without a record ID"))),
            ],
            deletes: [
                RecordDeletion(id: Wire.RecordID(recordName: "gone", zoneID: storeZone)),
                RecordDeletion(
                    id: Wire.RecordID(recordName: "theirs", zoneID: storeZone),
                    failure: ItemFailure(.permissionFailure, "record theirs belongs to another user")),
            ])
        let events = StorageExecutor.modifyEvents(result, owners, failuresOnly: false)
        let mine = Wire.RecordZoneID(zoneName: "_defaultZone", ownerName: "__defaultOwner__")
        var conflict = Wire.OperationError(code: .serverRecordChanged, message: "record b was changed on the server")
        conflict.serverRecord = owners.outbound(server)
        let expected: [Wire.ModifyRecordsEvent.Callback] = [
            .perRecordSave(Wire.ModifyRecordsPerRecordSave(
                recordID: Wire.RecordID(recordName: "a", zoneID: mine), outcome: .record(owners.outbound(saved)))),
            .perRecordSave(Wire.ModifyRecordsPerRecordSave(
                recordID: Wire.RecordID(recordName: "b", zoneID: mine), outcome: .error(conflict))),
            .perRecordSave(Wire.ModifyRecordsPerRecordSave(
                recordID: nil, outcome: .error(Wire.OperationError(code: .invalidArguments, message: "record without a record ID")))),
            .perRecordDelete(Wire.ModifyRecordsPerRecordDelete(recordID: Wire.RecordID(recordName: "gone", zoneID: mine))),
            .perRecordDelete(Wire.ModifyRecordsPerRecordDelete(
                recordID: Wire.RecordID(recordName: "theirs", zoneID: mine),
                error: Wire.OperationError(code: .permissionFailure, message: "record theirs belongs to another user"))),
        ]
        #expect(events == expected.map { .modifyRecords(Wire.ModifyRecordsEvent(callback: $0)) })
        #expect(events.compactMap(LongLivedCheckpoint.itemError).count == 3)
        // `failures_only`: the same events of the items that failed, nothing of the others.
        let failures = StorageExecutor.modifyEvents(result, owners, failuresOnly: true)
        #expect(failures == [expected[1], expected[2], expected[4]].map { .modifyRecords(Wire.ModifyRecordsEvent(callback: $0)) })
        // `omit_fields_as_sent`: the saved record sent with exactly these fields goes out without them.
        let asSent = owners.outbound(saved)
        var bare = asSent
        bare.fields = []
        var other = asSent
        other.fields = [Wire.RecordField(key: "title", value: Wire.FieldValue(kind: .stringValue("something else")))]
        for (sent, record, flag) in [(asSent, bare, true), (other, asSent, false)] {
            let events = StorageExecutor.modifyEvents(result, owners, failuresOnly: false, sent: [sent, server, server][...])
            guard case .modifyRecords(let event) = events.first, case .perRecordSave(let save) = event.callback else {
                Issue.record("no save event in \(events)")
                continue
            }
            #expect(save.outcome == .record(record))
            #expect(save.fieldsAsSent == flag)
            #expect(Array(events.dropFirst()) == Array(expected.dropFirst()).map { .modifyRecords(Wire.ModifyRecordsEvent(callback: $0)) })
        }
    }
}
