public import CirrusStore
public import CirrusWire
import Foundation
import Logging
import NIOCore
import PostgresNIO

/// Queries (CKQueryOperation), with the SQLite engine's semantics: the shared validation
/// (``QueryValidation``), the shared evaluator deciding each candidate (``QueryEvaluator``),
/// and keyset cursors sealed as SQLite seals them (``QueryCursor``), with the server secret
/// every node shares, so a cursor from one node continues on another.
///
/// A first page reads, in one snapshot, the zone's records of the query's type in its order,
/// narrowed by the conjuncts the index answers (``PostgresQuerySQL``), a batch at a time
/// until the page is full and one more match shows another page follows. A later page reads the records unchanged since the first page's
/// change sequence after the cursor's position, merged with those changed since, placed by
/// their version of then: every write keeps the versions it replaces or deletes
/// (`query_preimages`) until ``pruneQueryCursors(createdBefore:)`` drops them.
///
/// Full-text search (`self CONTAINS`) matches the words the SQLite engine's does: every
/// word of the search among those of the record's strings, ignoring case and diacritics
/// (``QueryText``), found through `record_words` (``PostgresTextRows``). A distance sort
/// orders by the distances SQLite computes (``QueryKeyset/distance(from:_:to:_:)``), records
/// without the location last, ordered in Swift (``PostgresQuerySQL/sortsInSwift``): a page
/// reads the sort keys of every candidate, as SQLite's sorter does.
extension PostgresStorage: RecordQueryStorage {
    public func queryRecords(
        _ query: Wire.Query, in zone: Wire.RecordZoneID, of database: DatabaseKey, desiredKeys: [String]?, limit: Int
    ) async throws -> QueryPage {
        let key = try database.validated()
        try QueryValidation.checkLimit(limit, maximum: maxItemsPerOperation)
        let compiled = try QueryValidation.compile(query)
        let zoneName: String
        switch ZoneResolution.zoneName(of: zone, in: key) {
        case .failure(let failure):
            throw StoreError(failure.code == .invalidArguments ? .invalidArguments : .zoneNotFound, failure.message)
        case .success(let name):
            zoneName = name
        }
        let secret = try await querySecret()
        let now = RecordCodec.seconds(clock())
        let queryBytes = query.serializedBytes()
        let logger = self.logger
        return try await snapshot { connection in
            guard let zone = try await PostgresRows.liveZone(connection, key, zoneName, logger) else {
                // The default zone exists before anything was written to it.
                guard zoneName == RecordCodec.defaultZoneName else {
                    throw StoreError(.zoneNotFound, "zone \(zoneName) does not exist")
                }
                return QueryPage(records: [], cursor: nil)
            }
            try await Self.checkSorts(compiled, key: key, zoneID: zone.id, connection, logger)
            let sql = PostgresQuerySQL(key: key, zoneID: zone.id, query: compiled)
            var unchanged = UnchangedRows(sql: sql, seq: zone.changeSeq, after: nil, connection: connection, logger: logger)
            var run = PostgresQueryRun(query: compiled, zoneName: zone.name, key: key, desiredKeys: desiredKeys)
            var (records, last, more) = try await run.page(limit: limit) { try await unchanged.next(batch: limit + 1) }
            try await PostgresAssetRows.fill(&records, connection, logger)
            return QueryPage(records: records, examined: run.examined, more: more, last: last, for: key, secret: secret) {
                QueryCursor(
                    zoneID: zone.id, zoneName: zone.name, seq: zone.changeSeq,
                    createdMilliseconds: Int64((now * 1_000).rounded(.down)), query: queryBytes,
                    desiredKeys: desiredKeys, position: $0)
            }
        }
    }

