import CirrusWire

/// A refusal deep in the tree; the path is collected on the way out.
struct NodeFailure: Error {
    var message: String
    /// Innermost first.
    var path: [String] = []
}

/// Walks one predicate tree, counting nodes and list values.
struct PredicateCompiler {
    var nodes = 0
    var listValues = 0

    mutating func compile(_ node: Wire.QueryPredicate, depth: Int) throws(NodeFailure) -> QueryNode {
        nodes += 1
        guard nodes <= QueryValidation.maximumNodes else {
            throw NodeFailure(message: "more than \(QueryValidation.maximumNodes) nodes")
        }
        guard depth <= QueryValidation.maximumDepth else {
            throw NodeFailure(message: "nested deeper than \(QueryValidation.maximumDepth) levels")
        }
        switch node.node {
        case nil:
            throw NodeFailure(message: "empty node (no comparison, AND, NOT, TRUEPREDICATE … it knows)")
        case .truePredicate:
            return .constant(true)
        case .falsePredicate:
            return .constant(false)
        case .andPredicate(let and):
            var operands: [QueryNode] = []
            for (i, operand) in and.operands.enumerated() {
                do throws(NodeFailure) {
                    let compiled = try compile(operand, depth: depth + 1)
                    switch compiled {
                    case .constant(true): continue
                    case .constant(false): operands.append(compiled)
                    case .and(let inner): operands.append(contentsOf: inner)
                    default: operands.append(compiled)
                    }
                } catch var failure {
                    failure.path.append("operand \(i + 1) of AND")
                    throw failure
                }
            }
            if operands.contains(.constant(false)) { return .constant(false) }
            if operands.isEmpty { return .constant(true) }
            return operands.count == 1 ? operands[0] : .and(operands)
        case .notPredicate(let not):
            guard let operand = not.operand else { throw NodeFailure(message: "NOT without an operand") }
            let compiled: QueryNode
            do throws(NodeFailure) {
                compiled = try compile(operand, depth: depth + 1)
            } catch var failure {
                failure.path.append("operand of NOT")
                throw failure
            }
            switch compiled {
            case .constant(let value): return .constant(!value)
            case .not(let inner): return inner
            default: return .not(compiled)
            }
        case .textSearch(let search):
            let tokens = QueryText.tokens(of: search.text)
            guard !tokens.isEmpty else {
                throw NodeFailure(message: "self CONTAINS needs at least one word, got \"\(search.text)\"")
            }
            return .text(QueryTextSearch(tokens: tokens, matchExpression: QueryText.matchExpression(tokens)))
        case .distance(let distance):
            return .distance(try compile(distance))
        case .comparison(let comparison):
            let compiled = try compile(comparison)
            if compiled.op == .in && compiled.operands.isEmpty { return .constant(false) }
            return .comparison(compiled)
        }
    }

    private func compile(_ distance: Wire.DistancePredicate) throws(NodeFailure) -> QueryDistance {
        let name = "distanceToLocation"
        if let problem = QueryValidation.keyProblem(distance.key) { throw NodeFailure(message: "\(name): \(problem)") }
        guard QueryValidation.systemSubjects[distance.key] == nil else {
            throw NodeFailure(message: "\(name): \(distance.key) is not a location field")
        }
        guard let from = distance.fromLocation else {
            throw NodeFailure(message: "\(name) needs a location to measure from")
        }
        if let problem = QueryValidation.locationProblem(from) { throw NodeFailure(message: "\(name): \(problem)") }
        guard distance.radiusMeters.isFinite, distance.radiusMeters >= 0 else {
            throw NodeFailure(message: "\(name): the radius must be a finite, non-negative number of meters, got \(distance.radiusMeters)")
        }
        let comparison: QueryDistance.Comparison
        switch distance.comparisonOperator {
        case .unspecified, .less: comparison = .less
        case .lessOrEqual: comparison = .lessOrEqual
        case .greater: comparison = .greater
        case .greaterOrEqual: comparison = .greaterOrEqual
        case .unrecognized(let raw): throw NodeFailure(message: "\(name): unknown comparison operator \(raw)")
        case .equals, .notEquals, .beginsWith, .in, .contains, .between:
            throw NodeFailure(message: "\(name) compares with <, <=, > or >=, not \(distance.comparisonOperator)")
        }
        return QueryDistance(
            key: distance.key, latitude: from.latitude, longitude: from.longitude, radius: distance.radiusMeters,
            comparison: comparison)
    }

