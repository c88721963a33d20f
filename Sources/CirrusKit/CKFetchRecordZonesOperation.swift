import CirrusModel
import CirrusWire
import Foundation

/// Fetches record zones by ID, or all of them (CloudKit's `CKFetchRecordZonesOperation`).
///
/// For example:
/// ```swift
/// let operation = CKFetchRecordZonesOperation.fetchAllRecordZonesOperation()
/// operation.perRecordZoneResultBlock = { id, result in print(id, result) }
/// database.add(operation)
/// ```
open class CKFetchRecordZonesOperation: CKDatabaseOperation, @unchecked Sendable {
    // @unchecked Sendable: as CKOperation — properties are set before start, blocks run on the
    // serial callback queue.

    /// The zones to fetch; nil = every zone of the database.
    open var recordZoneIDs: [CKRecordZone.ID]?
    /// One zone fetched, or why not (`zoneNotFound`).
    open var perRecordZoneResultBlock: ((CKRecordZone.ID, Result<CKRecordZone, any Error>) -> Void)?
    /// The whole operation's outcome.
    open var fetchRecordZonesResultBlock: ((Result<Void, any Error>) -> Void)?

    /// Deprecated in CloudKit (use `fetchRecordZonesResultBlock`): the zones by ID and the
    /// operation's error.
    open var fetchRecordZonesCompletionBlock: (([CKRecordZone.ID: CKRecordZone]?, (any Error)?) -> Void)?
    private var fetchedZones: [CKRecordZone.ID: CKRecordZone] = [:]

    public required override init() {
        super.init()
    }

    public convenience init(recordZoneIDs: [CKRecordZone.ID]) {
        self.init()
        self.recordZoneIDs = recordZoneIDs
    }

    /// An operation that fetches every zone of the database.
    open class func fetchAllRecordZonesOperation() -> Self {
        let operation = Self()
        operation.recordZoneIDs = nil
        return operation
    }

    override func makeRequest(maximumItems: Int) throws -> Wire.Open.Request {
        guard let ids = self.recordZoneIDs else {
            return .fetchRecordZones(Wire.FetchRecordZonesRequest(fetchAllRecordZones: true))
        }
        guard ids.count <= maximumItems else {
            throw CKError(.limitExceeded, message: "\(ids.count) zones in one fetch; at most \(maximumItems) are allowed")
        }
        return .fetchRecordZones(Wire.FetchRecordZonesRequest(recordZoneIDs: ids.map(\.wireZoneID)))
    }

    override func handle(event: Wire.Event) {
        guard case .fetchRecordZones(let payload) = event.payload else { return }
        switch payload.callback {
        case .perRecordZoneResult(let outcome):
            guard let (id, result) = RecordOutcomeDecoder.decode(outcome) else { return }
            self.perRecordZoneResultBlock?(id, result)
            if case .success(let zone) = result {
                self.fetchedZones[id] = zone
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
        self.fetchRecordZonesResultBlock?(error.map { .failure($0) } ?? .success(()))
        self.fetchRecordZonesCompletionBlock?(self.fetchedZones, error)
    }
}
