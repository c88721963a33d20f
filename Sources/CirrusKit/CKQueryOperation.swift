import CirrusModel
import CirrusWire
import Foundation

/// Finds the records that match a query, or continues an earlier query from its cursor
/// (CloudKit's `CKQueryOperation`).
///
/// For example:
/// ```swift
/// let query = CKQuery(recordType: "Note", predicate: CKPredicate(format: "category == %@", "work"))
/// let operation = CKQueryOperation(query: query)
/// operation.resultsLimit = 50
/// operation.recordMatchedBlock = { id, result in print(id, result) }
/// operation.queryResultBlock = { result in
///     if case .success(let cursor?) = result { database.add(CKQueryOperation(cursor: cursor)) }
/// }
/// database.add(operation)
/// ```
open class CKQueryOperation: CKDatabaseOperation, @unchecked Sendable {
    // @unchecked Sendable: as CKOperation — properties are set before start, blocks run on the
    // serial callback queue.

    /// `resultsLimit` value that lets the server choose how many records to return.
    public static let maximumResults = 0

    /// The query to run; ignored when `cursor` is set.
    open var query: CKQuery?
    /// Where an earlier query stopped; when set, the operation continues that query (its
    /// query, zone and desired keys are pinned by the cursor).
    open var cursor: Cursor?
    /// The zone to search; nil = the default zone.
    open var zoneID: CKRecordZone.ID?
    /// The keys to fetch; nil = all keys, empty = system fields only.
    open var desiredKeys: [CKRecord.FieldKey]?
    /// The most records to return before the server stops and hands back a cursor;
    /// `maximumResults` (0) = the server's choice.
    open var resultsLimit: Int = CKQueryOperation.maximumResults

    /// One matching record, in sort order, or why it could not be returned.
    open var recordMatchedBlock: ((CKRecord.ID, Result<CKRecord, any Error>) -> Void)?
    /// The whole operation's outcome: a cursor when more records match, nil when all were sent.
    open var queryResultBlock: ((Result<Cursor?, any Error>) -> Void)?

    /// Deprecated in CloudKit (use `recordMatchedBlock`): each matching record.
    open var recordFetchedBlock: ((CKRecord) -> Void)?
    /// Deprecated in CloudKit (use `queryResultBlock`): the cursor and the operation's error.
    open var queryCompletionBlock: ((Cursor?, (any Error)?) -> Void)?

    public override init() {
        super.init()
    }

    /// An operation that runs `query`.
    public convenience init(query: CKQuery) {
        self.init()
        self.query = query
    }

    /// An operation that continues a query from where `cursor` says it stopped.
    public convenience init(cursor: Cursor) {
        self.init()
        self.cursor = cursor
    }

    override func makeRequest(maximumItems: Int) throws -> Wire.Open.Request {
        let start: Wire.QueryRequest.Start
        if let cursor = self.cursor {
            start = .cursor(cursor.wireCursor)
        } else if let query = self.query {
            start = .query(try query.wireQuery)
        } else {
            throw CKError(.invalidArguments, message: "CKQueryOperation needs a query or a cursor")
        }
        guard self.resultsLimit >= 0 else {
            throw CKError(.invalidArguments, message: "resultsLimit \(self.resultsLimit) is negative")
        }
        return .query(
            Wire.QueryRequest(
                start: start,
                zoneID: self.zoneID?.wireZoneID,
                desiredKeys: self.desiredKeys ?? [],
                desiredKeysSpecified: self.desiredKeys != nil,
                resultsLimit: UInt32(clamping: self.resultsLimit)
            )
        )
    }

    override func handle(event: Wire.Event) {
        guard case .query(let payload) = event.payload, case .recordMatched(let outcome)? = payload.callback else { return }
        guard let (id, result) = RecordOutcomeDecoder.decode(outcome, downloading: self.assetDownloader) else { return }
        self.recordMatchedBlock?(id, result)
        if case .success(let record) = result {
            self.recordFetchedBlock?(record)
        }
    }

    /// Matches whose assets come by download are not: the download waits for the connection.
    override func canDeliverInPlace(_ deliveries: [StreamDelivery]) -> Bool {
        Self.onlyEvents(deliveries) { event in
            guard case .query(let payload) = event.payload, case .recordMatched(let outcome)? = payload.callback else {
                return true
            }
            return RecordOutcomeDecoder.needsNoDownload(outcome)
        }
    }

    override func deliverResult(_ error: (any Error)?, complete: Wire.Complete?) {
        var cursor: Cursor?
        if error == nil, case .query(let result)? = complete?.result, let wire = result.cursor, !wire.opaque.isEmpty {
            cursor = Cursor(wire: wire)
        }
        self.queryResultBlock?(error.map { .failure($0) } ?? .success(cursor))
        self.queryCompletionBlock?(cursor, error)
    }
}

extension CKQueryOperation {
    /// Where a query stopped, to continue it with `CKQueryOperation(cursor:)`
    /// (``CKQueryCursor``).
    public typealias Cursor = CKQueryCursor
}
