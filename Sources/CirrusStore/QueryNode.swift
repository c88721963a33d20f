import CirrusWire

/// A query after validation (``QueryValidation``): the form the planner turns
/// into SQL and the evaluator checks records against.
package struct CompiledQuery: Sendable {
    package var recordType: String
    package var predicate: QueryNode
    package var sorts: [QuerySort]
}

/// A predicate tree node with values in the form the store compares them.
package indirect enum QueryNode: Sendable, Hashable {
    case constant(Bool)
    case comparison(QueryComparison)
    case and([QueryNode])
    case not(QueryNode)
    /// `self CONTAINS 'words'`: every token occurs in some string of the record.
    case text(QueryTextSearch)
    case distance(QueryDistance)
}

/// What a comparison compares: a field or a system field.
package enum QuerySubject: Sendable, Hashable {
    case field(String)
    case recordID, creator, modifier, creationDate, modificationDate
}

package enum QueryOperator: Sendable, Hashable {
    case equals, notEquals, less, lessOrEqual, greater, greaterOrEqual, beginsWith, `in`, contains, between

    /// As in a predicate format string.
    var symbol: String {
        switch self {
        case .equals: "=="
        case .notEquals: "!="
        case .less: "<"
        case .lessOrEqual: "<="
        case .greater: ">"
        case .greaterOrEqual: ">="
        case .beginsWith: "BEGINSWITH"
        case .in: "IN"
        case .contains: "CONTAINS"
        case .between: "BETWEEN"
        }
    }
}

/// Values a comparison can hold; the families that compare with each other
/// are ``QueryValue/Family``.
package enum QueryValue: Sendable, Hashable {
    case int64(Int64)
    case double(Double)
    case string(String)
    case bytes([UInt8])
    /// Nanoseconds since the epoch, as `record_values.value` holds dates.
    case date(Int64)
    case reference(QueryReference)

    package enum Family: Sendable, Hashable {
        case number, string, bytes, date, reference
    }

    package var family: Family {
        switch self {
        case .int64, .double: .number
        case .string: .string
        case .bytes: .bytes
        case .date: .date
        case .reference: .reference
        }
    }
}

/// The record a reference value points to. `zoneName` nil = the queried zone;
/// an empty `ownerName` = the owner of the queried database.
package struct QueryReference: Sendable, Hashable {
    var zoneName: String?
    var ownerName: String
    package var recordName: String
}

/// `subject <operator> operands`: one operand for scalar operators, the list
/// for IN, two (low, high) for BETWEEN.
package struct QueryComparison: Sendable, Hashable {
    package var subject: QuerySubject
    package var op: QueryOperator
    package var operands: [QueryValue]
}

package struct QueryTextSearch: Sendable, Hashable {
    /// The words to find, as the client wrote them (non-empty).
    var tokens: [String]
    /// The FTS5 query: every token as a quoted string (implicit AND).
    var matchExpression: String
}

package struct QueryDistance: Sendable, Hashable {
    enum Comparison: Sendable, Hashable { case less, lessOrEqual, greater, greaterOrEqual }

    var key: String
    var latitude: Double
    var longitude: Double
    var radius: Double
    var comparison: Comparison

    func holds(_ distance: Double) -> Bool {
        switch comparison {
        case .less: distance < radius
        case .lessOrEqual: distance <= radius
        case .greater: distance > radius
        case .greaterOrEqual: distance >= radius
        }
    }
}

package struct QuerySort: Sendable, Hashable {
    package enum Key: Sendable, Hashable {
        case field(String)
        case creationDate, modificationDate
        /// Distance of the location field from a point.
        case distance(key: String, latitude: Double, longitude: Double)
    }

    package var key: Key
    package var ascending: Bool
}

extension QueryComparison {
    /// The least string greater than every string starting with `prefix`
    /// (byte-wise, as SQLite's BINARY collation orders UTF-8): `prefix` with
    /// its last scalar incremented; nil when every string qualifies.
    package static func prefixUpperBound(_ prefix: String) -> String? {
        var scalars = Array(prefix.unicodeScalars)
        while let last = scalars.popLast() {
            var next = last.value + 1
            if next == 0xD800 { next = 0xE000 }
            if let scalar = Unicode.Scalar(next) {
                scalars.append(scalar)
                var result = String.UnicodeScalarView()
                result.append(contentsOf: scalars)
                return String(result)
            }
        }
        return nil
    }
}
