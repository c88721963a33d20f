import CirrusWire
import Foundation
import GRDB
import Synchronization

/// SQL text and its arguments, in order.
struct SQLFragment: Sendable {
    var sql: String
    var arguments: [DatabaseValue] = []

    var statementArguments: StatementArguments { StatementArguments(arguments) }
}

/// Turns a compiled query into the SQL listing its candidates: the records
/// of the zone and type that may match, in the query's order, found through
/// the indexes. Candidates are a superset of the matches; ``QueryEvaluator``
/// decides each.
///
/// Every conjunct of the predicate that an index can answer becomes a
/// *source*. The source that selects fewest rows (counted up to a bound)
/// drives: `records.id IN (its row IDs)`, so a query matching 10 records of
/// 100,000 reads about 10. The other sources filter each driven row through
/// the record's own `record_values` rows (EXISTS on the table's key), never
/// widening the read. Without any
/// source, or when the zone holds fewer records of the type than the best
/// source lists, the query reads the zone's records of the type
/// (`records_by_type`, in row ID order; `records_by_created` or
/// `records_by_modified` when the first sort descriptor is that date, so
/// the read is in the query's order and a page stops after its records).
/// In such an order a source listing at least ``estimateBound`` rows does
/// not drive either: the ordered read stops after a page, the driver would
/// list every match first. A first page without sort descriptors, when no
/// source lists fewer than ``probeRows``, is first tried on the ordered read's
/// first rows (``orderedReadFillsPage(_:upTo:limit:)``): when they match often
/// enough, nothing is counted further, so the page costs about as much in a
/// zone of 200,000 records as in one of 1,000.
///
/// Candidates are listed for keyset paging (``QueryKeyset``): only rows
/// unchanged since a cursor's change sequence, only after a position, with
/// their sort values as columns 3, 4 ….
struct QueryPlanner {
    let db: Database
    let query: CompiledQuery
    let zoneID: Int64
    /// The records a page returns at most, when the caller reads a page: a first page of a
    /// query without sort descriptors then probes the ordered read first
    /// (``orderedReadFillsPage(_:upTo:limit:)``).
    var pageLimit: Int?

    /// Counting stops here when choosing the driving source.
    static let estimateBound = 1_000
    /// At most this many conjuncts become SQL (each costs a count and a probe per row).
    static let maximumIndexedConjuncts = 8

    /// The candidates' `id`, `name` and sort values, in order, among the rows
    /// at or below change sequence `seq` and after `position`; nil when
    /// nothing can match.
    func candidates(upTo seq: Int64, after position: QueryKeyset.Position?) throws -> SQLFragment? {
        let conjuncts: [QueryNode]
        switch query.predicate {
        case .constant(false): return nil
        case .and(let operands): conjuncts = operands
        default: conjuncts = [query.predicate]
        }
        // Conjuncts beyond the first few indexable ones are left to the evaluator.
        var sources = Array(conjuncts.compactMap(source).prefix(Self.maximumIndexedConjuncts))
        // Each statement names the index it must use (SQLite refuses the
        // statement rather than read a table whole), so a plan never depends
        // on the planner's guesses between indexes that look alike to it.
        var table = "records r INDEXED BY records_by_type"
        switch query.sorts.first?.key {
        case .creationDate?: table = "records r INDEXED BY records_by_created"
        case .modificationDate?: table = "records r INDEXED BY records_by_modified"
        default: break
        }
        var conditions = SQLFragment(sql: "")
        let driving: (index: Int, estimate: Int)?
        if position == nil, query.sorts.isEmpty, let pageLimit, !sources.isEmpty,
            try !hasSelectiveSource(sources), try orderedReadFillsPage(sources, upTo: seq, limit: pageLimit)
        {
            driving = nil
        } else {
            driving = try drivingSource(sources)
            if driving?.estimate == 0 { return nil }
        }
        // In an order an index gives, a page stops after its records: reading
        // that index with the conjuncts as filters beats listing every one of
        // many matches (at least ``estimateBound``) through a driver first.
        if let driving, !(indexGivesOrder && driving.estimate >= Self.estimateBound) {
            let driver = sources.remove(at: driving.index)
            if let ids = driver.ids {
                table = "records r NOT INDEXED"  // rowid lookups only
                conditions.append(" AND r.id IN (", ids, ")")
            } else if let condition = driver.recordCondition {
                table = "records r INDEXED BY \(condition.index)"
                conditions.append(" AND ", condition.fragment)
            }
        }
        var statement = SQLFragment(sql: "SELECT r.id, r.name")
        for sort in query.sorts { statement.append(", ", sortExpression(sort.key)) }
        statement.append(SQLFragment(
            sql: " FROM \(table) WHERE r.zone_id = ? AND r.record_type = ? AND \(Self.systemIndexCondition)"
                + " AND +r.change_seq <= ?",
            arguments: [zoneID.databaseValue, query.recordType.databaseValue, seq.databaseValue]))
        statement.append(conditions)
        for source in sources { statement.append(" AND ", source.filter) }
        if let position {
            statement.append(" AND ", QueryKeyset.after(position, query.sorts, expression: sortExpression))
        }
        statement.sql += " ORDER BY "
        for sort in query.sorts {
            statement.append(sortExpression(sort.key))
            switch sort.key {
            // Never NULL: plain order, so the date's index gives it.
            case .creationDate, .modificationDate: statement.sql += sort.ascending ? " ASC, " : " DESC, "
            default: statement.sql += sort.ascending ? " ASC NULLS LAST, " : " DESC NULLS LAST, "
            }
        }
        statement.sql += query.sorts.isEmpty ? "r.id" : "r.name"
        return statement
    }

