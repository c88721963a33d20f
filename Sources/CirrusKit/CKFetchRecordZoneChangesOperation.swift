import CirrusModel
import CirrusWire
import Foundation

/// Fetches the records changed and deleted in zones since a change token (CloudKit's
/// `CKFetchRecordZoneChangesOperation`): the heart of incremental sync.
///
/// For each zone, in the order of `recordZoneIDs`, the blocks see every changed record once at
/// its latest state (`recordWasChangedBlock`) and every deletion (`recordWithIDWasDeletedBlock`),
/// a token after each intermediate batch (`recordZoneChangeTokensUpdatedBlock`), then the zone's
/// final token (`recordZoneFetchResultBlock`). Persist a token only after applying what came
/// before it.
///
/// For example:
/// ```swift
/// let configuration = CKFetchRecordZoneChangesOperation.ZoneConfiguration()
/// configuration.previousServerChangeToken = savedToken
/// let operation = CKFetchRecordZoneChangesOperation(
///     recordZoneIDs: [zoneID], configurationsByRecordZoneID: [zoneID: configuration])
/// operation.recordWasChangedBlock = { id, result in if case .success(let record) = result { store(record) } }
/// operation.recordWithIDWasDeletedBlock = { id, _ in remove(id) }
/// operation.recordZoneFetchResultBlock = { zoneID, result in
///     if case .success(let (token, _, _)) = result { savedToken = token }
/// }
/// database.add(operation)
/// ```
open class CKFetchRecordZoneChangesOperation: CKDatabaseOperation, @unchecked Sendable {
    // @unchecked Sendable: as CKOperation — properties are set before start, blocks run on the
    // serial callback queue.

    /// What to fetch from one zone.
    public final class ZoneConfiguration: @unchecked Sendable, CustomStringConvertible {
        // @unchecked Sendable: a plain settings object like CloudKit's; set before the
        // operation starts and only read after.

        /// Where the previous fetch ended; nil = every record from the beginning.
        public var previousServerChangeToken: CKServerChangeToken?
        /// The most changes per batch; 0 = the server's default (400, also the most it serves).
        public var resultsLimit: Int = 0
        /// The fields to fetch; nil = all, empty = system fields only.
        public var desiredKeys: [CKRecord.FieldKey]?

        public init() {}

        public convenience init(
            previousServerChangeToken: CKServerChangeToken?,
            resultsLimit: Int = 0,
            desiredKeys: [CKRecord.FieldKey]? = nil
        ) {
            self.init()
            self.previousServerChangeToken = previousServerChangeToken
            self.resultsLimit = resultsLimit
            self.desiredKeys = desiredKeys
        }

        public var description: String {
            "<ZoneConfiguration token=\(self.previousServerChangeToken.map { "\($0)" } ?? "nil") "
                + "resultsLimit=\(self.resultsLimit) desiredKeys=\(self.desiredKeys.map { "\($0)" } ?? "nil")>"
        }
    }

    /// The zones to fetch changes from, in order.
    open var recordZoneIDs: [CKRecordZone.ID]?
    /// Per-zone settings; a zone without one fetches everything from the beginning.
    open var configurationsByRecordZoneID: [CKRecordZone.ID: ZoneConfiguration]?
    /// Keep fetching until every zone is caught up (true, the default), or stop after one
    /// batch per zone and report `moreComing`.
    open var fetchAllChanges: Bool = true

    /// A record created or changed since the token (at its latest state), or why it could
    /// not be read.
    open var recordWasChangedBlock: ((CKRecord.ID, Result<CKRecord, any Error>) -> Void)?
    /// A record deleted since the token.
    open var recordWithIDWasDeletedBlock: ((CKRecord.ID, CKRecord.RecordType) -> Void)?
    /// Everything of the zone up to this token has been delivered (between batches); the
    /// data is the last client change token saved with the zone.
    open var recordZoneChangeTokensUpdatedBlock: ((CKRecordZone.ID, CKServerChangeToken?, Data?) -> Void)?
    /// One zone is done: its final token, the client change token saved with the zone, and
    /// whether more changes remain; or why the zone failed (`changeTokenExpired`,
    /// `zoneNotFound`, …).
    open var recordZoneFetchResultBlock:
        (
            (
                CKRecordZone.ID,
                Result<(serverChangeToken: CKServerChangeToken, clientChangeTokenData: Data?, moreComing: Bool), any Error>
            ) -> Void
        )?
    /// The whole operation's outcome; `partialFailure` when some zone failed.
    open var fetchRecordZoneChangesResultBlock: ((Result<Void, any Error>) -> Void)?

