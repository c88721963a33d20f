import CirrusWire
import Foundation
import Testing

@testable import CirrusModel

@Suite struct CKErrorTests {
    @Test func codesHaveApplesRawValues() {
        #expect(CKError.Code.allCases.count == 37)
        #expect(CKError.Code.allCases.map(\.rawValue) == Array(1...37))
        #expect(CKError.Code.internalError.rawValue == 1)
        #expect(CKError.Code.partialFailure.rawValue == 2)
        #expect(CKError.Code.unknownItem.rawValue == 11)
        #expect(CKError.Code.serverRecordChanged.rawValue == 14)
        #expect(CKError.Code.changeTokenExpired.rawValue == 21)
        #expect(CKError.Code.batchRequestFailed.rawValue == 22)
        #expect(CKError.Code.limitExceeded.rawValue == 27)
        #expect(CKError.Code.participantAlreadyInvited.rawValue == 37)
    }

    @Test(arguments: CKError.Code.allCases)
    func everyCloudKitCodeMapsToItselfOverTheWire(_ code: CKError.Code) throws {
        #expect(Int(code.wireCode.rawValue) == code.rawValue)
        #expect(CKError.Code(wire: code.wireCode) == code)
        let wire = Wire.OperationError(code: code.wireCode, message: "m")
        let error = CKError(wire: try Wire.OperationError(serializedBytes: wire.serializedBytes()))
        #expect(error.code == code)
        #expect(error.errorUserInfo[CirrusWireErrorCodeKey] == nil)
    }

    @Test(arguments: [
        (Wire.ErrorCode.frameTooLarge, CKError.Code.limitExceeded),
        (.malformedFrame, .serverRejectedRequest),
        (.protocolViolation, .serverRejectedRequest),
        (.unsupportedVersion, .incompatibleVersion),
        (.tooManyStreams, .requestRateLimited),
        (.flowControlViolation, .serverRejectedRequest),
        (.idleTimeout, .networkFailure),
        (.handshakeTimeout, .networkFailure),
        (.shuttingDown, .serviceUnavailable),
        (.rateLimited, .requestRateLimited),
        (.unknownOperation, .unknownItem),
        (.unknownFrameKind, .serverRejectedRequest),
        (.duplicateOperationID, .invalidArguments),
        (.operationAlreadyAttached, .serverRejectedRequest),
        (.unspecified, .internalError),
        (.unrecognized(4242), .internalError),
    ])
    func protocolCodesMapAndKeepTheWireCode(_ wireCode: Wire.ErrorCode, _ expected: CKError.Code) {
        let error = CKError(wire: Wire.OperationError(code: wireCode, message: "why"))
        #expect(error.code == expected)
        #expect(error.errorUserInfo[CirrusWireErrorCodeKey] as? Int == Int(wireCode.rawValue))
        #expect(error.wireError.code == wireCode)
        #expect(error.localizedDescription == "why")
    }

    @Test func detailsAreInPropertiesAndUserInfo() throws {
        let wire = Wire.OperationError(
            code: .serverRecordChanged, message: "stale change tag", retryAfterSeconds: 2.5,
            serverRecord: serverRecord(fields: [Wire.RecordField(key: "v", value: Wire.FieldValue(kind: .int64Value(9)))]),
            clientRecord: serverRecord(name: "r1", fields: []))
        let error = CKError(wire: wire, assetDirectory: try makeTemporaryDirectory())
        #expect(error.code == .serverRecordChanged)
        #expect(error.errorCode == 14)
        #expect(CKError.errorDomain == "CKErrorDomain")
        #expect(error.retryAfterSeconds == 2.5)
        #expect(error.serverRecord?["v"] as? Int == 9)
        #expect(error.serverRecord?.recordChangeTag == "tag-1")
        #expect(error.clientRecord?.recordID.recordName == "r1")
        #expect(error.ancestorRecord == nil)
        #expect(error.partialErrorsByItemID == nil)
        #expect(error.localizedDescription == "stale change tag")
        #expect(error.userInfo[CKErrorRetryAfterKey] as? Double == 2.5)
        #expect(error.userInfo[CKRecordChangedErrorServerRecordKey] is CKRecord)
        #expect((error as NSError).domain == CKErrorDomain)
        #expect((error as NSError).code == 14)
        let any: any Error = error
        #expect(any.localizedDescription == "stale change tag")
    }