    /// What SQLite needs in a statement to read `records_by_type`, `records_by_created`,
    /// `records_by_modified` or `records_by_creator`, partial indexes of the rows that have it
    /// (schema v17). A query runs only once ``FieldIndexing`` has given every record of its zone
    /// and type that value (``FieldIndexing/system``), so the condition changes nothing it finds.
    static let systemIndexCondition = "r.sys_indexed = 1"

    /// Whether the table read without a driver lists rows in the query's
    /// order: no sort descriptors (row ID), or a date first.
    private var indexGivesOrder: Bool {
        switch query.sorts.first?.key {
        case nil, .creationDate?, .modificationDate?: true
        default: false
        }
    }

    // MARK: Sources

    /// What an index knows about one conjunct.
    private struct Source {
        /// Row IDs of `records` (a superset of the conjunct's matches in the
        /// zone and type), when `record_values_by_value` or the full-text
        /// table lists them.
        var ids: SQLFragment?
        /// A condition on `records r` an index of `records` answers.
        var recordCondition: (fragment: SQLFragment, index: String)?
        /// The conjunct as a condition on one row `r` (no index of its own).
        var filter: SQLFragment
    }

    private func source(_ node: QueryNode) -> Source? {
        switch node {
        case .constant, .not, .and: return nil
        case .text(let search):
            let match = search.matchExpression.databaseValue
            return Source(
                ids: SQLFragment(sql: "SELECT rowid FROM record_text WHERE record_text MATCH ?", arguments: [match]),
                filter: SQLFragment(
                    sql: "EXISTS (SELECT 1 FROM record_text WHERE record_text MATCH ? AND rowid = r.id)",
                    arguments: [match]))
        case .distance(let distance):
            return source(distance)
        case .comparison(let comparison):
            switch comparison.subject {
            case .field(let key): return fieldSource(key, comparison)
            // UNIQUE (zone_id, name) of schema v1 is SQLite's first automatic index of `records`.
            case .recordID: return recordSource("name", comparison, index: "sqlite_autoindex_records_1")
            case .creator: return recordSource("creator", comparison, index: "records_by_creator")
            case .modifier: return recordSource("modifier", comparison, index: nil)
            case .creationDate: return recordSource("created_ns", comparison, index: "records_by_created")
            case .modificationDate: return recordSource("modified_ns", comparison, index: "records_by_modified")
            }
        }
    }

    /// The prefix every `record_values` source starts with: the rows of one
    /// key in `record_values_by_value`, to be narrowed to a kind and values.
    private func fieldRows(_ key: String) -> SQLFragment {
        SQLFragment(
            sql: """
                SELECT record_id FROM record_values INDEXED BY record_values_by_value \
                WHERE zone_id = ? AND record_type = ? AND key = ?
                """,
            arguments: [zoneID.databaseValue, query.recordType.databaseValue, key.databaseValue])
    }

