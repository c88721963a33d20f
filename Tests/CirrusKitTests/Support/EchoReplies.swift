import CirrusWire

/// A fake server that succeeds at everything: saves echo the record with a change tag, fetches
/// return a bare record (or `unknownItem` for names starting with "missing"), zones echo.
enum EchoReplies {
    static func reply(_ open: Wire.Open) -> FakeReply {
        switch open.request {
        case .modifyRecords(let request):
            let saves: [Wire.Event.Payload] = request.recordsToSave.compactMap { record in
                guard let id = record.recordID else { return nil }
                var saved = record
                saved.recordChangeTag = "t1"
                saved.changedKeys = []
                return .modifyRecords(.init(callback: .perRecordSave(.init(recordID: id, outcome: .record(saved)))))
            }
            let deletes: [Wire.Event.Payload] = request.recordIDsToDelete.map {
                .modifyRecords(.init(callback: .perRecordDelete(.init(recordID: $0))))
            }
            return FakeReply(payloads: saves + deletes)
        case .fetchRecords(let request):
            return FakeReply(
                payloads: request.recordIDs.map { id in
                    let outcome: Wire.RecordOutcome =
                        id.recordName.hasPrefix("missing")
                        ? .init(recordID: id, outcome: .error(Wire.OperationError(code: .unknownItem, message: "no such record")))
                        : .init(recordID: id, outcome: .record(Wire.Record(recordID: id, recordType: "Note", recordChangeTag: "t1")))
                    return .fetchRecords(.init(callback: .perRecordResult(outcome)))
                }
            )
        case .modifyRecordZones(let request):
            return FakeReply(
                payloads: request.recordZonesToSave.map { zone in
                    .modifyRecordZones(.init(callback: .perRecordZoneSave(.init(zoneID: zone.zoneID, outcome: .zone(zone)))))
                } + request.recordZoneIDsToDelete.map { .modifyRecordZones(.init(callback: .perRecordZoneDelete(.init(zoneID: $0)))) }
            )
        case .fetchRecordZones(let request):
            let ids =
                request.fetchAllRecordZones
                ? [Wire.RecordZoneID(zoneName: "_defaultZone", ownerName: "_fake"), Wire.RecordZoneID(zoneName: "MyZone", ownerName: "_fake")]
                : request.recordZoneIDs
            return FakeReply(
                payloads: ids.map { id in
                    .fetchRecordZones(.init(callback: .perRecordZoneResult(.init(zoneID: id, outcome: .zone(Wire.RecordZone(zoneID: id))))))
                }
            )
        default:
            return FakeReply(error: Wire.OperationError(code: .serverRejectedRequest, message: "not scripted"))
        }
    }
}
