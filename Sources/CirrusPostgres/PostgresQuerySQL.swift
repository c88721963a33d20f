import CirrusStore
import CirrusWire
import Foundation
import NIOCore
import PostgresNIO

/// SQL text and its bindings, a parameter at a time.
struct PostgresSQL {
    var sql = ""
    var bindings = PostgresBindings()

    /// Binds `value` and returns its placeholder (`$n`).
    mutating func bind<Value: PostgresNonThrowingEncodable>(_ value: Value) -> String {
        bindings.append(value)
        return "$\(bindings.count)"
    }

    var query: PostgresQuery { PostgresQuery(unsafeSQL: sql, binds: bindings) }
}

/// The candidates of a query on PostgreSQL: the records of the zone and type unchanged since
/// a cursor's change sequence, after a keyset position, in the query's order, with their sort
/// values and data — read through `records_by_type` (no sort descriptors: row ID order),
/// `records_by_created` or `records_by_modified` (a first descriptor on that date), so a page
/// in those orders reads about as many rows as it returns; a sort on a field reads the type's
/// records and sorts them. Comparisons of a field with strings, bytes, references or dates
/// narrow the read through `record_values`, full-text searches through `record_words`
/// (``PostgresTextRows``); the predicate is decided per candidate by the shared
/// ``QueryEvaluator``, as on SQLite. A query sorted by distance reads the sort keys of every
/// candidate and orders them in Swift (``sortsInSwift``), as SQLite's sorter orders them.
///
/// The order is the SQLite engine's (``QueryKeyset``): per field sort descriptor, numbers
/// (integers and reals, by value as doubles) before strings (byte-wise, `record_values`
/// holds their UTF-8), a record without the value (or with NaN) last whichever the
/// direction; then the record name, or the row ID without descriptors. Integers beyond 2^53
/// that round to the same double compare equal here (then by name), exactly on SQLite.
struct PostgresQuerySQL {
    let key: DatabaseKey
    let zoneID: Int64
    let query: CompiledQuery

    /// The kinds a field sort orders by (``IndexedKind/sortable``).
    private static let sortableKinds = IndexedKind.sortable.map { String($0.rawValue) }.joined(separator: ", ")

    /// Whether the query sorts by distance: its candidates are then ordered here, in Swift
    /// (``keys(upTo:)``), by the distances ``QueryKeyset/distance(from:_:to:_:)`` computes, as
    /// the SQLite engine's `cirrus_distance` and the kept versions of changed records
    /// (``KeptRecordVersion``) compute them, so a cursor's position and every candidate's
    /// compare exactly; PostgreSQL's own trigonometry could differ in the last bit.
    var sortsInSwift: Bool {
        query.sorts.contains { if case .distance = $0.key { true } else { false } }
    }

    /// The candidates after `position` among the rows at or below change sequence `seq`:
    /// columns `id`, `name`, `record_type`, `data`, then per sort descriptor its value's kind,
    /// integer, real and bytes (a date: kind NULL, the integer set). Not for a query that
    /// ``sortsInSwift``.
    func candidates(upTo seq: Int64, after position: QueryKeyset.Position?, limit: Int) -> PostgresSQL {
        var statement = selection(upTo: seq, data: true)
        if let position { statement.sql += " AND " + after(position, binding: &statement) }
        statement.sql += " ORDER BY "
        for (i, sort) in query.sorts.enumerated() {
            let direction = sort.ascending ? "ASC" : "DESC"
            switch sort.key {
            case .creationDate: statement.sql += "r.created_ns \(direction), "
            case .modificationDate: statement.sql += "r.modified_ns \(direction), "
            case .field:
                let e = Self.expressions(i)
                statement.sql += "\(e.family) \(direction) NULLS LAST, \(e.number) \(direction), \(e.bytes) \(direction), "
            case .distance:
                // Ordered in Swift (``sortsInSwift``): read through ``keys(upTo:)``, never here.
                continue
            }
        }
        statement.sql += query.sorts.isEmpty ? "r.id" : "r.name"
        statement.sql += " LIMIT \(max(1, limit))"
        return statement
    }

