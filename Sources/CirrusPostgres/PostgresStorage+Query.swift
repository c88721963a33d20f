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
/// Not run by this engine yet, refused with `.invalidArguments` naming it: full-text search
/// (`self CONTAINS`) and sorting by distance.
extension PostgresStorage: RecordQueryStorage {
    public func queryRecords(
        _ query: Wire.Query, in zone: Wire.RecordZoneID, of database: DatabaseKey, desiredKeys: [String]?, limit: Int
    ) async throws -> QueryPage {
        let key = try database.validated()
        try QueryValidation.checkLimit(limit, maximum: maxItemsPerOperation)
        let compiled = try QueryValidation.compile(query)
        try Self.checkRuns(compiled)
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
            try Self.checkRuns(compiled)
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

    /// Refuses what this engine does not run yet: full-text search and sorting by distance.
    static func checkRuns(_ query: CompiledQuery) throws(StoreError) {
        func searches(_ node: QueryNode) -> Bool {
            switch node {
            case .text: true
            case .and(let operands): operands.contains(where: searches)
            case .not(let operand): searches(operand)
            case .constant, .comparison, .distance: false
            }
        }
        if searches(query.predicate) {
            throw StoreError(
                .invalidArguments, "the PostgreSQL storage engine does not run full-text search (self CONTAINS) yet")
        }
        for (i, sort) in query.sorts.enumerated() {
            if case .distance = sort.key {
                throw StoreError(
                    .invalidArguments,
                    "sort descriptor \(i + 1): the PostgreSQL storage engine does not sort by distance yet")
            }
        }
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
/// the last one read.
private struct UnchangedRows {
    let sql: PostgresQuerySQL
    let seq: Int64
    var after: QueryKeyset.Position?
    let connection: PostgresConnection
    let logger: Logger
    private var buffered: [PostgresQueryCandidate] = []
    private var exhausted = false
    private var batch = 0

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
            let statement = sql.candidates(upTo: seq, after: after, limit: batch)
            let rows = try await connection.query(statement.query, logger: logger)
            var read: [PostgresQueryCandidate] = []
            let sorts = sql.query.sorts.count
            for try await row in rows {
                let cells = row.makeRandomAccess()
                let id = try cells[0].decode(Int64.self)
                let name = try cells[1].decode(String.self)
                let type = try cells[2].decode(String.self)
                let data = try cells[3].decode(ByteBuffer.self)
                var values: [QueryKeyset.Value] = []
                for i in 0..<sorts {
                    let base = 4 + 4 * i
                    values.append(
                        PostgresQuerySQL.values(
                            kind: try cells[base].decode(Int32?.self), int: try cells[base + 1].decode(Int64?.self),
                            real: try cells[base + 2].decode(Double?.self), bytes: try cells[base + 3].decode(ByteBuffer?.self)))
                }
                read.append(
                    PostgresQueryCandidate(
                        position: QueryKeyset.Position(values: values, name: name, rowID: id), stored: (id, type, data)))
            }
            exhausted = read.count < batch
            after = read.last?.position ?? after
            buffered = read.reversed()
        }
        return buffered.popLast()
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
        // Full-text search is refused before a page is read (``PostgresStorage/checkRuns(_:)``).
        let evaluator = QueryEvaluator(zoneName: zoneName, databaseOwner: key.owner) { _, _ in false }
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
            guard try evaluator.matches(query.predicate, record, rowID: stored.rowID) else { continue }
            if records.count == limit { return (records, last, true) }
            records.append(RecordCodec.restrict(record, to: desiredKeys))
            last = candidate.position
        }
        return (records, last, false)
    }
}
