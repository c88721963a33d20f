import CirrusWire
import Foundation

/// Builds the wire node of one comparison from its two operands, checking that the operator,
/// the key and the value fit together as CloudKit requires.
struct PredicateComparison {
    /// The operator as parsed, with the token that spelled it (for messages).
    struct Operator {
        let wire: Wire.ComparisonOperator
        let token: PredicateToken

        /// The operator as written (`==`, `BEGINSWITH` …).
        var text: String { token.text.uppercased() }

        /// The operator with its sides swapped (`<` becomes `>`); nil when it has no mirror.
        var mirrored: Wire.ComparisonOperator? {
            switch wire {
            case .equals: .equals
            case .notEquals: .notEquals
            case .less: .greater
            case .lessOrEqual: .greaterOrEqual
            case .greater: .less
            case .greaterOrEqual: .lessOrEqual
            default: nil
            }
        }
    }

    let format: String
    let comparisonOperator: Operator

    private func fail(_ position: Int, _ message: String) -> CKPredicate.ParseError {
        CKPredicate.ParseError(format: format, position: position, message: message)
    }

    /// The node for `lhs operator rhs`; a value on the left is moved to the right.
    func predicate(_ lhs: PredicateOperand, _ rhs: PredicateOperand) throws(CKPredicate.ParseError) -> Wire.QueryPredicate {
        let name = self.comparisonOperator.text
        switch (lhs, rhs) {
        case (.selfKeyword(let position), _):
            return try textSearch(rhs, selfPosition: position)
        case (_, .selfKeyword(let position)):
            throw fail(position, "SELF can only be used as self CONTAINS 'text' (full-text search)")
        case (.distance(let key, let from, _), .value(let value, let position)):
            return try distance(key, from, self.comparisonOperator.wire, value, position)
        case (.value(let value, let position), .distance(let key, let from, _)):
            guard let mirrored = self.comparisonOperator.mirrored else {
                throw fail(self.comparisonOperator.token.position, "a distance can only be compared with <, <=, > or >=")
            }
            return try distance(key, from, mirrored, value, position)
        case (.distance, _), (_, .distance):
            throw fail(rhs.position, "a distance must be compared with a number of kilometers")
        case (.key(let key, let keyPosition), .value(let value, let position)):
            return try comparison(key, keyPosition, self.comparisonOperator.wire, value, position)
        case (.value(let value, let position), .key(let key, let keyPosition)):
            if self.comparisonOperator.wire == .in {
                // `value IN listField`: the list field contains the value.
                return try comparison(key, keyPosition, .contains, value, position)
            }
            guard let mirrored = self.comparisonOperator.mirrored else {
                throw fail(position, "the left side of \(name) must be a key")
            }
            return try comparison(key, keyPosition, mirrored, value, position)
        case (.key, .key(_, let position)):
            throw fail(position, "expected a value; comparing two keys is not supported by CloudKit")
        case (.value(_, let position), .value):
            throw fail(position, "one side of a comparison must be a key; found two values")
        }
    }

    // MARK: - Kinds of comparison

    private func textSearch(_ rhs: PredicateOperand, selfPosition: Int) throws(CKPredicate.ParseError) -> Wire.QueryPredicate {
        guard self.comparisonOperator.wire == .contains else {
            throw fail(selfPosition, "SELF can only be used as self CONTAINS 'text' (full-text search)")
        }
        guard case .value(let value, let position) = rhs else {
            throw fail(rhs.position, "self CONTAINS needs a string of words")
        }
        guard case .scalar(.string(let text)) = value else {
            throw fail(position, "self CONTAINS needs a string of words, found \(value.kindDescription)")
        }
        guard text.contains(where: { !$0.isWhitespace }) else {
            throw fail(position, "self CONTAINS needs at least one word")
        }
        try wireCheck(position) { () throws(CKError) in try FieldValue.checkWireString(text) }
        return Wire.QueryPredicate(node: .textSearch(Wire.TextSearchPredicate(text: text)))
    }

    private func distance(
        _ key: String,
        _ from: CKLocation,
        _ op: Wire.ComparisonOperator,
        _ value: PredicateValue,
        _ position: Int
    ) throws(CKPredicate.ParseError) -> Wire.QueryPredicate {
        guard [.less, .lessOrEqual, .greater, .greaterOrEqual].contains(op) else {
            throw fail(self.comparisonOperator.token.position, "a distance can only be compared with <, <=, > or >=")
        }
        let kilometers: Double
        switch value {
        case .scalar(.int64(let v)): kilometers = Double(v)
        case .scalar(.double(let v)): kilometers = v
        default: throw fail(position, "a distance is compared with a number of kilometers, found \(value.kindDescription)")
        }
        guard kilometers.isFinite, kilometers >= 0 else {
            throw fail(position, "the radius must be a finite, non-negative number of kilometers")
        }
        let distance = Wire.DistancePredicate(
            key: key, fromLocation: from.wireLocation, radiusMeters: kilometers * 1000, comparisonOperator: op)
        return Wire.QueryPredicate(node: .distance(distance))
    }

