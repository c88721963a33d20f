public import CirrusWire
import Foundation
import GRDB

/// Queries (CKQueryOperation).
///
/// A query lists its candidates through the indexes (``QueryPlanner``) in
/// the query's order, then loads them one by one and keeps those the
/// predicate matches (``QueryEvaluator``) until the page is full.
///
/// Cursors continue a *snapshot*: when more matches follow a page, the rest
/// of the ordered candidate list (row ID and record name each) is written to
/// `query_cursors`/`query_cursor_rows` under a random 16-byte ID, and the
/// cursor is that ID plus a position. A later page walks on from the
/// position, skips rows that were deleted (or whose row ID now holds another
/// record), re-checks the predicate on the record as stored now, and returns
/// it as it is now. So no record comes twice and none is skipped that existed
/// and matched from the first page to the last, however records change in
/// between (records created after the first page are not in the snapshot).
/// A cursor stays valid for ``queryCursorLifetime`` seconds and can be used
/// again (it does not move); it works only in the database that made it.
extension SQLiteStorage {
    /// How long a query cursor stays valid, in seconds, unless configured.
    public static let defaultQueryCursorLifetime: Double = 3_600

    public func queryRecords(
        _ query: Wire.Query, in zone: Wire.RecordZoneID, of database: DatabaseKey, desiredKeys: [String]?, limit: Int
    ) async throws -> QueryPage {
        let key = try database.validated()
        try checkQueryLimit(limit)
        let compiled = try QueryValidation.compile(query)
        let zoneName: String
        switch ZoneResolution.zoneName(of: zone, in: key) {
        case .failure(let failure):
            throw StoreError(failure.code == .invalidArguments ? .invalidArguments : .zoneNotFound, failure.message)
        case .success(let name):
            zoneName = name
        }
        let first = try await read { db -> FirstPage in
            guard let databaseID = try StoreRows.databaseID(db, key),
                let zone = try StoreRows.liveZone(db, databaseID, zoneName)
            else {
                // The default zone exists before anything was written to it.
                guard zoneName == RecordCodec.defaultZoneName else {
                    throw StoreError(.zoneNotFound, "zone \(zoneName) does not exist")
                }
                return FirstPage(page: QueryPage(records: [], cursor: nil))
            }
            let planner = QueryPlanner(db: db, query: compiled, zoneID: zone.id)
            try planner.checkSorts()
            guard let statement = try planner.candidates() else {
                return FirstPage(page: QueryPage(records: [], cursor: nil))
            }
            let candidates = try Row.fetchAll(db, sql: statement.sql, arguments: statement.statementArguments)
                .enumerated().map { QueryCandidate(position: $0.offset, id: $0.element[0], name: $0.element[1]) }
            var run = QueryRun(db: db, query: compiled, zoneID: zone.id, zoneName: zone.name, key: key, desiredKeys: desiredKeys)
            var iterator = candidates.makeIterator()
            let (records, next) = try run.page(limit: limit) { iterator.next() }
            var page = QueryPage(records: records, cursor: nil)
            page.recordsExamined = run.examined
            return FirstPage(
                page: page, rest: next.map { Array(candidates[$0...]) }, databaseID: databaseID, zone: zone)
        }
        guard let rest = first.rest, let zone = first.zone else { return first.page }
        let id = QueryCursorToken.randomID()
        let now = RecordCodec.seconds(clock())
        let expired = now - queryCursorLifetime
        let queryBytes = Data(query.serializedBytes())
        let keysBlob = Self.desiredKeysBlob(desiredKeys)
        let databaseID = first.databaseID
        try await write(weight: rest.count) { db in
            try db.run(sql: "DELETE FROM query_cursors WHERE created_at <= ?", arguments: [expired])
            try db.run(
                sql: """
                    INSERT INTO query_cursors (id, database_id, zone_id, zone_name, query, desired_keys, created_at)
                    VALUES (?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [Data(id), databaseID, zone.id, zone.name, queryBytes, keysBlob, now])
            // Many rows per statement: a snapshot may hold every record of a zone.
            let rowsPerStatement = 200
            let cursorID = Data(id)
            for start in stride(from: 0, to: rest.count, by: rowsPerStatement) {
                let chunk = rest[start..<min(start + rowsPerStatement, rest.count)]
                var arguments: [DatabaseValue] = []
                arguments.reserveCapacity(chunk.count * 4)
                for (offset, candidate) in chunk.enumerated() {
                    arguments += [cursorID.databaseValue, (start + offset).databaseValue,
                                  candidate.id.databaseValue, candidate.name.databaseValue]
                }
                let values = Array(repeating: "(?, ?, ?, ?)", count: chunk.count).joined(separator: ", ")
                let sql = "INSERT INTO query_cursor_rows (cursor_id, position, record_id, name) VALUES \(values)"
                if chunk.count == rowsPerStatement {
                    try db.run(sql: sql, arguments: StatementArguments(arguments))
                } else {
                    // Not cached: a last chunk can have any length.
                    try db.execute(sql: sql, arguments: StatementArguments(arguments))
                }
            }
        }
        var page = first.page
        page.cursor = QueryCursorToken(id: id, position: 0).bytes
        return page
    }

    public func continueQuery(
        _ cursor: [UInt8], in database: DatabaseKey, desiredKeys: QueryContinuationKeys, limit: Int
    ) async throws -> QueryPage {
        let key = try database.validated()
        try checkQueryLimit(limit)
        guard let token = QueryCursorToken(cursor) else { throw Self.unknownCursor }
        let now = RecordCodec.seconds(clock())
        let lifetime = queryCursorLifetime
        return try await read { db in
            guard let databaseID = try StoreRows.databaseID(db, key),
                let header = try db.row(
                    sql: "SELECT * FROM query_cursors WHERE id = ? AND database_id = ?",
                    arguments: [Data(token.id), databaseID]),
                now - (header["created_at"] as Double) < lifetime
            else { throw Self.unknownCursor }
            let query: Wire.Query
            do {
                query = try Wire.Query(serializedBytes: [UInt8](header["query"] as Data))
            } catch {
                throw StoreError(.corruptData, "stored query of a cursor does not decode: \(error)")
            }
            let compiled = try QueryValidation.compile(query)
            let zoneID: Int64 = header["zone_id"]
            let zoneName: String = header["zone_name"]
            guard try db.int64(sql: "SELECT id FROM zones WHERE id = ? AND deleted_at IS NULL", arguments: [zoneID]) != nil
            else { throw StoreError(.zoneNotFound, "zone \(zoneName) was deleted") }
            let keys: [String]?
            switch desiredKeys {
            case .sameAsQuery: keys = try Self.desiredKeys(header["desired_keys"])
            case .replaced(let replaced): keys = replaced
            }
            var run = QueryRun(db: db, query: compiled, zoneID: zoneID, zoneName: zoneName, key: key, desiredKeys: keys)
            var buffered: [QueryCandidate] = []
            var from = token.position
            var exhausted = false
            let chunk = 256
            let (records, next) = try run.page(limit: limit) {
                if buffered.isEmpty && !exhausted {
                    buffered = Array(try db.rows(
                        sql: """
                            SELECT position, record_id, name FROM query_cursor_rows
                            WHERE cursor_id = ? AND position >= ? ORDER BY position LIMIT ?
                            """,
                        arguments: [Data(token.id), from, chunk]
                    ).map { QueryCandidate(position: $0["position"], id: $0["record_id"], name: $0["name"]) }.reversed())
                    exhausted = buffered.count < chunk
                    from = (buffered.first?.position ?? from) + 1
                }
                return buffered.popLast()
            }
            var page = QueryPage(
                records: records, cursor: next.map { QueryCursorToken(id: token.id, position: $0).bytes })
            page.recordsExamined = run.examined
            return page
        }
    }

    @discardableResult
    public func pruneQueryCursors(createdBefore cutoff: Wire.Timestamp) async throws -> Int {
        let cutoff = RecordCodec.seconds(cutoff)
        return try await write(weight: 1) { db in
            try db.run(sql: "DELETE FROM query_cursors WHERE created_at < ?", arguments: [cutoff])
            return db.changesCount
        }
    }

    /// What the first page of a query found.
    private struct FirstPage: Sendable {
        var page: QueryPage
        /// The candidates after the page, from the first further match; nil = no more.
        var rest: [QueryCandidate]?
        var databaseID: Int64 = 0
        var zone: ZoneRow?
    }

    static let unknownCursor = StoreError(.invalidArguments, "the query cursor is unknown or expired")

    private func checkQueryLimit(_ limit: Int) throws(StoreError) {
        guard limit > 0, limit <= maxItemsPerOperation else {
            throw StoreError(.invalidArguments, "results limit \(limit) out of range 1 ... \(maxItemsPerOperation)")
        }
    }

    /// NULL for all keys, else a marker byte and the keys as a `Wire.StringList`.
    private static func desiredKeysBlob(_ keys: [String]?) -> Data? {
        keys.map { Data([1] + Wire.StringList(values: $0).serializedBytes()) }
    }

    private static func desiredKeys(_ blob: Data?) throws -> [String]? {
        guard let blob else { return nil }
        do {
            return try Wire.StringList(serializedBytes: [UInt8](blob.dropFirst())).values
        } catch {
            throw StoreError(.corruptData, "stored desired keys of a cursor do not decode: \(error)")
        }
    }
}