    private func fieldSource(_ key: String, _ comparison: QueryComparison) -> Source? {
        guard let family = comparison.operands.first?.family else { return nil }
        let list = comparison.op == .contains
        let kinds: [IndexedKind]
        switch family {
        case .number: kinds = [.int64, .double]
        case .string: kinds = [.string]
        case .date: kinds = [.date]
        case .bytes: kinds = [.bytes]
        case .reference: kinds = [.reference]
        }
        // Each kind is one range of the index: (key, kind) then the value;
        // `!=` reads the whole (key, kind) range.
        let condition = valueCondition("value", comparison)
        var ids = SQLFragment(sql: "")
        var alternatives: [SQLFragment] = []
        for (i, kind) in kinds.map({ list ? $0.asList : $0 }).enumerated() {
            if i > 0 { ids.sql += " UNION ALL " }
            ids.append(fieldRows(key))
            ids.append(" AND kind = \(kind.rawValue) AND ", condition.prefixingColumns(""))
            alternatives.append(SQLFragment(sql: "f.kind = \(kind.rawValue) AND ") + condition.prefixingColumns("f."))
        }
        var filter = SQLFragment(
            sql: "EXISTS (SELECT 1 FROM record_values f WHERE f.record_id = r.id AND f.key = ? AND (",
            arguments: [key.databaseValue])
        for (i, alternative) in alternatives.enumerated() {
            if i > 0 { filter.sql += " OR " }
            filter.append("(", alternative, ")")
        }
        filter.sql += "))"
        return Source(ids: ids, filter: filter)
    }

    /// `column <op> values` for a `record_values` column (written as `$column`
    /// so a filter can qualify it).
    private func valueCondition(_ column: String, _ comparison: QueryComparison) -> SQLFragment {
        let values = comparison.operands.map(Self.sqlValue)
        let c = "$\(column)"
        switch comparison.op {
        case .equals, .contains: return SQLFragment(sql: "\(c) = ?", arguments: Array(values.prefix(1)))
        case .notEquals:
            // A reference in another zone differs even with the same record
            // name, and only names are indexed.
            if comparison.operands.first?.family == .reference { return SQLFragment(sql: "\(c) IS NOT NULL") }
            return SQLFragment(sql: "\(c) <> ?", arguments: Array(values.prefix(1)))
        case .less: return SQLFragment(sql: "\(c) < ?", arguments: Array(values.prefix(1)))
        case .lessOrEqual: return SQLFragment(sql: "\(c) <= ?", arguments: Array(values.prefix(1)))
        case .greater: return SQLFragment(sql: "\(c) > ?", arguments: Array(values.prefix(1)))
        case .greaterOrEqual: return SQLFragment(sql: "\(c) >= ?", arguments: Array(values.prefix(1)))
        case .between: return SQLFragment(sql: "\(c) BETWEEN ? AND ?", arguments: Array(values.prefix(2)))
        case .in:
            let marks = Array(repeating: "?", count: values.count).joined(separator: ", ")
            return SQLFragment(sql: "\(c) IN (\(marks))", arguments: values)
        case .beginsWith:
            guard case .string(let prefix)? = comparison.operands.first else {
                return SQLFragment(sql: "0")
            }
            if let upper = Self.prefixUpperBound(prefix) {
                return SQLFragment(sql: "\(c) >= ? AND \(c) < ?", arguments: [prefix.databaseValue, upper.databaseValue])
            }
            return SQLFragment(sql: "\(c) >= ?", arguments: [prefix.databaseValue])
        }
    }

    /// A comparison of a `records` column; `index` drives it unless nil (or `!=`).
    private func recordSource(_ column: String, _ comparison: QueryComparison, index: String?) -> Source {
        let condition = valueCondition(column, comparison)
        let driver = index.flatMap { comparison.op == .notEquals ? nil : (condition.prefixingColumns("r."), $0) }
        return Source(recordCondition: driver, filter: condition.prefixingColumns("+r."))
    }

    private func source(_ distance: QueryDistance) -> Source {
        let from: [DatabaseValue] = [distance.latitude.databaseValue, distance.longitude.databaseValue]
        let comparison: String
        switch distance.comparison {
        case .less: comparison = "<"
        case .lessOrEqual: comparison = "<="
        case .greater: comparison = ">"
        case .greaterOrEqual: comparison = ">="
        }
        let test = SQLFragment(
            sql: "cirrus_distance($value, $value2, ?, ?) \(comparison) ?",
            arguments: from + [distance.radius.databaseValue])
        let bounded = distance.comparison == .less || distance.comparison == .lessOrEqual
        var ids = fieldRows(distance.key)
        ids.sql += " AND kind = \(IndexedKind.location.rawValue)"
        if bounded {
            // The bounding box seeks the latitude in the index.
            let box = QueryGeometry.boundingBox(
                latitude: distance.latitude, longitude: distance.longitude, radius: distance.radius)
            ids.append(SQLFragment(
                sql: " AND value BETWEEN ? AND ?",
                arguments: [box.latitude.lowerBound.databaseValue, box.latitude.upperBound.databaseValue]))
            if !box.longitudes.isEmpty {
                ids.sql += " AND ("
                for (i, range) in box.longitudes.enumerated() {
                    if i > 0 { ids.sql += " OR " }
                    ids.append(SQLFragment(
                        sql: "value2 BETWEEN ? AND ?",
                        arguments: [range.lowerBound.databaseValue, range.upperBound.databaseValue]))
                }
                ids.sql += ")"
            }
        }
        ids.append(" AND ", test.prefixingColumns(""))
        var filter = SQLFragment(
            sql: """
                EXISTS (SELECT 1 FROM record_values f \
                WHERE f.record_id = r.id AND f.key = ? AND f.kind = \(IndexedKind.location.rawValue)
                """,
            arguments: [distance.key.databaseValue])
        filter.append(" AND ", test.prefixingColumns("f."), ")")
        return Source(ids: ids, filter: filter)
    }

