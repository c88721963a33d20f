import CirrusWire

/// Checks a stored record against a compiled predicate. SQL narrows a query
/// down to candidates through the indexes; this has the last word on each
/// (NOT, and whatever SQL only approximates).
///
/// Semantics (CloudKit's, for a store without a schema):
/// - A comparison holds only for a record whose field holds a single value
///   of a family the operand compares with: int64 and double (numerically,
///   with each other), strings (byte-wise, case-sensitive), dates, bytes,
///   references. A record without the field, or with a list, a location, an
///   asset, NaN, or a value of another family, matches no comparison, `!=`
///   included: `!=` means "has the field, with another value".
/// - `NOT p` is exactly the records `p` does not match, so `NOT (a == 1)`
///   matches records without `a`.
/// - `CONTAINS` holds when some element of a list field equals the operand;
///   `IN` when a single-valued field equals some element of the operand list.
/// - References are equal when they name the same record in the same zone;
///   `creatorUserRecordID`/`lastModifiedUserRecordID` compare user record names.
package struct QueryEvaluator {
    /// The queried zone; references without a zone point into it.
    let zoneName: String
    /// The owner of the queried database; references without one mean it.
    let databaseOwner: String
    /// Whether stored record `rowID` holds every word of `search` (FTS5).
    let textMatches: (_ rowID: Int64, _ search: QueryTextSearch) throws -> Bool

    package init(
        zoneName: String, databaseOwner: String, textMatches: @escaping (_ rowID: Int64, _ search: QueryTextSearch) throws -> Bool
    ) {
        self.zoneName = zoneName
        self.databaseOwner = databaseOwner
        self.textMatches = textMatches
    }

    package func matches(_ node: QueryNode, _ record: Wire.Record, rowID: Int64) throws -> Bool {
        switch node {
        case .constant(let value):
            return value
        case .and(let operands):
            for operand in operands where try !matches(operand, record, rowID: rowID) { return false }
            return true
        case .not(let operand):
            return try !matches(operand, record, rowID: rowID)
        case .text(let search):
            return try textMatches(rowID, search)
        case .distance(let distance):
            guard case .locationValue(let location) = field(distance.key, of: record),
                let meters = QueryGeometry.distanceOnEarth(
                    location.latitude, location.longitude, distance.latitude, distance.longitude)
            else { return false }
            return distance.holds(meters)
        case .comparison(let comparison):
            return matches(comparison, record)
        }
    }

    private func field(_ key: String, of record: Wire.Record) -> Wire.FieldValue.Kind? {
        record.fields.first { $0.key == key && !$0.isEncrypted }?.value?.kind
    }

    private func matches(_ comparison: QueryComparison, _ record: Wire.Record) -> Bool {
        let operands = comparison.operands.map { operand -> QueryValue in
            if case .reference(let reference) = operand { return .reference(normalized(reference)) }
            return operand
        }
        let stored: QueryValue?
        switch comparison.subject {
        case .field(let key):
            guard let kind = field(key, of: record) else { return false }
            if comparison.op == .contains {
                guard let operand = operands.first else { return false }
                return elements(of: kind).contains { Self.order($0, operand) == .same }
            }
            stored = scalar(kind)
        case .recordID:
            stored = record.recordID.map {
                .reference(QueryReference(zoneName: zoneName, ownerName: databaseOwner, recordName: $0.recordName))
            }
        case .creator:
            stored = record.creatorUserRecordID.map { .reference(QueryReference(ownerName: "", recordName: $0.recordName)) }
        case .modifier:
            stored = record.lastModifiedUserRecordID.map {
                .reference(QueryReference(ownerName: "", recordName: $0.recordName))
            }
        case .creationDate:
            stored = record.creationDate.map { .date(RecordCodec.nanoseconds($0)) }
        case .modificationDate:
            stored = record.modificationDate.map { .date(RecordCodec.nanoseconds($0)) }
        }
        guard let stored else { return false }
        let userNamesOnly = comparison.subject == .creator || comparison.subject == .modifier
        func order(_ operand: QueryValue) -> Order? {
            if userNamesOnly, case .reference(let user) = stored, case .reference(let value) = operand {
                return user.recordName == value.recordName ? .same : .less
            }
            return Self.order(stored, operand)
        }
        switch comparison.op {
        case .equals: return operands.first.flatMap(order) == .same
        case .notEquals: return operands.first.flatMap(order).map { $0 != .same } ?? false
        case .less: return operands.first.flatMap(order) == .less
        case .lessOrEqual: return [.less, .same].contains(operands.first.flatMap(order))
        case .greater: return operands.first.flatMap(order) == .greater
        case .greaterOrEqual: return [.greater, .same].contains(operands.first.flatMap(order))
        case .in: return operands.contains { order($0) == .same }
        case .contains: return false
        case .between:
            guard operands.count == 2, let low = order(operands[0]), let high = order(operands[1]) else { return false }
            return low != .less && high != .greater
        case .beginsWith:
            guard case .string(let value) = stored, case .string(let prefix)? = operands.first else { return false }
            return value.utf8.starts(with: prefix.utf8)
        }
    }

    /// A single stored value as a comparable value; nil for lists, locations, assets.
    private func scalar(_ kind: Wire.FieldValue.Kind) -> QueryValue? {
        switch kind {
        case .stringValue(let value): .string(value)
        case .int64Value(let value): .int64(value)
        case .doubleValue(let value): .double(value)
        case .bytesValue(let value): .bytes(value)
        case .dateValue(let value): .date(RecordCodec.nanoseconds(value))
        case .referenceValue(let value): reference(value)
        case .locationValue, .assetValue, .stringList, .int64List, .doubleList, .bytesList, .dateList,
            .referenceList, .locationList, .assetList:
            nil
        }
    }

    /// The elements of a list field as comparable values; [] for single values.
    private func elements(of kind: Wire.FieldValue.Kind) -> [QueryValue] {
        switch kind {
        case .stringList(let list): list.values.map { .string($0) }
        case .int64List(let list): list.values.map { .int64($0) }
        case .doubleList(let list): list.values.map { .double($0) }
        case .bytesList(let list): list.values.map { .bytes($0) }
        case .dateList(let list): list.values.map { .date(RecordCodec.nanoseconds($0)) }
        case .referenceList(let list): list.values.compactMap(reference)
        default: []
        }
    }

    private func reference(_ reference: Wire.Reference) -> QueryValue? {
        guard let id = reference.recordID else { return nil }
        return .reference(normalized(QueryReference(
            zoneName: id.zoneID?.zoneName, ownerName: id.zoneID?.ownerName ?? "", recordName: id.recordName)))
    }

    private func normalized(_ reference: QueryReference) -> QueryReference {
        QueryReference(
            zoneName: reference.zoneName ?? zoneName,
            ownerName: reference.ownerName.isEmpty ? databaseOwner : reference.ownerName,
            recordName: reference.recordName)
    }

    enum Order: Hashable { case less, same, greater }

    /// How stored value `a` orders against operand `b`; nil when they do not
    /// compare (different families, NaN). References and bytes only tell
    /// equal from unequal.
    private static func order(_ a: QueryValue, _ b: QueryValue) -> Order? {
        switch (a, b) {
        case (.int64(let x), .int64(let y)): return order(x, y)
        case (.double(let x), .double(let y)):
            guard !x.isNaN, !y.isNaN else { return nil }
            return x < y ? .less : (x > y ? .greater : .same)
        case (.int64(let x), .double(let y)): return order(x, y)
        case (.double(let x), .int64(let y)): return order(y, x).map(reversed)
        case (.string(let x), .string(let y)):
            if x.utf8.elementsEqual(y.utf8) { return .same }
            return x.utf8.lexicographicallyPrecedes(y.utf8) ? .less : .greater
        case (.date(let x), .date(let y)): return order(x, y)
        case (.bytes(let x), .bytes(let y)): return x == y ? .same : .less
        case (.reference, .reference): return a == b ? .same : .less
        default: return nil
        }
    }

    private static func order(_ x: Int64, _ y: Int64) -> Order {
        x < y ? .less : (x > y ? .greater : .same)
    }

    /// Int64 against Double, exactly (as SQLite compares them).
    private static func order(_ x: Int64, _ y: Double) -> Order? {
        guard !y.isNaN else { return nil }
        if y >= 9_223_372_036_854_775_808.0 { return .less }
        if y < -9_223_372_036_854_775_808.0 { return .greater }
        let whole = y.rounded(.towardZero)
        let truncated = Int64(whole)
        if x != truncated { return x < truncated ? .less : .greater }
        let fraction = y - whole
        return fraction > 0 ? .less : (fraction < 0 ? .greater : .same)
    }

    private static func reversed(_ order: Order) -> Order {
        switch order {
        case .less: .greater
        case .same: .same
        case .greater: .less
        }
    }
}