    /// Every candidate among the rows at or below change sequence `seq`, unordered, without
    /// its data, for a query that ``sortsInSwift``: columns `id`, `name`, `record_type`, then
    /// per sort descriptor four columns: as ``candidates(upTo:after:limit:)``'s, but for a
    /// distance sort the location's kind, NULL, its latitude and its longitude.
    func keys(upTo seq: Int64) -> PostgresSQL {
        selection(upTo: seq, data: false)
    }

    /// The stored rows (`id`, `record_type`, `data`) of the records of the zone with row IDs
    /// `ids`.
    func rows(_ ids: [Int64]) -> PostgresSQL {
        var statement = PostgresSQL()
        let container = statement.bind(key.container)
        let owner = statement.bind(key.owner)
        let scope = statement.bind(key.scope.rawValue)
        let zone = statement.bind(zoneID)
        statement.sql = """
            SELECT id, record_type, data FROM records
            WHERE container = \(container) AND owner = \(owner) AND scope = \(scope) AND zone_id = \(zone) \
            AND id = ANY(\(statement.bind(ids)))
            """
        return statement
    }

    /// `SELECT` … `WHERE` of the candidates among the rows at or below change sequence `seq`:
    /// their row ID, name, type, data (or NULL) and sort columns, narrowed by the conjuncts the
    /// indexes answer.
    private func selection(upTo seq: Int64, data: Bool) -> PostgresSQL {
        var statement = PostgresSQL()
        statement.sql = "SELECT r.id, r.name, r.record_type, \(data ? "r.data" : "NULL::bytea")"
        for (i, sort) in query.sorts.enumerated() {
            switch sort.key {
            case .creationDate: statement.sql += ", NULL::integer, r.created_ns, NULL::float8, NULL::bytea"
            case .modificationDate: statement.sql += ", NULL::integer, r.modified_ns, NULL::float8, NULL::bytea"
            case .field: statement.sql += ", s\(i).kind, s\(i).int_value, s\(i).real_value, s\(i).bytes_value"
            case .distance: statement.sql += ", s\(i).kind, NULL::bigint, s\(i).real_value, s\(i).real_value2"
            }
        }
        statement.sql += " FROM records r"
        for (i, sort) in query.sorts.enumerated() {
            let value: String
            switch sort.key {
            case .creationDate, .modificationDate:
                continue
            case .field(let field):
                value = """
                    s\(i).key = \(statement.bind(field)) AND s\(i).kind IN (\(Self.sortableKinds)) \
                    AND NOT (s\(i).kind = \(IndexedKind.double.rawValue) AND s\(i).real_value = 'NaN'::float8)
                    """
            case .distance(let field, _, _):
                // A single location: what SQLite's distance sort reads (a list is no location).
                value = "s\(i).key = \(statement.bind(field)) AND s\(i).kind = \(IndexedKind.location.rawValue)"
            }
            statement.sql += """
                 LEFT JOIN record_values s\(i) ON s\(i).container = r.container AND s\(i).owner = r.owner \
                AND s\(i).scope = r.scope AND s\(i).zone_id = r.zone_id AND s\(i).record_name = r.name \
                AND s\(i).list_index = -1 AND \(value)
                """
        }
        let container = statement.bind(key.container)
        let owner = statement.bind(key.owner)
        let scope = statement.bind(key.scope.rawValue)
        let zone = statement.bind(zoneID)
        let type = statement.bind(query.recordType)
        let upTo = statement.bind(seq)
        statement.sql += """
             WHERE r.container = \(container) AND r.owner = \(owner) AND r.scope = \(scope) AND r.zone_id = \(zone) \
            AND r.record_type = \(type) AND r.change_seq <= \(upTo)
            """
        for filter in filters(binding: &statement) { statement.sql += " AND " + filter }
        return statement
    }

