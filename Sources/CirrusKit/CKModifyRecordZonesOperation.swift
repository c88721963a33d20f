import CirrusModel
import CirrusWire
import Foundation

/// Saves and deletes record zones (CloudKit's `CKModifyRecordZonesOperation`). Deleting a zone
/// deletes its records.
///
/// For example:
/// ```swift
/// let zone = CKRecordZone(zoneName: "Notes")
/// let operation = CKModifyRecordZonesOperation(recordZonesToSave: [zone], recordZoneIDsToDelete: nil)
/// operation.modifyRecordZonesResultBlock = { result in print(result) }
/// database.add(operation)
/// ```
open class CKModifyRecordZonesOperation: CKDatabaseOperation, @unchecked Sendable {
    // @unchecked Sendable: as CKOperation — properties are set before start, blocks run on the
    // serial callback queue.

    /// The zones to create or update.
    open var recordZonesToSave: [CKRecordZone]?
    /// The IDs of the zones to delete.
    open var recordZoneIDsToDelete: [CKRecordZone.ID]?

    /// One zone saved (as the server has it) or not.
    open var perRecordZoneSaveBlock: ((CKRecordZone.ID, Result<CKRecordZone, any Error>) -> Void)?
    /// One zone deleted or not.
    open var perRecordZoneDeleteBlock: ((CKRecordZone.ID, Result<Void, any Error>) -> Void)?
    /// The whole operation's outcome.
    open var modifyRecordZonesResultBlock: ((Result<Void, any Error>) -> Void)?

    /// Deprecated in CloudKit (use `modifyRecordZonesResultBlock`): the saved zones, the
    /// deleted IDs and the operation's error.
    open var modifyRecordZonesCompletionBlock: (([CKRecordZone]?, [CKRecordZone.ID]?, (any Error)?) -> Void)?
    private var savedZones: [CKRecordZone] = []
    private var deletedZoneIDs: [CKRecordZone.ID] = []

    public override init() {
        super.init()
    }

    public convenience init(recordZonesToSave: [CKRecordZone]? = nil, recordZoneIDsToDelete: [CKRecordZone.ID]? = nil) {
        self.init()
        self.recordZonesToSave = recordZonesToSave
        self.recordZoneIDsToDelete = recordZoneIDsToDelete
    }

    override func makeRequest(maximumItems: Int) throws -> Wire.Open.Request {
        let zones = self.recordZonesToSave ?? []
        let deletions = self.recordZoneIDsToDelete ?? []
        guard zones.count + deletions.count <= maximumItems else {
            throw CKError(
                .limitExceeded,
                message: "\(zones.count + deletions.count) zones in one operation; at most \(maximumItems) are allowed"
            )
        }
        return .modifyRecordZones(
            Wire.ModifyRecordZonesRequest(
                recordZonesToSave: zones.map(\.wireZone),
                recordZoneIDsToDelete: deletions.map(\.wireZoneID)
            )
        )
    }

    override func handle(event: Wire.Event) {
        guard case .modifyRecordZones(let payload) = event.payload else { return }
        switch payload.callback {
        case .perRecordZoneSave(let outcome):
            guard let (id, result) = RecordOutcomeDecoder.decode(outcome) else { return }
            self.perRecordZoneSaveBlock?(id, result)
            if case .success(let zone) = result {
                self.savedZones.append(zone)
            }
        case .perRecordZoneDelete(let deleted):
            guard let wireID = deleted.zoneID, let id = try? CKRecordZone.ID(wire: wireID) else { return }
            self.perRecordZoneDeleteBlock?(id, deleted.error.map { .failure(CKError(wire: $0)) } ?? .success(()))
            if deleted.error == nil {
                self.deletedZoneIDs.append(id)
            }
        case nil:
            break
        }
    }

    /// Zones carry no assets: handling them never waits for the connection.
    override func canDeliverInPlace(_ deliveries: [StreamDelivery]) -> Bool {
        Self.onlyEvents(deliveries) { _ in true }
    }

    override func deliverResult(_ error: (any Error)?, complete: Wire.Complete?) {
        self.modifyRecordZonesResultBlock?(error.map { .failure($0) } ?? .success(()))
        self.modifyRecordZonesCompletionBlock?(self.savedZones, self.deletedZoneIDs, error)
    }
}
