import CirrusWire
import Foundation
import GRDB

/// Keyset paging: a record's place in a query's order is its *sort key* —
/// the values of the sort descriptors, then the record name as tie-break
/// (the row ID when the query has no descriptors) — and a page goes on from
/// the last record returned, reading the records after its key in order and
/// stopping as soon as the page is full.
///
/// Order, as SQLite orders the sort expressions (``QueryPlanner/sortExpression(_:)``):
/// numbers (integers and reals compared by value) before strings (byte-wise
/// UTF-8); a record without the value comes last whichever the direction.
package enum QueryKeyset {
    /// One sort value as SQLite holds it.
    package enum Value: Sendable, Hashable {
        case null
        case integer(Int64)
        case real(Double)
        case text(String)

        init(_ value: DatabaseValue) {
            switch value.storage {
            case .int64(let v): self = .integer(v)
            case .double(let v): self = .real(v)
            case .string(let v): self = .text(v)
            case .null, .blob: self = .null
            }
        }

        var databaseValue: DatabaseValue {
            switch self {
            case .null: .null
            case .integer(let v): v.databaseValue
            case .real(let v): v.databaseValue
            case .text(let v): v.databaseValue
            }
        }

        /// SQLite's comparison of two non-NULL values (BINARY collation).
        static func compare(_ a: Value, _ b: Value) -> Int {
            switch (a, b) {
            case (.integer(let x), .integer(let y)): return x < y ? -1 : x > y ? 1 : 0
            case (.text(let x), .text(let y)):
                return x.utf8.lexicographicallyPrecedes(y.utf8) ? -1 : y.utf8.lexicographicallyPrecedes(x.utf8) ? 1 : 0
            case (.text, _): return 1
            case (_, .text): return -1
            default:
                // Integers and reals compare as numbers (exactly, as SQLite does).
                return numericCompare(a, b)
            }
        }

        private static func numericCompare(_ a: Value, _ b: Value) -> Int {
            switch (a, b) {
            case (.real(let x), .real(let y)): return x < y ? -1 : x > y ? 1 : 0
            case (.integer(let i), .real(let r)): return -compareReal(r, i)
            case (.real(let r), .integer(let i)): return compareReal(r, i)
            default: return 0
            }
        }

        /// A real against an integer without losing the integer's precision.
        private static func compareReal(_ r: Double, _ i: Int64) -> Int {
            if r.isNaN { return -1 }
            if r < -9.223372036854775808e18 { return -1 }
            if r >= 9.223372036854775808e18 { return 1 }
            let whole = Int64(r.rounded(.down))
            if whole != i { return whole < i ? -1 : 1 }
            return r > Double(whole) ? 1 : 0
        }
    }

    /// Where a page ended: the last returned record's sort values and its
    /// tie-break (record name, or row ID for a query without descriptors).
    package struct Position: Sendable, Hashable {
        package var values: [Value]
        package var name: String
        package var rowID: Int64

        func encode(into bytes: inout [UInt8]) {
            bytes.append(int64: Int64(values.count))
            for value in values {
                switch value {
                case .null: bytes.append(0)
                case .integer(let v):
                    bytes.append(1)
                    bytes.append(int64: v)
                case .real(let v):
                    bytes.append(2)
                    bytes.append(int64: Int64(bitPattern: v.bitPattern))
                case .text(let v):
                    bytes.append(3)
                    bytes.append(string: v)
                }
            }
            bytes.append(string: name)
            bytes.append(int64: rowID)
        }

        package init(values: [Value], name: String, rowID: Int64) {
            self.values = values
            self.name = name
            self.rowID = rowID
        }

        init?(from reader: inout ByteReader) {
            guard let count = reader.int64(), (0...64).contains(count) else { return nil }
            var values: [Value] = []
            for _ in 0..<count {
                switch reader.byte() {
                case 0: values.append(.null)
                case 1:
                    guard let v = reader.int64() else { return nil }
                    values.append(.integer(v))
                case 2:
                    guard let v = reader.int64() else { return nil }
                    values.append(.real(Double(bitPattern: UInt64(bitPattern: v))))
                case 3:
                    guard let v = reader.string() else { return nil }
                    values.append(.text(v))
                default: return nil
                }
            }
            guard let name = reader.string(), let rowID = reader.int64() else { return nil }
            self.init(values: values, name: name, rowID: rowID)
        }
    }

    /// Negative when `a` comes before `b` in the order of `sorts`.
    package static func compare(_ a: Position, _ b: Position, _ sorts: [QuerySort]) -> Int {
        for (i, sort) in sorts.enumerated() where i < a.values.count && i < b.values.count {
            let x = a.values[i], y = b.values[i]
            switch (x, y) {
            case (.null, .null): continue
            case (.null, _): return 1
            case (_, .null): return -1
            default:
                let c = Value.compare(x, y)
                if c != 0 { return sort.ascending ? c : -c }
            }
        }
        if sorts.isEmpty { return a.rowID < b.rowID ? -1 : a.rowID > b.rowID ? 1 : 0 }
        return a.name.utf8.lexicographicallyPrecedes(b.name.utf8) ? -1 : b.name.utf8.lexicographicallyPrecedes(a.name.utf8) ? 1 : 0
    }

    /// The condition on `records r` that holds for the records after `position`.
    static func after(_ position: Position, _ sorts: [QuerySort], expression: (QuerySort.Key) -> SQLFragment) -> SQLFragment {
        var alternatives: [SQLFragment] = []
        var equalSoFar: [SQLFragment] = []
        for (i, sort) in sorts.enumerated() {
            let e = expression(sort.key)
            let value = i < position.values.count ? position.values[i] : .null
            if value != .null {
                let op = sort.ascending ? ">" : "<"
                alternatives.append(joined(equalSoFar + [
                    SQLFragment(sql: "(") + e + SQLFragment(sql: " \(op) ? OR ", arguments: [value.databaseValue])
                        + e + SQLFragment(sql: " IS NULL)"),
                ]))
                equalSoFar.append(e + SQLFragment(sql: " = ?", arguments: [value.databaseValue]))
            } else {
                equalSoFar.append(e + SQLFragment(sql: " IS NULL"))
            }
        }
        let tieBreak = sorts.isEmpty
            ? SQLFragment(sql: "r.id > ?", arguments: [position.rowID.databaseValue])
            : SQLFragment(sql: "r.name > ?", arguments: [position.name.databaseValue])
        alternatives.append(joined(equalSoFar + [tieBreak]))
        var condition = SQLFragment(sql: "(")
        for (i, alternative) in alternatives.enumerated() {
            if i > 0 { condition.sql += " OR " }
            condition.append("(", alternative, ")")
        }
        condition.sql += ")"
        // A date comes first and is never NULL: bound it too, so the date's index seeks.
        if let first = sorts.first, first.key == .creationDate || first.key == .modificationDate,
            case .integer(let value)? = position.values.first
        {
            condition = expression(first.key) + SQLFragment(
                sql: first.ascending ? " >= ? AND " : " <= ? AND ", arguments: [value.databaseValue]) + condition
        }
        return condition
    }

    private static func joined(_ parts: [SQLFragment]) -> SQLFragment {
        var result = SQLFragment(sql: "")
        for (i, part) in parts.enumerated() {
            if i > 0 { result.sql += " AND " }
            result.append(part)
        }
        return result
    }

    /// The sort values of a stored record version, as the sort expressions
    /// compute them from its `record_values` rows and date columns.
    package static func values(
        of record: Wire.Record, createdNanoseconds: Int64?, modifiedNanoseconds: Int64?, _ sorts: [QuerySort]
    ) -> [Value] {
        let rows = RecordCodec.indexRows(of: record)
        return sorts.map { sort -> Value in
            switch sort.key {
            case .creationDate: return createdNanoseconds.map(Value.integer) ?? .null
            case .modificationDate: return modifiedNanoseconds.map(Value.integer) ?? .null
            case .field(let key):
                guard let row = rows.first(where: { $0.key == key && IndexedKind.sortable.contains($0.kind) }) else {
                    return .null
                }
                if let v = row.int { return .integer(v) }
                if let v = row.real { return .real(v) }
                if let v = row.text { return .text(v) }
                return .null
            case .distance(let key, let latitude, let longitude):
                let row = rows.first(where: { $0.key == key && $0.kind == .location })
                return distance(from: row?.real, row?.real2, to: latitude, longitude)
            }
        }
    }

    /// The sort value of a distance sort from (`latitude`, `longitude`) for a record whose
    /// location field holds (`storedLatitude`, `storedLongitude`): meters as
    /// ``QueryGeometry/distanceOnEarth(_:_:_:_:)`` computes them (as SQLite's `cirrus_distance`
    /// does), NULL without a location or off Earth.
    package static func distance(
        from storedLatitude: Double?, _ storedLongitude: Double?, to latitude: Double, _ longitude: Double
    ) -> Value {
        guard let storedLatitude, let storedLongitude,
            let meters = QueryGeometry.distanceOnEarth(storedLatitude, storedLongitude, latitude, longitude)
        else { return .null }
        return .real(meters)
    }
}
