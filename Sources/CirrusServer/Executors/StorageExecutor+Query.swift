import CirrusStore
import CirrusWire

extension StorageExecutor {
    /// Records a query page holds when the request sets no `resultsLimit`
    /// (CloudKit's `maximumResults`); a larger limit is capped at
    /// ``maximumItems``.
    static let defaultQueryResults = 100

    /// `CKQueryOperation`: one `recordMatched` event per record of the page,
    /// then `queryResult` with the cursor of the next page, if any.
    ///
    /// A query without `zone_id` searches the default zone. A cursor pins its
    /// query, zone and desired keys (the continuation's own desired keys
    /// replace them when it specifies some). It is a keyset position the
    /// store sealed for the database (like a change token): one altered in
    /// any bit, expired or from another user or database is refused with
    /// `invalidArguments` ("the query cursor is unknown or expired").
    func query(_ request: Wire.QueryRequest, _ context: Context) async throws -> OperationCompletion {
        if let checkpoint = context.checkpoint, checkpoint.isFinished {
            return .success(.query(Wire.QueryResult(cursor: checkpoint.cursor.map { Wire.QueryCursor(opaque: $0) })))
        }
        let limit = request.resultsLimit == 0 ? Self.defaultQueryResults : min(Int(request.resultsLimit), Self.maximumItems)
        let page: QueryPage
        switch request.start {
        case .query(let query):
            let zoneID = request.zoneID ?? Wire.RecordZoneID(zoneName: "_defaultZone", ownerName: ZoneOwnerMapping.currentUser)
            page = try await self.storage.queryRecords(
                context.owners.inbound(query),
                in: context.owners.inbound(zoneID),
                of: context.database,
                desiredKeys: request.desiredKeysSpecified ? request.desiredKeys : nil,
                limit: limit
            )
        case .cursor(let cursor):
            page = try await self.storage.continueQuery(
                cursor.opaque,
                in: context.database,
                desiredKeys: request.desiredKeysSpecified ? .replaced(request.desiredKeys) : .sameAsQuery,
                limit: limit
            )
        case .none:
            return .failure(.invalidArguments, "a query request needs a query or a cursor")
        }
        let events = page.records.map { record -> Wire.Event.Payload in
            let record = context.owners.outbound(record)
            let outcome = Wire.RecordOutcome(recordID: record.recordID, outcome: .record(record))
            return .query(Wire.QueryEvent(callback: .recordMatched(outcome)))
        }
        try await context.emit(events, checkpoint: LongLivedCheckpoint(cursor: page.cursor, finished: true))
        return .success(.query(Wire.QueryResult(cursor: page.cursor.map { Wire.QueryCursor(opaque: $0) })))
    }
}
