import GRDB

/// Sorting: sort keys as SQL on `records r`, and refusals of fields that do not sort.
extension QueryPlanner {
    /// The value `key` orders a record `r` by (NULL = missing).
    func sortExpression(_ key: QuerySort.Key) -> SQLFragment {
        switch key {
        case .creationDate: return SQLFragment(sql: "r.created_ns")
        case .modificationDate: return SQLFragment(sql: "r.modified_ns")
        case .field(let key):
            let kinds = IndexedKind.sortable.map { String($0.rawValue) }.joined(separator: ", ")
            return SQLFragment(
                sql: """
                    (SELECT value FROM record_values \
                    WHERE record_id = r.id AND key = ? AND list_index = -1 AND kind IN (\(kinds)))
                    """,
                arguments: [key.databaseValue])
        case .distance(let key, let latitude, let longitude):
            return SQLFragment(
                sql: """
                    (SELECT cirrus_distance(value, value2, ?, ?) FROM record_values \
                    WHERE record_id = r.id AND key = ? AND list_index = -1 AND kind = \(IndexedKind.location.rawValue))
                    """,
                arguments: [latitude.databaseValue, longitude.databaseValue, key.databaseValue])
        }
    }

    /// Refuses sorting by a field that holds, in this zone and type, values
    /// that do not sort: lists, bytes, references, assets, and locations
    /// unless sorted by distance (and anything but a location then).
    func checkSorts() throws {
        for (i, sort) in query.sorts.enumerated() {
            guard let (key, refused) = sort.refusedKinds else { continue }
            let kinds = refused.map { String($0.rawValue) }.joined(separator: ", ")
            guard
                let raw = try db.int64(
                    sql: """
                        SELECT kind FROM record_values INDEXED BY record_values_by_value \
                        WHERE zone_id = ? AND record_type = ? AND key = ? \
                        AND kind IN (\(kinds)) LIMIT 1
                        """,
                    arguments: [zoneID, query.recordType, key]),
                let kind = IndexedKind(rawValue: raw)
            else { continue }
            throw sort.refusal(at: i, key: key, holding: kind)
        }
    }
}

/// Which sorts every engine refuses (the rules; each engine looks the kinds up in its index).
extension QuerySort {
    /// The field a sort by a field orders by and the kinds of value that field must not hold
    /// in the zone and type (lists, bytes, references, assets, and locations unless sorted
    /// by distance, anything but a location then); nil for a date.
    package var refusedKinds: (key: String, kinds: [IndexedKind])? {
        switch key {
        case .creationDate, .modificationDate: nil
        case .field(let field): (field, IndexedKind.allCases.filter { !IndexedKind.sortable.contains($0) })
        case .distance(let field, _, _): (field, IndexedKind.allCases.filter { $0 != .location })
        }
    }

    /// The refusal of sort descriptor `i` (from 0) by field `key`, which holds `kind` values.
    package func refusal(at i: Int, key: String, holding kind: IndexedKind) -> StoreError {
        let label = "sort descriptor \(i + 1) (\"\(key)\"): \(key) holds \(kind.name) values in this zone"
        switch self.key {
        case .distance:
            return StoreError(.invalidArguments, "\(label); a relative location sorts a location field")
        default:
            let hint = kind == .location ? "; sort locations by distance from a relative location" : ""
            return StoreError(.invalidArguments, "\(label); only single strings, numbers and dates sort\(hint)")
        }
    }
}
