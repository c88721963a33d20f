public import CirrusWire
import Foundation
import GRDB

/// Queries (CKQueryOperation).
///
/// A query lists its candidates through the indexes (``QueryPlanner``) in
/// the query's order, then loads them one by one and keeps those the
/// predicate matches (``QueryEvaluator``) until the page is full and one
/// more match shows another page follows. The statement is stepped, not
/// fetched whole: where an index gives the query's order (no sort
/// descriptors, or a first descriptor on the creation or modification
/// date) a page reads about as many rows as it returns, whatever the size
/// of the zone; a sort on a field, or a driving index of another order,
/// sorts every candidate first (SQLite's sorter), still without loading them.
///
/// Cursors are *keyset* positions (``QueryCursor``): the query, the zone, the
/// zone's change sequence at the first page and the sort key of the last
/// record returned, sealed with an HMAC — the store keeps nothing per cursor.
/// A later page reads the rows unchanged since that sequence after the
/// position, merged with the records changed since, placed by their version
/// at the first page: writes to a zone with live cursors keep each replaced
/// or deleted version (``QueryCursorZones``, `query_preimages`), for a cursor
/// lifetime. So the pages follow the order of the first page, no record
/// comes twice and none is skipped that existed and matched throughout,
/// each comes as it is when its page is read, and records created after the
/// first page are not returned. A cursor stays valid for
/// ``queryCursorLifetime`` seconds and can be used again (it does not move);
/// it works only in the database that made it.
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
        let queryBytes = query.serializedBytes()
        let needs = FieldIndexing.Needs(compiled)
        // A zone whose fields the query names are not indexed yet has them indexed, and a zone
        // that keeps no pre-images yet is made live; then it is read again.
        for _ in 0..<4 {
            let zones = queryCursorZones
            let generation = zones.generation
            let now = zones.now
            let lifetime = queryCursorLifetime
            let secret = querySecret
            let outcome = try await read { db -> FirstPage in
                guard let databaseID = try StoreRows.databaseID(db, key),
                    let zone = try StoreRows.liveZone(db, databaseID, zoneName)
                else {
                    // The default zone exists before anything was written to it.
                    guard zoneName == RecordCodec.defaultZoneName else {
                        throw StoreError(.zoneNotFound, "zone \(zoneName) does not exist")
                    }
                    return .page(QueryPage(records: [], cursor: nil))
                }
                if let missing = try FieldIndexing.missing(db, zoneID: zone.id, recordType: compiled.recordType, needs) {
                    return .buildIndex(zone.id, missing)
                }
                let planner = QueryPlanner(db: db, query: compiled, zoneID: zone.id, pageLimit: limit)
                try planner.checkSorts()
                guard zones.covers(zone.id, until: now + lifetime, madeBy: generation) else { return .makeLive(zone.id) }
                // The zone's sequence, or its newest record's should a row run ahead of it.
                let newest = try db.int64(
                    sql: "SELECT max(change_seq) FROM records WHERE zone_id = ?", arguments: [zone.id]) ?? 0
                let seq = max(zone.changeSeq, newest)
                var run = QueryRun(db: db, query: compiled, zoneID: zone.id, zoneName: zone.name, key: key, desiredKeys: desiredKeys)
                let unchanged = try Self.unchangedRows(planner, upTo: seq, after: nil)
                let (records, last, more) = try run.page(limit: limit) { try unchanged.next() }
                return .page(
                    QueryPage(
                        records: records, examined: run.examined, more: more, last: last, for: key, secret: secret
                    ) { last in
                        QueryCursor(
                            zoneID: zone.id, zoneName: zone.name, seq: seq,
                            createdMilliseconds: Int64((now * 1_000).rounded(.down)), query: queryBytes,
                            desiredKeys: desiredKeys, position: last)
                    })
            }
            switch outcome {
            case .page(let page): return page
            case .makeLive(let zoneID): try await makeQueryZoneLive(zoneID)
            case .buildIndex(let zoneID, let missing): try await buildIndex(missing, zoneID: zoneID, recordType: compiled.recordType)
            }
        }
        throw StoreError(.storageFailure, "zone \(zoneName) changed while its query began; try again")
    }

    public func continueQuery(
        _ cursor: [UInt8], in database: DatabaseKey, desiredKeys: QueryContinuationKeys, limit: Int
    ) async throws -> QueryPage {
        let key = try database.validated()
        try checkQueryLimit(limit)
        guard let token = QueryCursor(sealed: cursor, for: key, secret: querySecret) else { throw Self.unknownCursor }
        let now = queryCursorZones.now
        guard now * 1_000 - Double(token.createdMilliseconds) < queryCursorLifetime * 1_000 else { throw Self.unknownCursor }
        let compiled: CompiledQuery
        do {
            compiled = try QueryValidation.compile(try Wire.Query(serializedBytes: token.query))
        } catch {
            // Sealed by this store, so it compiled once: only a change of the rules refuses it now.
            throw Self.unknownCursor
        }
        let keys: [String]?
        switch desiredKeys {
        case .sameAsQuery: keys = token.desiredKeys
        case .replaced(let replaced): keys = replaced
        }
        let secret = querySecret
        let needs = FieldIndexing.Needs(compiled)
        // A cursor made before its fields were indexed (by a store from before schema v16, or
        // of a zone whose records had none of the fields) has them indexed, then reads again.
        for _ in 0..<2 {
            let outcome = try await read { db -> LaterPage in
                guard try db.int64(sql: "SELECT id FROM zones WHERE id = ? AND deleted_at IS NULL", arguments: [token.zoneID]) != nil
                else { throw StoreError(.zoneNotFound, "zone \(token.zoneName) was deleted") }
                if let missing = try FieldIndexing.missing(db, zoneID: token.zoneID, recordType: compiled.recordType, needs) {
                    return .buildIndex(missing)
                }
                return .page(try Self.laterPage(db, token, compiled, key: key, desiredKeys: keys, limit: limit, secret: secret))
            }
            switch outcome {
            case .page(let page): return page
            case .buildIndex(let missing):
                try await buildIndex(missing, zoneID: token.zoneID, recordType: compiled.recordType)
            }
        }
        throw StoreError(.storageFailure, "zone \(token.zoneName) changed while its query went on; try again")
    }

    /// A page after the first one: the rows unchanged since the cursor's sequence after its
    /// position, merged with the records changed since.
    private static func laterPage(
        _ db: Database, _ token: QueryCursor, _ compiled: CompiledQuery, key: DatabaseKey, desiredKeys keys: [String]?,
        limit: Int, secret: [UInt8]
    ) throws -> QueryPage {
        let planner = QueryPlanner(db: db, query: compiled, zoneID: token.zoneID)
        let unchanged = try Self.unchangedRows(planner, upTo: token.seq, after: token.position)
        let sorts = compiled.sorts
        var changed = try QueryPreimages.changed(
            db, zoneID: token.zoneID, since: token.seq, recordType: compiled.recordType, sorts: sorts
        ).filter { QueryKeyset.compare($0.position, token.position, sorts) > 0 }
        // Popped from the end: last in order first.
        changed.sort { QueryKeyset.compare($0.position, $1.position, sorts) > 0 }
        var head = try unchanged.next()
        var run = QueryRun(
            db: db, query: compiled, zoneID: token.zoneID, zoneName: token.zoneName, key: key, desiredKeys: keys)
        let (records, last, more) = try run.page(limit: limit) {
            if let candidate = changed.last, head.map({ QueryKeyset.compare(candidate.position, $0.position, sorts) < 0 }) ?? true {
                return changed.popLast()
            }
            let current = head
            head = try unchanged.next()
            return current
        }
        return QueryPage(records: records, examined: run.examined, more: more, last: last, for: key, secret: secret) {
            var next = token
            next.position = $0
            return next
        }
    }

    /// Indexes `needs` for the records of `recordType` in zone `zoneID`, a chunk of records per
    /// write transaction (``FieldIndexing/build(_:zoneID:recordType:_:)``), until it is complete.
    func buildIndex(_ needs: FieldIndexing.Needs, zoneID: Int64, recordType: String) async throws {
        while try await !write(weight: FieldIndexing.chunkRecords, { db in
            try FieldIndexing.build(db, zoneID: zoneID, recordType: recordType, needs)
        }) {}
    }

    @discardableResult
    public func pruneQueryCursors(createdBefore cutoff: Wire.Timestamp) async throws -> Int {
        let cutoff = RecordCodec.seconds(cutoff)
        return try await write(weight: 1) { db in
            try db.run(sql: "DELETE FROM query_preimages WHERE kept_at < ?", arguments: [cutoff])
            return db.changesCount
        }
    }

    /// The rows of the zone unchanged since `seq`, after `position`, in the query's order.
    private static func unchangedRows(
        _ planner: QueryPlanner, upTo seq: Int64, after position: QueryKeyset.Position?
    ) throws -> CandidateRows {
        guard let statement = try planner.candidates(upTo: seq, after: position) else { return CandidateRows(rows: nil, sorts: 0) }
        // The cursor resets the statement when it goes, with the read: a statement kept prepared
        // holds no read transaction open after it.
        let rows = try Row.fetchCursor(
            StatementAdmission.candidates.statement(planner.db, sql: statement.sql), arguments: statement.statementArguments)
        return CandidateRows(rows: rows, sorts: planner.query.sorts.count)
    }

    /// What the first page's snapshot gave.
    private enum FirstPage: Sendable {
        case page(QueryPage)
        /// The zone keeps no pre-images yet: make it live and read again.
        case makeLive(Int64)
        /// The zone's records are not indexed for these fields yet: index them and read again.
        case buildIndex(Int64, FieldIndexing.Needs)
    }

    /// What a later page's snapshot gave.
    private enum LaterPage: Sendable {
        case page(QueryPage)
        case buildIndex(FieldIndexing.Needs)
    }

    static let unknownCursor = QueryCursor.unknown

    private func checkQueryLimit(_ limit: Int) throws(StoreError) {
        try QueryValidation.checkLimit(limit, maximum: maxItemsPerOperation)
    }
}

/// Candidates stepped from the planner's statement, one row at a time.
private struct CandidateRows {
    let rows: RowCursor?
    let sorts: Int

    func next() throws -> QueryCandidate? {
        guard let row = try rows?.next() else { return nil }
        let id: Int64 = row[0]
        let values = (0..<sorts).map { QueryKeyset.Value(row[2 + $0] as DatabaseValue) }
        return QueryCandidate(position: QueryKeyset.Position(values: values, name: row[1], rowID: id), id: id)
    }
}