    /// The rows of the ordered read ``orderedReadFillsPage(_:upTo:limit:)`` examines, and the
    /// rows below which a source drives (``hasSelectiveSource(_:)``).
    static let probeRows = 64

    /// Whether the type's records read in row ID order (a query without sort descriptors), with
    /// every source as a filter, fill a page within ``estimateBound`` rows, judged by the matches
    /// among their first ``probeRows``: then the planner reads them so and counts no source
    /// further. Asked only when no source is selective (``hasSelectiveSource(_:)``, which
    /// drives). Counting a source lists up to ``estimateBound`` rows wherever it matches that
    /// many: in a large zone, a predicate matching a sixteenth of it cost a first page about
    /// twice what it cost in a small one. Only which read is chosen depends on it: both give
    /// the same records.
    private func orderedReadFillsPage(_ sources: [Source], upTo seq: Int64, limit: Int) throws -> Bool {
        var probe = SQLFragment(
            sql: "SELECT count(*) FROM (SELECT r.id, r.name, r.creator, r.modifier, r.created_ns, r.modified_ns "
                + "FROM records r INDEXED BY records_by_type "
                + "WHERE r.zone_id = ? AND r.record_type = ? AND \(Self.systemIndexCondition) AND +r.change_seq <= ? "
                + "ORDER BY r.id LIMIT \(Self.probeRows)) AS r WHERE 1",
            arguments: [zoneID.databaseValue, query.recordType.databaseValue, seq.databaseValue])
        for source in sources { probe.append(" AND ", source.filter) }
        let statement = try StatementAdmission.counts.statement(db, sql: probe.sql)
        let found = try Int.fetchOne(statement, arguments: probe.statementArguments) ?? 0
        // At `found` matches per `probeRows` rows, `limit` matches take `probeRows * limit / found` rows.
        return found > 0 && Self.probeRows * limit <= found * Self.estimateBound
    }

    /// Whether a source lists fewer than ``probeRows`` rows (each counted that far): it drives
    /// then, as few rows as the ordered read's probe examines.
    private func hasSelectiveSource(_ sources: [Source]) throws -> Bool {
        for source in sources {
            if let rows = rows(of: source), try count(rows, upTo: Self.probeRows) < Self.probeRows {
                return true
            }
        }
        return false
    }

    /// The rows a source lists, when an index lists them.
    private func rows(of source: Source) -> SQLFragment? {
        if let ids = source.ids { return ids }
        guard let condition = source.recordCondition else { return nil }
        return SQLFragment(
            sql: "SELECT 1 FROM records r INDEXED BY \(condition.index) "
                + "WHERE r.zone_id = ? AND r.record_type = ? AND \(Self.systemIndexCondition) AND ",
            arguments: [zoneID.databaseValue, query.recordType.databaseValue]) + condition.fragment
    }

    /// The source to drive from: the one listing fewest rows (each counted
    /// up to ``estimateBound``), unless the zone holds fewer records of the
    /// type than that (a full-text source counts every database's rows); nil
    /// = read the type's records. An estimate of 0: nothing can match.
    ///
    /// The type's records are counted last, and only as far as the choice needs: up to the
    /// best estimate (whether there are at least as many), or just whether there is one when
    /// the best source lists ``estimateBound`` rows in an order an index gives (it does not
    /// drive then). Counting them up to the bound first read that many entries of
    /// `records_by_type` in every zone of at least that many records, for each query, even
    /// when a source listed a handful.
    private func drivingSource(_ sources: [Source]) throws -> (index: Int, estimate: Int)? {
        let candidates = sources.indices.filter { sources[$0].ids != nil || sources[$0].recordCondition != nil }
        guard let first = candidates.first else { return nil }
        var best: (index: Int, estimate: Int)?
        for i in candidates {
            guard let rows = rows(of: sources[i]) else { continue }
            let estimate = try count(rows)
            if best.map({ estimate < $0.estimate }) ?? true { best = (i, estimate) }
            if estimate == 0 { break }
        }
        guard let best else { return nil }
        if best.estimate == 0 { return best }
        let needed = indexGivesOrder && best.estimate >= Self.estimateBound ? 1 : best.estimate
        let typeCount = try typeRows(upTo: needed)
        if typeCount == 0 { return (first, 0) }
        return best.estimate <= typeCount ? best : nil
    }