    public func continueQuery(
        _ cursor: [UInt8], in database: DatabaseKey, desiredKeys: QueryContinuationKeys, limit: Int
    ) async throws -> QueryPage {
        let key = try database.validated()
        try QueryValidation.checkLimit(limit, maximum: maxItemsPerOperation)
        let secret = try await querySecret()
        guard let token = QueryCursor(sealed: cursor, for: key, secret: secret) else {
            throw QueryCursor.unknown
        }
        let now = RecordCodec.seconds(clock())
        guard now * 1_000 - Double(token.createdMilliseconds) < queryCursorLifetime * 1_000 else {
            throw QueryCursor.unknown
        }
        let compiled: CompiledQuery
        do {
            compiled = try QueryValidation.compile(try Wire.Query(serializedBytes: token.query))
        } catch {
            // Sealed by a node of this database, so it ran once: only a change of the rules refuses it now.
            throw QueryCursor.unknown
        }
        let keys: [String]?
        switch desiredKeys {
        case .sameAsQuery: keys = token.desiredKeys
        case .replaced(let replaced): keys = replaced
        }
        let logger = self.logger
        return try await snapshot { connection in
            var bindings = PostgresRows.binds(key, token.zoneID)
            let live = try await connection.query(
                PostgresQuery(
                    unsafeSQL: """
                        SELECT 1 FROM zones
                        WHERE container = $1 AND owner = $2 AND scope = $3 AND id = $4 AND deleted_at IS NULL
                        """,
                    binds: bindings), logger: logger)
            var exists = false
            for try await _ in live.decode(Int32.self) { exists = true }
            guard exists else { throw StoreError(.zoneNotFound, "zone \(token.zoneName) was deleted") }
            bindings.append(token.seq)
            let kept = try await connection.query(
                PostgresQuery(
                    unsafeSQL: """
                        SELECT name, record_type, record_id, old_seq, created_ns, modified_ns, data FROM query_preimages
                        WHERE container = $1 AND owner = $2 AND scope = $3 AND zone_id = $4 AND replaced_seq > $5
                        ORDER BY replaced_seq
                        """,
                    binds: bindings), logger: logger)
            var versions: [KeptRecordVersion] = []
            for try await row in kept.decode((String, String, Int64, Int64, Int64, Int64, ByteBuffer).self) {
                versions.append(
                    KeptRecordVersion(
                        name: row.0, recordType: row.1, rowID: row.2, oldSeq: row.3, createdNanoseconds: row.4,
                        modifiedNanoseconds: row.5, data: Array(buffer: row.6)))
            }
            let sorts = compiled.sorts
            var changed = try KeptRecordVersion.positions(
                versions, at: token.seq, recordType: compiled.recordType, sorts: sorts
            ).filter { QueryKeyset.compare($0, token.position, sorts) > 0 }
            // Popped from the end: last in order first.
            changed.sort { QueryKeyset.compare($0, $1, sorts) > 0 }
            let sql = PostgresQuerySQL(key: key, zoneID: token.zoneID, query: compiled)
            var unchanged = UnchangedRows(
                sql: sql, seq: token.seq, after: token.position, connection: connection, logger: logger)
            var head = try await unchanged.next(batch: limit + 1)
            var run = PostgresQueryRun(query: compiled, zoneName: token.zoneName, key: key, desiredKeys: keys)
            var (records, last, more) = try await run.page(limit: limit) {
                if let candidate = changed.last, head.map({ QueryKeyset.compare(candidate, $0.position, sorts) < 0 }) ?? true {
                    changed.removeLast()
                    return try await Self.current(candidate, key: key, zoneID: token.zoneID, connection, logger)
                }
                let current = head
                head = try await unchanged.next(batch: limit + 1)
                return current
            }
            try await PostgresAssetRows.fill(&records, connection, logger)
            return QueryPage(records: records, examined: run.examined, more: more, last: last, for: key, secret: secret) {
                var next = token
                next.position = $0
                return next
            }
        }
    }

    @discardableResult
    public func pruneQueryCursors(createdBefore cutoff: Wire.Timestamp) async throws -> Int {
        let cutoff = RecordCodec.seconds(cutoff)
        let logger = self.logger
        return try await connection { connection in
            let rows = try await connection.query(
                "WITH gone AS (DELETE FROM query_preimages WHERE kept_at < \(cutoff) RETURNING 1) SELECT count(*) FROM gone",
                logger: logger)
            var count: Int64 = 0
            for try await value in rows.decode(Int64.self) { count = value }
            return Int(count)
        }
    }

    /// The secret query cursors are sealed with: the server secret every node on this
    /// database shares (``loadOrCreateServerSecret()``), read once per node.
    func querySecret() async throws -> [UInt8] {
        if let secret = querySecretCache.withLock({ $0 }) { return secret }
        let secret = try await loadOrCreateServerSecret()
        querySecretCache.withLock { $0 = secret }
        return secret
    }