    /// The conjuncts of the predicate the index answers exactly enough to narrow the
    /// candidates down (a superset of their matches: the evaluator decides), as conditions on
    /// `records r`, at most 8: full-text searches (every word among the record's,
    /// `record_words`) and comparisons of a field with strings, bytes, references or dates
    /// (PostgreSQL's planner may then drive the read from `record_words` or `record_values`).
    /// Numbers are left to the evaluator: integer and real columns compare inexactly with each
    /// other in SQL.
    private func filters(binding statement: inout PostgresSQL) -> [String] {
        let conjuncts: [QueryNode]
        switch query.predicate {
        case .and(let operands): conjuncts = operands
        default: conjuncts = [query.predicate]
        }
        var filters: [String] = []
        for node in conjuncts where filters.count < 8 {
            if case .text(let search) = node {
                // Every word of the search among the record's (one condition per word).
                let words = Set(QueryText.words(of: search)).sorted()
                filters.append(words.map { PostgresTextRows.holds(statement.bind($0)) }.joined(separator: " AND "))
                continue
            }
            guard case .comparison(let comparison) = node, case .field(let key) = comparison.subject,
                let family = comparison.operands.first?.family, comparison.operands.allSatisfy({ $0.family == family })
            else { continue }
            let target: (kind: IndexedKind, column: String)
            switch family {
            case .string: target = (.string, "f.bytes_value")
            case .bytes: target = (.bytes, "f.bytes_value")
            case .reference: target = (.reference, "f.bytes_value")
            case .date: target = (.date, "f.int_value")
            case .number: continue
            }
            let (kind, column) = target
            var condition = PostgresSQL(sql: "", bindings: statement.bindings)
            guard let test = Self.valueCondition(column, comparison, binding: &condition) else { continue }
            statement.bindings = condition.bindings
            let listed = comparison.op == .contains ? kind.asList : kind
            filters.append(
                """
                EXISTS (SELECT 1 FROM record_values f WHERE f.container = r.container AND f.owner = r.owner \
                AND f.scope = r.scope AND f.zone_id = r.zone_id AND f.record_name = r.name \
                AND f.key = \(statement.bind(key)) AND f.kind = \(listed.rawValue) AND \(test))
                """)
        }
        return filters
    }

    /// `column <op> operands` for an index row's value column, nil when not answered here.
    private static func valueCondition(
        _ column: String, _ comparison: QueryComparison, binding statement: inout PostgresSQL
    ) -> String? {
        func bind(_ value: QueryValue) -> String? {
            switch value {
            case .string(let text): statement.bind(ByteBuffer(string: text))
            case .bytes(let bytes): statement.bind(ByteBuffer(bytes: bytes))
            case .reference(let reference): statement.bind(ByteBuffer(string: reference.recordName))
            case .date(let nanoseconds): statement.bind(nanoseconds)
            case .int64, .double: nil
            }
        }
        let operands = comparison.operands
        guard let first = operands.first else { return nil }
        let ordered = first.family != .reference
        switch comparison.op {
        case .equals, .contains: return bind(first).map { "\(column) = \($0)" }
        case .notEquals:
            // A reference into another zone differs with the same record name: only names are indexed.
            if first.family == .reference { return "\(column) IS NOT NULL" }
            return bind(first).map { "\(column) <> \($0)" }
        case .less: return ordered ? bind(first).map { "\(column) < \($0)" } : nil
        case .lessOrEqual: return ordered ? bind(first).map { "\(column) <= \($0)" } : nil
        case .greater: return ordered ? bind(first).map { "\(column) > \($0)" } : nil
        case .greaterOrEqual: return ordered ? bind(first).map { "\(column) >= \($0)" } : nil
        case .between:
            guard ordered, operands.count == 2, let low = bind(operands[0]), let high = bind(operands[1]) else { return nil }
            return "\(column) BETWEEN \(low) AND \(high)"
        case .in:
            let bound = operands.compactMap(bind)
            guard bound.count == operands.count else { return nil }
            return "\(column) IN (\(bound.joined(separator: ", ")))"
        case .beginsWith:
            guard case .string(let prefix) = first else { return nil }
            let low = statement.bind(ByteBuffer(string: prefix))
            guard let upper = QueryComparison.prefixUpperBound(prefix) else { return "\(column) >= \(low)" }
            return "\(column) >= \(low) AND \(column) < \(statement.bind(ByteBuffer(string: upper)))"
        }
    }