    private mutating func compile(_ comparison: Wire.ComparisonPredicate) throws(NodeFailure) -> QueryComparison {
        let key = comparison.key
        if let problem = QueryValidation.keyProblem(key) { throw NodeFailure(message: problem) }
        let op: QueryOperator
        switch comparison.comparisonOperator {
        case .equals: op = .equals
        case .notEquals: op = .notEquals
        case .less: op = .less
        case .lessOrEqual: op = .lessOrEqual
        case .greater: op = .greater
        case .greaterOrEqual: op = .greaterOrEqual
        case .beginsWith: op = .beginsWith
        case .in: op = .in
        case .contains: op = .contains
        case .between: op = .between
        case .unspecified: throw NodeFailure(message: "\(key): no comparison operator")
        case .unrecognized(let raw): throw NodeFailure(message: "\(key): unknown comparison operator \(raw)")
        }
        guard let kind = comparison.value?.kind else {
            throw NodeFailure(message: "\(key) \(op.symbol) needs a value, got none")
        }
        let subject = QueryValidation.systemSubjects[key] ?? .field(key)
        let allowed = Self.allowedFamilies(subject, op)
        guard !allowed.isEmpty else {
            throw NodeFailure(message: "\(key) cannot be compared with \(op.symbol)")
        }
        let values = try Self.values(of: kind, subject: subject, key: key, op: op)
        switch op {
        case .in, .between:
            guard values.isList else {
                throw NodeFailure(message: "\(op.symbol) needs a list value, got \(IndexedKind(kind).name)")
            }
            if op == .between && values.values.count != 2 {
                throw NodeFailure(message: "BETWEEN needs a list of 2 values (low, high), got \(values.values.count)")
            }
            listValues += values.values.count
            guard listValues <= QueryValidation.maximumListValues else {
                throw NodeFailure(
                    message: "more than \(QueryValidation.maximumListValues) values in the lists of one predicate")
            }
        default:
            guard !values.isList else {
                let needs = op == .contains ? "a single value (a list element)" : "a single value"
                throw NodeFailure(message: "\(op.symbol) needs \(needs), got \(IndexedKind(kind).name)")
            }
        }
        guard let family = values.family, allowed.contains(family) else {
            throw NodeFailure(message: Self.kindRefusal(subject, key, op, kind, allowed))
        }
        return QueryComparison(subject: subject, op: op, operands: values.values)
    }

    /// What each subject and operator can compare with.
    private static func allowedFamilies(_ subject: QuerySubject, _ op: QueryOperator) -> [QueryValue.Family] {
        switch subject {
        case .recordID, .creator, .modifier:
            return [.equals, .notEquals, .in].contains(op) ? [.reference] : []
        case .creationDate, .modificationDate:
            return [.beginsWith, .contains].contains(op) ? [] : [.date]
        case .field:
            switch op {
            case .equals, .notEquals, .in, .contains: return [.string, .number, .date, .bytes, .reference]
            case .less, .lessOrEqual, .greater, .greaterOrEqual, .between: return [.string, .number, .date]
            case .beginsWith: return [.string]
            }
        }
    }

    private static func kindRefusal(
        _ subject: QuerySubject, _ key: String, _ op: QueryOperator, _ kind: Wire.FieldValue.Kind,
        _ allowed: [QueryValue.Family]
    ) -> String {
        let got = IndexedKind(kind).name
        switch subject {
        case .recordID, .creator, .modifier: return "\(key) takes reference values, got \(got)"
        case .creationDate, .modificationDate: return "\(key) takes date values, got \(got)"
        case .field: break
        }
        switch kind {
        case .locationValue, .locationList:
            return "\(op.symbol) cannot compare locations; use distanceToLocation"
        case .assetValue, .assetList:
            return "assets cannot be compared"
        default:
            break
        }
        if op == .beginsWith { return "BEGINSWITH needs a string value, got \(got)" }
        let names = allowed.map { family -> String in
            switch family {
            case .number: "number"
            case .string: "string"
            case .bytes: "bytes"
            case .date: "date"
            case .reference: "reference"
            }
        }
        return "\(op.symbol) compares \(names.joined(separator: ", ")) values, got \(got)"
    }

    /// The operand values of a wire value, whether it was a list, and the
    /// family of its elements (nil for locations and assets).
    private static func values(
        of kind: Wire.FieldValue.Kind, subject: QuerySubject, key: String, op: QueryOperator
    ) throws(NodeFailure) -> (values: [QueryValue], isList: Bool, family: QueryValue.Family?) {
        func number(_ value: Double) throws(NodeFailure) -> QueryValue {
            guard !value.isNaN else { throw NodeFailure(message: "\(key) \(op.symbol): NaN compares with nothing") }
            return .double(value)
        }
        func reference(_ value: Wire.Reference) throws(NodeFailure) -> QueryValue {
            guard let id = value.recordID, !id.recordName.isEmpty else {
                throw NodeFailure(message: "\(key) \(op.symbol): a reference without a record ID")
            }
            return .reference(QueryReference(
                zoneName: id.zoneID?.zoneName, ownerName: id.zoneID?.ownerName ?? "", recordName: id.recordName))
        }
        switch kind {
        case .stringValue(let value): return ([.string(value)], false, .string)
        case .int64Value(let value): return ([.int64(value)], false, .number)
        case .doubleValue(let value): return ([try number(value)], false, .number)
        case .bytesValue(let value): return ([.bytes(value)], false, .bytes)
        case .dateValue(let value): return ([.date(RecordCodec.nanoseconds(value))], false, .date)
        case .referenceValue(let value): return ([try reference(value)], false, .reference)
        case .locationValue, .assetValue: return ([], false, nil)
        case .stringList(let list): return (list.values.map { .string($0) }, true, .string)
        case .int64List(let list): return (list.values.map { .int64($0) }, true, .number)
        case .doubleList(let list):
            var values: [QueryValue] = []
            for value in list.values { values.append(try number(value)) }
            return (values, true, .number)
        case .bytesList(let list): return (list.values.map { .bytes($0) }, true, .bytes)
        case .dateList(let list): return (list.values.map { .date(RecordCodec.nanoseconds($0)) }, true, .date)
        case .referenceList(let list):
            var values: [QueryValue] = []
            for value in list.values { values.append(try reference(value)) }
            return (values, true, .reference)
        case .locationList, .assetList: return ([], true, nil)
        }
    }
}
