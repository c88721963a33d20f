import CirrusWire
import Foundation

/// Where a long-lived operation's executor stands after its last journal append: stored with
/// each append, in the same transaction, so after a server restart the operation continues
/// exactly after its last journaled event. JSON, with only the fields the kind needs:
///
/// - modify and fetch records: `items`, how many request items (saves, then deletes) are
///   reported in the journal;
/// - record zone changes: `zone`, the index of the zone configuration being fetched, and its
///   feed position `since`, `floor`, `through`, `incarnation` (absent: from the zone's token);
/// - database changes: `since`, `floor`, `through`;
/// - `finished`: every event is journaled, only the `Complete` is missing; `cursor` (query),
///   `since`/`floor`/`moreComing` (database changes) and `since`/`moreComing` (notification
///   changes: the position after the batch) rebuild its result.
struct LongLivedCheckpoint: Codable, Sendable, Hashable {
    var items: Int?
    var zone: Int?
    var since: Int64?
    var floor: Int64?
    var through: Int64?
    var incarnation: Int64?
    var cursor: [UInt8]?
    var moreComing: Bool?
    var finished: Bool?

    var isFinished: Bool { finished ?? false }

    func encoded() -> [UInt8] {
        // Encoding a struct of optionals and arrays into JSON cannot fail.
        (try? JSONEncoder().encode(self)).map { [UInt8]($0) } ?? []
    }

    /// The checkpoint in `bytes`; nil when there is none or it does not decode (the operation
    /// then starts from its journal's item count where it can).
    static func decode(_ bytes: [UInt8]?) -> LongLivedCheckpoint? {
        guard let bytes, !bytes.isEmpty else { return nil }
        return try? JSONDecoder().decode(LongLivedCheckpoint.self, from: Data(bytes))
    }

    /// The item error an event reports, as the operation's `partialFailure` lists it.
    static func itemError(of payload: Wire.Event.Payload) -> Wire.ItemError? {
        switch payload {
        case .modifyRecords(let event):
            switch event.callback {
            case .perRecordSave(let save):
                if case .error(let error) = save.outcome {
                    return Wire.ItemError(item: save.recordID.map { .recordID($0) }, error: error)
                }
            case .perRecordDelete(let delete):
                if let error = delete.error {
                    return Wire.ItemError(item: delete.recordID.map { .recordID($0) }, error: error)
                }
            default:
                break
            }
        case .fetchRecords(let event):
            if case .perRecordResult(let outcome) = event.callback, case .error(let error) = outcome.outcome {
                return Wire.ItemError(item: outcome.recordID.map { .recordID($0) }, error: error)
            }
        case .modifyRecordZones(let event):
            switch event.callback {
            case .perRecordZoneSave(let save):
                if case .error(let error) = save.outcome {
                    return Wire.ItemError(item: save.zoneID.map { .zoneID($0) }, error: error)
                }
            case .perRecordZoneDelete(let delete):
                if let error = delete.error {
                    return Wire.ItemError(item: delete.zoneID.map { .zoneID($0) }, error: error)
                }
            default:
                break
            }
        case .fetchRecordZones(let event):
            if case .perRecordZoneResult(let outcome) = event.callback, case .error(let error) = outcome.outcome {
                return Wire.ItemError(item: outcome.zoneID.map { .zoneID($0) }, error: error)
            }
        case .modifySubscriptions(let event):
            switch event.callback {
            case .perSubscriptionSave(let save):
                if case .error(let error) = save.outcome {
                    return Wire.ItemError(item: .subscriptionID(save.subscriptionID), error: error)
                }
            case .perSubscriptionDelete(let delete):
                if let error = delete.error {
                    return Wire.ItemError(item: .subscriptionID(delete.subscriptionID), error: error)
                }
            default:
                break
            }
        case .fetchSubscriptions(let event):
            if case .perSubscriptionResult(let outcome) = event.callback, case .error(let error) = outcome.outcome {
                return Wire.ItemError(item: .subscriptionID(outcome.subscriptionID), error: error)
            }
        case .fetchRecordZoneChanges(let event):
            if case .recordZoneFetchResult(let result) = event.callback, case .error(let error) = result.outcome,
                let zoneID = result.zoneID
            {
                return Wire.ItemError(item: .zoneID(zoneID), error: error)
            }
        default:
            break
        }
        return nil
    }
}