    /// Refuses sorting by a field that holds, in this zone and type, values that do not sort
    /// (``QuerySort/refusedKinds``), as the SQLite engine does.
    private static func checkSorts(
        _ query: CompiledQuery, key: DatabaseKey, zoneID: Int64, _ connection: PostgresConnection, _ logger: Logger
    ) async throws {
        for (i, sort) in query.sorts.enumerated() {
            guard let (field, refused) = sort.refusedKinds else { continue }
            var bindings = PostgresRows.binds(key, zoneID)
            bindings.append(query.recordType)
            bindings.append(field)
            bindings.append(refused.map { Int32(truncatingIfNeeded: $0.rawValue) })
            let rows = try await connection.query(
                PostgresQuery(
                    unsafeSQL: """
                        SELECT kind FROM record_values
                        WHERE container = $1 AND owner = $2 AND scope = $3 AND zone_id = $4 AND record_type = $5
                            AND key = $6 AND kind = ANY($7) LIMIT 1
                        """,
                    binds: bindings), logger: logger)
            for try await raw in rows.decode(Int32.self) {
                if let kind = IndexedKind(rawValue: Int64(raw)) { throw sort.refusal(at: i, key: field, holding: kind) }
            }
        }
    }

    /// A changed record placed by its version at the cursor's sequence, as stored now (nil
    /// data when it is gone).
    private static func current(
        _ position: QueryKeyset.Position, key: DatabaseKey, zoneID: Int64, _ connection: PostgresConnection,
        _ logger: Logger
    ) async throws -> PostgresQueryCandidate {
        var bindings = PostgresRows.binds(key, zoneID)
        bindings.append(position.name)
        let rows = try await connection.query(
            PostgresQuery(
                unsafeSQL: """
                    SELECT id, record_type, data FROM records
                    WHERE container = $1 AND owner = $2 AND scope = $3 AND zone_id = $4 AND name = $5
                    """,
                binds: bindings), logger: logger)
        for try await row in rows.decode((Int64, String, ByteBuffer).self) {
            return PostgresQueryCandidate(position: position, stored: (row.0, row.1, row.2))
        }
        return PostgresQueryCandidate(position: position, stored: nil)
    }
}

/// A record a query may return, at `position` in its order, with its stored row (ID, type,
/// data) as read in the page's snapshot; nil when it is gone.
struct PostgresQueryCandidate {
    var position: QueryKeyset.Position
    var stored: (rowID: Int64, recordType: String, data: ByteBuffer)?
}

/// The candidates of a query unchanged since a change sequence, read a batch at a time after
/// the last one read; for a query sorted by distance (``PostgresQuerySQL/sortsInSwift``), the
/// sort keys of all of them are read and ordered first, and their rows a batch at a time.
private struct UnchangedRows {
    let sql: PostgresQuerySQL
    let seq: Int64
    var after: QueryKeyset.Position?
    let connection: PostgresConnection
    let logger: Logger
    private var buffered: [PostgresQueryCandidate] = []
    private var exhausted = false
    private var batch = 0
    /// For a query ordered in Swift: the candidates not read yet, last in order first (nil
    /// until the keys are read).
    private var ordered: [(position: QueryKeyset.Position, rowID: Int64)]?

    init(sql: PostgresQuerySQL, seq: Int64, after: QueryKeyset.Position?, connection: PostgresConnection, logger: Logger) {
        self.sql = sql
        self.seq = seq
        self.after = after
        self.connection = connection
        self.logger = logger
    }

    /// The next candidate; reads `batch` rows (doubling on each read, up to 1,000) when none is buffered.
    mutating func next(batch first: Int) async throws -> PostgresQueryCandidate? {
        if buffered.isEmpty && !exhausted {
            batch = batch == 0 ? max(2, first) : min(1_000, batch * 2)
            let read = sql.sortsInSwift ? try await readOrdered() : try await readInOrder()
            buffered = read.reversed()
        }
        return buffered.popLast()
    }

    /// The next `batch` candidates in the order SQL gives them.
    private mutating func readInOrder() async throws -> [PostgresQueryCandidate] {
        let statement = sql.candidates(upTo: seq, after: after, limit: batch)
        let rows = try await connection.query(statement.query, logger: logger)
        var read: [PostgresQueryCandidate] = []
        for try await row in rows {
            let cells = row.makeRandomAccess()
            let id = try cells[0].decode(Int64.self)
            let type = try cells[2].decode(String.self)
            let data = try cells[3].decode(ByteBuffer.self)
            read.append(PostgresQueryCandidate(position: try position(of: cells), stored: (id, type, data)))
        }
        exhausted = read.count < batch
        after = read.last?.position ?? after
        return read
    }