    /// Deprecated in CloudKit (use `recordWasChangedBlock`).
    open var recordChangedBlock: ((CKRecord) -> Void)?
    /// Deprecated in CloudKit (use `recordZoneFetchResultBlock`).
    open var recordZoneFetchCompletionBlock: ((CKRecordZone.ID, CKServerChangeToken?, Data?, Bool, (any Error)?) -> Void)?
    /// Deprecated in CloudKit (use `fetchRecordZoneChangesResultBlock`).
    open var fetchRecordZoneChangesCompletionBlock: (((any Error)?) -> Void)?

    public override init() {
        super.init()
    }

    public convenience init(
        recordZoneIDs: [CKRecordZone.ID],
        configurationsByRecordZoneID: [CKRecordZone.ID: ZoneConfiguration]? = nil
    ) {
        self.init()
        self.recordZoneIDs = recordZoneIDs
        self.configurationsByRecordZoneID = configurationsByRecordZoneID
    }

    override func makeRequest(maximumItems: Int) throws -> Wire.Open.Request {
        let zoneIDs = self.recordZoneIDs ?? []
        guard zoneIDs.count <= maximumItems else {
            throw CKError(.limitExceeded, message: "\(zoneIDs.count) zones in one fetch; at most \(maximumItems) are allowed")
        }
        guard Set(zoneIDs).count == zoneIDs.count else {
            throw CKError(.invalidArguments, message: "a zone appears more than once in recordZoneIDs")
        }
        let configurations = try zoneIDs.map { zoneID in
            let configuration = self.configurationsByRecordZoneID?[zoneID]
            let limit = configuration?.resultsLimit ?? 0
            guard limit >= 0, limit <= Int(UInt32.max) else {
                throw CKError(.invalidArguments, message: "resultsLimit \(limit) of zone \(zoneID.zoneName) is out of range")
            }
            return Wire.ZoneChangesConfiguration(
                zoneID: zoneID.wireZoneID,
                previousServerChangeToken: configuration?.previousServerChangeToken?.wireToken,
                resultsLimit: UInt32(limit),
                desiredKeys: configuration?.desiredKeys ?? [],
                desiredKeysSpecified: configuration?.desiredKeys != nil
            )
        }
        return .fetchRecordZoneChanges(
            Wire.FetchRecordZoneChangesRequest(zoneConfigurations: configurations, fetchAllChanges: self.fetchAllChanges))
    }

    override func handle(event: Wire.Event) {
        guard case .fetchRecordZoneChanges(let payload) = event.payload else { return }
        switch payload.callback {
        case .recordWasChanged(let outcome):
            guard let (id, result) = RecordOutcomeDecoder.decode(outcome, downloading: self.assetDownloader) else { return }
            self.recordWasChangedBlock?(id, result)
            if case .success(let record) = result { self.recordChangedBlock?(record) }
        case .recordWithIDWasDeleted(let deleted):
            guard let wireID = deleted.recordID, let id = try? CKRecord.ID(wire: wireID) else { return }
            self.recordWithIDWasDeletedBlock?(id, deleted.recordType)
        case .recordZoneChangeTokensUpdated(let update):
            guard let wireID = update.zoneID, let zoneID = try? CKRecordZone.ID(wire: wireID) else { return }
            self.recordZoneChangeTokensUpdatedBlock?(
                zoneID, update.serverChangeToken.map(CKServerChangeToken.init(wire:)), Self.data(update.clientChangeToken))
        case .recordZoneFetchResult(let result):
            guard let wireID = result.zoneID, let zoneID = try? CKRecordZone.ID(wire: wireID) else { return }
            switch result.outcome {
            case .success(let success):
                let token = CKServerChangeToken(wire: success.serverChangeToken ?? Wire.ServerChangeToken())
                let clientToken = Self.data(success.clientChangeToken)
                self.recordZoneFetchResultBlock?(zoneID, .success((token, clientToken, success.moreComing)))
                self.recordZoneFetchCompletionBlock?(zoneID, token, clientToken, success.moreComing, nil)
            case .error(let error):
                let error = CKError(wire: error)
                self.recordZoneFetchResultBlock?(zoneID, .failure(error))
                self.recordZoneFetchCompletionBlock?(zoneID, nil, nil, false, error)
            case nil:
                let error = CKError(.internalError, message: "the server sent no outcome for zone \(zoneID.zoneName)")
                self.recordZoneFetchResultBlock?(zoneID, .failure(error))
                self.recordZoneFetchCompletionBlock?(zoneID, nil, nil, false, error)
            }
        case nil:
            break
        }
    }

    override func deliverResult(_ error: (any Error)?, complete: Wire.Complete?) {
        self.fetchRecordZoneChangesResultBlock?(error.map { .failure($0) } ?? .success(()))
        self.fetchRecordZoneChangesCompletionBlock?(error)
    }

    static func data(_ bytes: [UInt8]) -> Data? {
        bytes.isEmpty ? nil : Data(bytes)
    }
}