    /// How many records of the type the zone holds, counting up to `bound`. The statement is
    /// the same for every query: taken from the connection's statement cache.
    private func typeRows(upTo bound: Int) throws -> Int {
        let statement = try db.cachedStatement(sql: Self.typeRowsSQL)
        return try Int.fetchOne(statement, arguments: [zoneID, query.recordType, bound]) ?? 0
    }

    private static let typeRowsSQL =
        "SELECT count(*) FROM (SELECT 1 FROM records r INDEXED BY records_by_type "
        + "WHERE r.zone_id = ? AND r.record_type = ? AND \(systemIndexCondition) LIMIT ?)"

    /// How many rows `rows` lists, counting up to `bound`, through a statement kept prepared
    /// while ``StatementAdmission/counts`` admits its text (preparing one, with GRDB's check of
    /// every column it reads, cost about as much as counting).
    private func count(_ rows: SQLFragment, upTo bound: Int = Self.estimateBound) throws -> Int {
        let statement = try StatementAdmission.counts.statement(
            db, sql: "SELECT count(*) FROM (\(rows.sql) LIMIT \(bound))")
        return try Int.fetchOne(statement, arguments: rows.statementArguments) ?? 0
    }

    // MARK: Values

    static func sqlValue(_ value: QueryValue) -> DatabaseValue {
        switch value {
        case .int64(let value): value.databaseValue
        case .double(let value): value.databaseValue
        case .string(let value): value.databaseValue
        case .bytes(let value): Data(value).databaseValue
        case .date(let value): value.databaseValue
        case .reference(let value): value.recordName.databaseValue
        }
    }

    /// The least string greater than every string starting with `prefix`
    /// (byte-wise, as SQLite's BINARY collation orders UTF-8): `prefix` with
    /// its last scalar incremented; nil when every string qualifies.
    static func prefixUpperBound(_ prefix: String) -> String? { QueryComparison.prefixUpperBound(prefix) }
}

extension SQLFragment {
    static func + (lhs: SQLFragment, rhs: SQLFragment) -> SQLFragment {
        SQLFragment(sql: lhs.sql + rhs.sql, arguments: lhs.arguments + rhs.arguments)
    }

    mutating func append(_ parts: SQLFragment...) {
        for part in parts { self = self + part }
    }

    mutating func append(_ head: String, _ part: SQLFragment, _ tail: String = "") {
        self = self + SQLFragment(sql: head) + part + SQLFragment(sql: tail)
    }

    /// Replaces each `$column` placeholder with `qualifier` + column.
    func prefixingColumns(_ qualifier: String) -> SQLFragment {
        SQLFragment(sql: sql.replacingOccurrences(of: "$", with: qualifier), arguments: arguments)
    }
}

/// The texts of statements reader connections keep prepared, admitted up to a bound: the
/// first ``limit`` texts seen in the process (for the planner's counts, ``counts``). A query's
/// statement text varies with the query (the operator, the column, the length of an `IN`
/// list, the index), and a connection's statement cache keeps every text it is given for as
/// long as the connection lives: the bound keeps what clients can make the readers hold
/// bounded, while the few shapes an app's queries have are prepared once per connection. Past
/// it, a text is prepared for each use.
final class StatementAdmission: Sendable {
    /// The planner's counting statements.
    static let counts = StatementAdmission(limit: 256)
    /// The statements listing a query's candidates (``QueryPlanner/candidates(upTo:after:)``).
    static let candidates = StatementAdmission(limit: 256)

    let limit: Int
    private let admitted = Mutex<Set<String>>([])

    init(limit: Int) {
        self.limit = limit
    }

    /// The statement for `sql` on `db`: from the connection's cache when the text is admitted
    /// (it was, or there is room), else prepared for this use.
    func statement(_ db: Database, sql: String) throws -> Statement {
        let cached = admitted.withLock { texts in
            if texts.contains(sql) { return true }
            guard texts.count < limit else { return false }
            texts.insert(sql)
            return true
        }
        return cached ? try db.cachedStatement(sql: sql) : try db.makeStatement(sql: sql)
    }
}
