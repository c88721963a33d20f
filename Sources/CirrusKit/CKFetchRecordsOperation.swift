import CirrusModel
import CirrusWire
import Foundation

/// Fetches records by ID (CloudKit's `CKFetchRecordsOperation`).
///
/// For example:
/// ```swift
/// let operation = CKFetchRecordsOperation(recordIDs: [id1, id2])
/// operation.desiredKeys = ["title"]
/// operation.perRecordResultBlock = { id, result in print(id, result) }
/// database.add(operation)
/// ```
open class CKFetchRecordsOperation: CKDatabaseOperation, @unchecked Sendable {
    // @unchecked Sendable: as CKOperation — properties are set before start, blocks run on the
    // serial callback queue.

    /// The IDs of the records to fetch.
    open var recordIDs: [CKRecord.ID]?
    /// The keys to fetch; nil = all keys, empty = system fields only.
    open var desiredKeys: [CKRecord.FieldKey]?

    /// Download progress of one record (0.0 … 1.0).
    open var perRecordProgressBlock: ((CKRecord.ID, Double) -> Void)?
    /// One record fetched, or why not (`unknownItem` when it does not exist).
    open var perRecordResultBlock: ((CKRecord.ID, Result<CKRecord, any Error>) -> Void)?
    /// The whole operation's outcome.
    open var fetchRecordsResultBlock: ((Result<Void, any Error>) -> Void)?

    /// Deprecated in CloudKit (use `perRecordResultBlock`): one record, or its error.
    open var perRecordCompletionBlock: ((CKRecord?, CKRecord.ID?, (any Error)?) -> Void)?
    /// Deprecated in CloudKit (use `fetchRecordsResultBlock`): the records fetched by ID and the
    /// operation's error.
    open var fetchRecordsCompletionBlock: (([CKRecord.ID: CKRecord]?, (any Error)?) -> Void)?
    private var fetchedRecords: [CKRecord.ID: CKRecord] = [:]

    public override init() {
        super.init()
    }

    public convenience init(recordIDs: [CKRecord.ID]) {
        self.init()
        self.recordIDs = recordIDs
    }

    override func makeRequest(maximumItems: Int) throws -> Wire.Open.Request {
        let ids = self.recordIDs ?? []
        guard ids.count <= maximumItems else {
            throw CKError(.limitExceeded, message: "\(ids.count) records in one fetch; at most \(maximumItems) are allowed")
        }
        return .fetchRecords(
            Wire.FetchRecordsRequest(
                recordIDs: ids.map(\.wireRecordID),
                desiredKeys: self.desiredKeys ?? [],
                desiredKeysSpecified: self.desiredKeys != nil
            )
        )
    }

    override func handle(event: Wire.Event) {
        guard case .fetchRecords(let payload) = event.payload else { return }
        switch payload.callback {
        case .perRecordProgress(let progress):
            guard let wireID = progress.recordID, let id = try? CKRecord.ID(wire: wireID) else { return }
            self.perRecordProgressBlock?(id, progress.progress)
        case .perRecordResult(let outcome):
            guard let (id, result) = RecordOutcomeDecoder.decode(outcome, downloading: self.assetDownloader) else { return }
            self.perRecordResultBlock?(id, result)
            switch result {
            case .success(let record):
                self.fetchedRecords[id] = record
                self.perRecordCompletionBlock?(record, id, nil)
            case .failure(let error):
                self.perRecordCompletionBlock?(nil, id, error)
            }
        case nil:
            break
        }
    }

    /// Records whose assets come by download are not: the download waits for the connection.
    override func canDeliverInPlace(_ deliveries: [StreamDelivery]) -> Bool {
        Self.onlyEvents(deliveries) { event in
            guard case .fetchRecords(let payload) = event.payload else { return false }
            guard case .perRecordResult(let outcome) = payload.callback else { return true }
            return RecordOutcomeDecoder.needsNoDownload(outcome)
        }
    }

    override func deliverResult(_ error: (any Error)?, complete: Wire.Complete?) {
        self.fetchRecordsResultBlock?(error.map { .failure($0) } ?? .success(()))
        self.fetchRecordsCompletionBlock?(self.fetchedRecords, error)
    }
}

/// Turns the wire's per-item outcomes into CloudKit results.
enum RecordOutcomeDecoder {
    /// The record of `outcome`, its assets downloaded first by `downloader` (a record whose
    /// asset cannot be downloaded is that download's error). The downloader is made only for a
    /// record that has an asset to download (most have none; making one resolves the content
    /// directory's URL).
    static func decode(
        _ outcome: Wire.RecordOutcome, downloading downloader: @autoclosure () -> AssetDownloader? = nil
    ) -> (CKRecord.ID, Result<CKRecord, any Error>)? {
        guard let wireID = outcome.recordID, let id = try? CKRecord.ID(wire: wireID) else { return nil }
        switch outcome.outcome {
        case .record(let record):
            return (
                id,
                Result { () throws(CKError) in
                    if AssetDownloader.hasDownloads(record) {
                        try downloader()?.downloadAssets(of: record)
                    }
                    return try CKRecord.decoded(wire: record)
                }.mapError { $0 }
            )
        case .error(let error):
            return (id, .failure(CKError(wire: error)))
        case nil:
            return (id, .failure(CKError(.internalError, message: "the server sent no outcome for record \(id)")))
        }
    }

    /// Whether decoding `outcome` downloads nothing (it is no record with an asset to download).
    static func needsNoDownload(_ outcome: Wire.RecordOutcome) -> Bool {
        guard case .record(let record) = outcome.outcome else { return true }
        return !AssetDownloader.hasDownloads(record)
    }

    static func decode(_ outcome: Wire.RecordZoneOutcome) -> (CKRecordZone.ID, Result<CKRecordZone, any Error>)? {
        guard let wireID = outcome.zoneID, let id = try? CKRecordZone.ID(wire: wireID) else { return nil }
        switch outcome.outcome {
        case .zone(let zone):
            return (id, Result { () throws(CKError) in try CKRecordZone(wire: zone) }.mapError { $0 })
        case .error(let error):
            return (id, .failure(CKError(wire: error)))
        case nil:
            return (id, .failure(CKError(.internalError, message: "the server sent no outcome for zone \(id)")))
        }
    }
}
