import CirrusModel
import CirrusWire
import Foundation

/// Fetches which zones of a database were created, changed or deleted since a change token
/// (CloudKit's `CKFetchDatabaseChangesOperation`). Follow it with a
/// `CKFetchRecordZoneChangesOperation` for the changed zones. Not available in the public
/// database.
///
/// For example:
/// ```swift
/// let operation = CKFetchDatabaseChangesOperation(previousServerChangeToken: databaseToken)
/// operation.recordZoneWithIDChangedBlock = { zonesToFetch.append($0) }
/// operation.recordZoneWithIDWasDeletedBlock = { deleteLocalData(of: $0) }
/// operation.fetchDatabaseChangesResultBlock = { result in
///     if case .success(let (token, _)) = result { databaseToken = token }
/// }
/// database.add(operation)
/// ```
open class CKFetchDatabaseChangesOperation: CKDatabaseOperation, @unchecked Sendable {
    // @unchecked Sendable: as CKOperation — properties are set before start, blocks run on the
    // serial callback queue.

    /// Where the previous fetch ended; nil = every zone from the beginning.
    open var previousServerChangeToken: CKServerChangeToken?
    /// The most zone changes per batch; 0 = the server's default (400, also the most it serves).
    open var resultsLimit: Int = 0
    /// Keep fetching until caught up (true, the default), or stop after one batch and report
    /// `moreComing`.
    open var fetchAllChanges: Bool = true

    /// A zone created or changed (its records or itself) since the token.
    open var recordZoneWithIDChangedBlock: ((CKRecordZone.ID) -> Void)?
    /// A zone deleted since the token.
    open var recordZoneWithIDWasDeletedBlock: ((CKRecordZone.ID) -> Void)?
    /// A zone the user purged. Cirrus has no purge (it is an iCloud settings action), so a
    /// Cirrus server reports every removed zone as deleted; the block is here for code written
    /// against CloudKit.
    open var recordZoneWithIDWasPurgedBlock: ((CKRecordZone.ID) -> Void)?
    /// A zone deleted because the user reset their encrypted data (never sent by Cirrus, which
    /// has no such reset; kept for source compatibility).
    open var recordZoneWithIDWasDeletedDueToUserEncryptedDataResetBlock: ((CKRecordZone.ID) -> Void)?
    /// Everything up to this token has been delivered (between batches).
    open var changeTokenUpdatedBlock: ((CKServerChangeToken) -> Void)?
    /// The final token and whether more changes remain, or the error (`changeTokenExpired`
    /// means: fetch again without a token).
    open var fetchDatabaseChangesResultBlock: ((Result<(serverChangeToken: CKServerChangeToken, moreComing: Bool), any Error>) -> Void)?
    /// Deprecated in CloudKit (use `fetchDatabaseChangesResultBlock`).
    open var fetchDatabaseChangesCompletionBlock: ((CKServerChangeToken?, Bool, (any Error)?) -> Void)?

    public override init() {
        super.init()
    }

    public convenience init(previousServerChangeToken: CKServerChangeToken?) {
        self.init()
        self.previousServerChangeToken = previousServerChangeToken
    }

    override func makeRequest(maximumItems: Int) throws -> Wire.Open.Request {
        guard self.resultsLimit >= 0, self.resultsLimit <= Int(UInt32.max) else {
            throw CKError(.invalidArguments, message: "resultsLimit \(self.resultsLimit) is out of range")
        }
        return .fetchDatabaseChanges(
            Wire.FetchDatabaseChangesRequest(
                previousServerChangeToken: self.previousServerChangeToken?.wireToken,
                resultsLimit: UInt32(self.resultsLimit),
                fetchAllChanges: self.fetchAllChanges
            )
        )
    }

    override func handle(event: Wire.Event) {
        guard case .fetchDatabaseChanges(let payload) = event.payload else { return }
        func zone(_ wire: Wire.RecordZoneID) -> CKRecordZone.ID? { try? CKRecordZone.ID(wire: wire) }
        switch payload.callback {
        case .recordZoneWithIDChanged(let wire):
            if let id = zone(wire) { self.recordZoneWithIDChangedBlock?(id) }
        case .recordZoneWithIDWasDeleted(let wire):
            if let id = zone(wire) { self.recordZoneWithIDWasDeletedBlock?(id) }
        case .recordZoneWithIDWasPurged(let wire):
            if let id = zone(wire) { self.recordZoneWithIDWasPurgedBlock?(id) }
        case .recordZoneWithIDWasDeletedDueToUserEncryptedDataReset(let wire):
            if let id = zone(wire) { self.recordZoneWithIDWasDeletedDueToUserEncryptedDataResetBlock?(id) }
        case .changeTokenUpdated(let token):
            self.changeTokenUpdatedBlock?(CKServerChangeToken(wire: token))
        case nil:
            break
        }
    }

    override func deliverResult(_ error: (any Error)?, complete: Wire.Complete?) {
        if let error {
            self.fetchDatabaseChangesResultBlock?(.failure(error))
            self.fetchDatabaseChangesCompletionBlock?(nil, false, error)
            return
        }
        guard case .fetchDatabaseChanges(let result) = complete?.result, let token = result.serverChangeToken else {
            let error = CKError(.internalError, message: "the server completed without a change token")
            self.fetchDatabaseChangesResultBlock?(.failure(error))
            self.fetchDatabaseChangesCompletionBlock?(nil, false, error)
            return
        }
        let serverToken = CKServerChangeToken(wire: token)
        self.fetchDatabaseChangesResultBlock?(.success((serverToken, result.moreComing)))
        self.fetchDatabaseChangesCompletionBlock?(serverToken, result.moreComing, nil)
    }
}
