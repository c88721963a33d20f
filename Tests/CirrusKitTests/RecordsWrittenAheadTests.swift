@testable import CirrusKit
import CirrusModel
import CirrusWire
import Foundation
import NIOCore
import Testing

/// A save's records written straight into its `Open` (`makeRequestToSend`): whichever way each
/// record goes (written from its values, or packed from its message), the frame sent is the
/// request `makeRequest` builds, records in order.
@Suite("A save's records written ahead")
struct RecordsWrittenAheadTests {
    @Test("Plain, referencing, located, encrypted records and a share: the same request, the same frame", arguments: [false, true])
    func sameRequest(changedKeys: Bool) throws {
        let zone = CKRecordZone.ID(zoneName: "Notes", ownerName: "_alice")
        var records: [CKRecord] = []
        for i in 0..<12 {
            let record = CKRecord(recordType: "Note", recordID: CKRecord.ID(recordName: "r\(i)", zoneID: zone))
            record["n"] = i
            switch i % 4 {
            case 1: record["link"] = CKRecord.Reference(recordID: CKRecord.ID(recordName: "r0", zoneID: zone), action: .deleteSelf)
            case 2: record["where"] = CKLocation(latitude: 47.3, longitude: 8.5)
            case 3: record.encryptedValues["secret"] = "s\(i)"
            default: record.setParent(CKRecord.ID(recordName: "r0", zoneID: zone))
            }
            records.append(record)
        }
        records.append(CKShare(rootRecord: records[4]))
        let operation = CKModifyRecordsOperation(
            recordsToSave: records, recordIDsToDelete: [CKRecord.ID(recordName: "gone", zoneID: zone)])
        if changedKeys { operation.savePolicy = .changedKeys }
        let whole = try operation.makeRequest(maximumItems: 400)
        let (request, written) = try operation.makeRequestToSend(maximumItems: 400)
        let recordsToSave = try #require(written)
        guard case .modifyRecords(var sent) = request, case .modifyRecords(let expected) = whole else {
            Issue.record("not a modify-records request")
            return
        }
        #expect(sent.recordsToSave.isEmpty)
        #expect(recordsToSave.count == records.count)
        sent.recordsToSave = try recordsToSave.decoded()
        #expect(sent == expected)

        let open = Wire.Open(operationID: operation.operationID, databaseScope: .private, request: request)
        var ahead = ByteBuffer()
        try FrameEncoder.encode(Wire.Frame(streamID: 3, kind: .open(open)), appendingRecordsToSave: recordsToSave, into: &ahead)
        var packed = ByteBuffer()
        var wholeOpen = open
        wholeOpen.request = whole
        try FrameEncoder.encode(Wire.Frame(streamID: 3, kind: .open(wholeOpen)), into: &packed)
        #expect(ahead == packed)
    }

    @Test("A save of nothing sends its request as it is")
    func deletionsOnly() throws {
        let operation = CKModifyRecordsOperation(recordsToSave: [], recordIDsToDelete: [CKRecord.ID(recordName: "gone")])
        let (request, written) = try operation.makeRequestToSend(maximumItems: 400)
        #expect(written == nil)
        #expect(request == (try operation.makeRequest(maximumItems: 400)))
    }
}