    private func comparison(
        _ key: String,
        _ keyPosition: Int,
        _ op: Wire.ComparisonOperator,
        _ value: PredicateValue,
        _ position: Int
    ) throws(CKPredicate.ParseError) -> Wire.QueryPredicate {
        let name = self.comparisonOperator.text
        let system = PredicateKey.systemKeys[key]
        if system == .reference, ![.equals, .notEquals, .in].contains(op) {
            throw fail(self.comparisonOperator.token.position, "\(key) can only be compared with ==, != or IN")
        }
        let wireValue: FieldValue
        switch op {
        case .equals, .notEquals, .less, .lessOrEqual, .greater, .greaterOrEqual:
            guard case .scalar(let scalar) = value else {
                throw fail(position, "\(name) needs a single value, found a list; use IN to match any of several values")
            }
            if op != .equals, op != .notEquals, !scalar.isOrderable {
                throw fail(position, "\(name) cannot order \(scalar.kindDescription); use a string, a number or a date")
            }
            wireValue = scalar
        case .beginsWith:
            guard case .scalar(let scalar) = value, case .string = scalar else {
                throw fail(position, "BEGINSWITH needs a string, found \(value.kindDescription)")
            }
            if system != nil { throw fail(keyPosition, "BEGINSWITH cannot be used with \(key)") }
            wireValue = scalar
        case .contains:
            guard case .scalar(let scalar) = value else {
                throw fail(position, "\(name) needs a single value to look for in a list field, found a list")
            }
            if system != nil { throw fail(keyPosition, "\(name) needs a list field; \(key) is not one") }
            wireValue = scalar
        case .in:
            guard case .list(let elements) = value else {
                throw fail(position, "IN needs a list ({a, b} or an array), found \(value.kindDescription)")
            }
            try checkSystemKey(key, system, elements.first, position)
            // Nothing is in an empty list.
            guard let list = PredicateValue.wireList(elements) else {
                return Wire.QueryPredicate(node: .falsePredicate(Wire.FalsePredicate()))
            }
            return try node(key, op, list, position)
        case .between:
            guard case .list(let elements) = value, elements.count == 2 else {
                let found = if case .list(let elements) = value { "\(elements.count) values" } else { value.kindDescription }
                throw fail(position, "BETWEEN needs two values {lower, upper}, found \(found)")
            }
            if !elements[0].isOrderable {
                throw fail(position, "BETWEEN cannot order \(elements[0].kindDescription); use strings, numbers or dates")
            }
            try checkSystemKey(key, system, elements.first, position)
            guard let list = PredicateValue.wireList(elements) else {
                throw fail(position, "BETWEEN needs two values {lower, upper}")
            }
            return try node(key, op, list, position)
        default:
            throw fail(self.comparisonOperator.token.position, "unsupported operator \(name)")
        }
        try checkSystemKey(key, system, wireValue, position)
        return try node(key, op, wireValue, position)
    }

    /// System keys take one kind of value.
    private func checkSystemKey(
        _ key: String,
        _ system: PredicateKey.SystemKind?,
        _ value: FieldValue?,
        _ position: Int
    ) throws(CKPredicate.ParseError) {
        switch system {
        case nil:
            return
        case .reference?:
            if let value, case .reference = value { return }
            if let value {
                throw fail(position, "\(key) is compared with a CKRecord.ID or CKRecord.Reference, found \(value.kindDescription)")
            }
        case .date?:
            if let value, case .date = value { return }
            if let value {
                throw fail(position, "\(key) is compared with a date, found \(value.kindDescription)")
            }
        }
    }

    private func node(
        _ key: String,
        _ op: Wire.ComparisonOperator,
        _ value: FieldValue,
        _ position: Int
    ) throws(CKPredicate.ParseError) -> Wire.QueryPredicate {
        let kind = try wireCheck(position) { () throws(CKError) in
            try value.wireKind { (_) throws(CKError) in
                throw CKError(.invalidArguments, message: "an asset cannot be compared in a query")
            }
        }
        let comparison = Wire.ComparisonPredicate(key: key, comparisonOperator: op, value: Wire.FieldValue(kind: kind))
        return Wire.QueryPredicate(node: .comparison(comparison))
    }

    /// Runs a wire check, reporting its `CKError` as a parse error at `position`.
    private func wireCheck<T>(_ position: Int, _ body: () throws(CKError) -> T) throws(CKPredicate.ParseError) -> T {
        do {
            return try body()
        } catch {
            throw fail(position, error.message ?? "the value cannot be sent")
        }
    }
}