    @Test func partialErrorsAreKeyedByItemID() throws {
        let recordID = CKRecord.ID(recordName: "a", zoneID: CKRecordZone.ID(zoneName: "Z", ownerName: "_alice"))
        let zoneID = CKRecordZone.ID(zoneName: "Gone")
        let wire = Wire.OperationError(
            code: .partialFailure, message: "some failed",
            partialErrors: [
                Wire.ItemError(item: .recordID(recordID.wireRecordID), error: Wire.OperationError(code: .unknownItem)),
                Wire.ItemError(
                    item: .recordID(Wire.RecordID(recordName: "b")),
                    error: Wire.OperationError(code: .batchRequestFailed)),
                Wire.ItemError(item: .zoneID(zoneID.wireZoneID), error: Wire.OperationError(code: .zoneNotFound)),
                Wire.ItemError(item: .subscriptionID("sub-1"), error: Wire.OperationError(code: .permissionFailure)),
                Wire.ItemError(item: .shareURL("https://example.com/share/1"), error: nil),
                Wire.ItemError(item: nil, error: Wire.OperationError(code: .internalError)),
                Wire.ItemError(item: .recordID(Wire.RecordID(recordName: "")), error: Wire.OperationError(code: .invalidArguments)),
            ])
        let error = CKError(wire: try Wire.OperationError(serializedBytes: wire.serializedBytes()))
        #expect(error.code == .partialFailure)
        let partial = try #require(error.partialErrorsByItemID)
        #expect(partial.count == 6, "the entry naming no item is left out")
        #expect((partial[recordID] as? CKError)?.code == .unknownItem)
        #expect((partial[CKRecord.ID(recordName: "b")] as? CKError)?.code == .batchRequestFailed)
        #expect((partial[zoneID] as? CKError)?.code == .zoneNotFound)
        #expect((partial["sub-1"] as? CKError)?.code == .permissionFailure)
        let shareURL = try #require(URL(string: "https://example.com/share/1"))
        #expect((partial[shareURL] as? CKError)?.code == .internalError)
        #expect((partial[Wire.RecordID(recordName: "")] as? CKError)?.code == .invalidArguments)
        #expect(error.userInfo[CKPartialErrorsByItemIDKey] is [AnyHashable: any Error])

        let back = error.wireError
        #expect(back.code == .partialFailure)
        #expect(back.partialErrors.count == 6)
        #expect(back.partialErrors.first?.item == .recordID(recordID.wireRecordID))
    }

    @Test func catchByCodeWorksAsInCloudKit() {
        func fail() throws { throw CKError(.zoneBusy, userInfo: [CKErrorRetryAfterKey: 3.0]) }
        do {
            try fail()
            Issue.record("no error")
        } catch CKError.zoneBusy {
            // matched
        } catch {
            Issue.record("wrong error \(error)")
        }
        let error = CKError(.zoneBusy, userInfo: [CKErrorRetryAfterKey: 3.0, NSLocalizedDescriptionKey: "busy", "extra": 1])
        #expect(error.retryAfterSeconds == 3)
        #expect(error.localizedDescription == "busy")
        #expect(error.userInfo["extra"] as? Int == 1)
        #expect(CKError(.unknownItem).localizedDescription.contains("unknown item"))
        #expect(CKError.Code.unknownItem ~= CKError(.unknownItem))
        #expect(!(CKError.Code.unknownItem ~= CocoaError(.fileNoSuchFile)))
    }

    @Test func recordsThatDoNotConvertAreLeftOutAndSaidSo() {
        let wire = Wire.OperationError(code: .serverRecordChanged, serverRecord: Wire.Record(recordType: "T"))
        let error = CKError(wire: wire)
        #expect(error.code == .serverRecordChanged)
        #expect(error.serverRecord == nil)
        #expect(error.userInfo["CirrusRecordConversionError"] as? String != nil)
    }
}