    /// The next `batch` candidates in the order of their sort keys (``QueryKeyset/compare(_:_:_:)``),
    /// with their rows.
    private mutating func readOrdered() async throws -> [PostgresQueryCandidate] {
        let sorts = sql.query.sorts
        if ordered == nil {
            let rows = try await connection.query(sql.keys(upTo: seq).query, logger: logger)
            var keys: [(position: QueryKeyset.Position, rowID: Int64)] = []
            for try await row in rows {
                let cells = row.makeRandomAccess()
                let key = (position: try position(of: cells), rowID: try cells[0].decode(Int64.self))
                if let after, QueryKeyset.compare(key.position, after, sorts) <= 0 { continue }
                keys.append(key)
            }
            // Last in order first.
            keys.sort { QueryKeyset.compare($0.position, $1.position, sorts) > 0 }
            ordered = keys
        }
        var next: [(position: QueryKeyset.Position, rowID: Int64)] = []
        while next.count < batch, let key = ordered?.popLast() { next.append(key) }
        exhausted = ordered?.isEmpty ?? true
        guard !next.isEmpty else { return [] }
        var stored: [Int64: (String, ByteBuffer)] = [:]
        let rows = try await connection.query(sql.rows(next.map(\.rowID)).query, logger: logger)
        for try await (id, type, data) in rows.decode((Int64, String, ByteBuffer).self) { stored[id] = (type, data) }
        return next.map { key in
            PostgresQueryCandidate(
                position: key.position, stored: stored[key.rowID].map { (key.rowID, $0.0, $0.1) })
        }
    }

    /// A candidate row's place in the query's order: its sort values (columns 4 …, four per
    /// sort descriptor), name and row ID.
    private func position(of cells: PostgresRandomAccessRow) throws -> QueryKeyset.Position {
        var values: [QueryKeyset.Value] = []
        for (i, sort) in sql.query.sorts.enumerated() {
            let base = 4 + 4 * i
            if case .distance(_, let latitude, let longitude) = sort.key {
                values.append(
                    QueryKeyset.distance(
                        from: try cells[base + 2].decode(Double?.self), try cells[base + 3].decode(Double?.self),
                        to: latitude, longitude))
                continue
            }
            values.append(
                PostgresQuerySQL.values(
                    kind: try cells[base].decode(Int32?.self), int: try cells[base + 1].decode(Int64?.self),
                    real: try cells[base + 2].decode(Double?.self), bytes: try cells[base + 3].decode(ByteBuffer?.self)))
        }
        return QueryKeyset.Position(
            values: values, name: try cells[1].decode(String.self), rowID: try cells[0].decode(Int64.self))
    }
}

/// Decides candidates in order and keeps those that match, one page at a time (as the SQLite
/// engine's `QueryRun`).
private struct PostgresQueryRun {
    let query: CompiledQuery
    let zoneName: String
    let key: DatabaseKey
    let desiredKeys: [String]?
    /// Stored records decided so far.
    private(set) var examined = 0

    init(query: CompiledQuery, zoneName: String, key: DatabaseKey, desiredKeys: [String]?) {
        self.query = query
        self.zoneName = zoneName
        self.key = key
        self.desiredKeys = desiredKeys
    }

    /// Up to `limit` matching records from `next()` in order, the position of the last of
    /// them, and whether another match follows. A candidate that is gone, of another type
    /// now, or no longer matching is skipped; a returned record is as stored in the snapshot.
    mutating func page(
        limit: Int, next: () async throws -> PostgresQueryCandidate?
    ) async throws -> (records: [Wire.Record], last: QueryKeyset.Position?, more: Bool) {
        var records: [Wire.Record] = []
        var last: QueryKeyset.Position?
        while let candidate = try await next() {
            guard let stored = candidate.stored else { continue }
            examined += 1
            guard stored.recordType == query.recordType else { continue }
            let record: Wire.Record
            do {
                record = try Wire.Record(serializedBytes: Array(buffer: stored.data))
            } catch {
                throw StoreError(.corruptData, "stored record \(candidate.position.name) does not decode: \(error)")
            }
            // A full-text search looks for its words among the record's, as `record_words` keeps them.
            let evaluator = QueryEvaluator(zoneName: zoneName, databaseOwner: key.owner) { _, search in
                QueryText.holds(search, in: record)
            }
            guard try evaluator.matches(query.predicate, record, rowID: stored.rowID) else { continue }
            if records.count == limit { return (records, last, true) }
            records.append(RecordCodec.restrict(record, to: desiredKeys))
            last = candidate.position
        }
        return (records, last, false)
    }
}