    /// The ordering expressions of field sort `i`: the value's family (0 number, 1 string,
    /// NULL none), its number as a double, its bytes.
    private static func expressions(_ i: Int) -> (family: String, number: String, bytes: String) {
        (
            "(CASE WHEN s\(i).kind = \(IndexedKind.string.rawValue) THEN 1 WHEN s\(i).kind IS NOT NULL THEN 0 END)",
            "coalesce(s\(i).real_value, s\(i).int_value::float8)", "s\(i).bytes_value"
        )
    }

    /// The condition that holds for the rows after `position` in the query's order.
    private func after(_ position: QueryKeyset.Position, binding statement: inout PostgresSQL) -> String {
        var alternatives: [String] = []
        var equalSoFar: [String] = []
        var dateBound: String?
        for (i, sort) in query.sorts.enumerated() {
            let value = i < position.values.count ? position.values[i] : .null
            let op = sort.ascending ? ">" : "<"
            switch sort.key {
            case .creationDate, .modificationDate:
                let column = sort.key == .creationDate ? "r.created_ns" : "r.modified_ns"
                // Never NULL in this engine: every record carries both dates.
                guard case .integer(let v) = value else {
                    equalSoFar.append("false")
                    continue
                }
                let p = statement.bind(v)
                if i == 0 { dateBound = "\(column) \(sort.ascending ? ">=" : "<=") \(p)" }
                alternatives.append((equalSoFar + ["\(column) \(op) \(p)"]).joined(separator: " AND "))
                equalSoFar.append("\(column) = \(p)")
            case .field, .distance:
                let e = Self.expressions(i)
                switch value {
                case .null:
                    equalSoFar.append("\(e.family) IS NULL")
                case .integer, .real:
                    let number: Double
                    switch value {
                    case .integer(let v): number = Double(v)
                    case .real(let v): number = v
                    default: number = 0
                    }
                    let p = statement.bind(number)
                    let family = sort.ascending ? "\(e.family) = 1" : "false"
                    alternatives.append(
                        (equalSoFar + [
                            "(\(e.family) IS NULL OR \(family) OR (\(e.family) = 0 AND \(e.number) \(op) \(p)))"
                        ]).joined(separator: " AND "))
                    equalSoFar.append("\(e.family) = 0 AND \(e.number) = \(p)")
                case .text(let text):
                    let p = statement.bind(ByteBuffer(string: text))
                    let family = sort.ascending ? "false" : "\(e.family) = 0"
                    alternatives.append(
                        (equalSoFar + [
                            "(\(e.family) IS NULL OR \(family) OR (\(e.family) = 1 AND \(e.bytes) \(op) \(p)))"
                        ]).joined(separator: " AND "))
                    equalSoFar.append("\(e.family) = 1 AND \(e.bytes) = \(p)")
                }
            }
        }
        let tieBreak =
            query.sorts.isEmpty ? "r.id > \(statement.bind(position.rowID))" : "r.name > \(statement.bind(position.name))"
        alternatives.append((equalSoFar + [tieBreak]).joined(separator: " AND "))
        let condition = "(" + alternatives.map { "(\($0))" }.joined(separator: " OR ") + ")"
        return dateBound.map { "\($0) AND \(condition)" } ?? condition
    }

    /// The sort values of a candidate row (columns 4 …, four per sort descriptor).
    static func values(kind: Int32?, int: Int64?, real: Double?, bytes: ByteBuffer?) -> QueryKeyset.Value {
        switch kind.map(Int64.init).flatMap(IndexedKind.init(rawValue:)) {
        case nil: return int.map(QueryKeyset.Value.integer) ?? .null
        case .string?: return bytes.map { .text(String(buffer: $0)) } ?? .null
        case .double?: return real.map(QueryKeyset.Value.real) ?? .null
        default: return int.map(QueryKeyset.Value.integer) ?? .null
        }
    }
}
