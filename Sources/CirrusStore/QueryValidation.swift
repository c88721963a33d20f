import CirrusWire

/// Checks a query from the wire and compiles it into a ``CompiledQuery``. A
/// client validates too, but the server refuses whatever a raw client sends
/// that it cannot evaluate, with a message naming the node.
///
/// For example, `a == 1 AND b BEGINSWITH 2` is refused with
/// `predicate "a == 1 AND b BEGINSWITH 2": operand 2 of AND: BEGINSWITH needs a string value, got int64`.
package enum QueryValidation {
    /// Predicate nodes may nest this deep (the root is level 1).
    static let maximumDepth = 16
    /// At most this many nodes in one predicate.
    static let maximumNodes = 256
    /// At most this many values in all IN and BETWEEN lists of one predicate.
    static let maximumListValues = 1_000
    static let maximumSortDescriptors = 16

    /// System fields a predicate can compare.
    static let systemSubjects: [String: QuerySubject] = [
        "recordID": .recordID, "creatorUserRecordID": .creator, "lastModifiedUserRecordID": .modifier,
        "creationDate": .creationDate, "modificationDate": .modificationDate,
    ]

    /// - throws: ``StoreError`` `.invalidArguments` naming what is wrong.
    /// Refuses a results limit outside 1 ... `maximum`.
    package static func checkLimit(_ limit: Int, maximum: Int) throws(StoreError) {
        guard limit > 0, limit <= maximum else {
            throw StoreError(.invalidArguments, "results limit \(limit) out of range 1 ... \(maximum)")
        }
    }

    package static func compile(_ query: Wire.Query) throws(StoreError) -> CompiledQuery {
        guard !query.recordType.isEmpty, query.recordType.utf8.count <= RecordCodec.maxNameLength else {
            throw StoreError(.invalidArguments, "query: invalid record type \"\(query.recordType)\"")
        }
        var predicate = QueryNode.constant(true)
        if let root = query.predicate {
            let label = root.format.isEmpty ? "predicate" : "predicate \"\(root.format)\""
            var compiler = PredicateCompiler()
            do throws(NodeFailure) {
                predicate = try compiler.compile(root, depth: 1)
            } catch let failure {
                let path = (failure.path.reversed() + [failure.message]).joined(separator: ": ")
                throw StoreError(.invalidArguments, "\(label): \(path)")
            }
        }
        guard query.sortDescriptors.count <= maximumSortDescriptors else {
            throw StoreError(
                .invalidArguments, "query: \(query.sortDescriptors.count) sort descriptors; at most \(maximumSortDescriptors)")
        }
        var sorts: [QuerySort] = []
        for (i, descriptor) in query.sortDescriptors.enumerated() {
            sorts.append(try sort(descriptor, label: "sort descriptor \(i + 1) (\"\(descriptor.key)\")"))
        }
        return CompiledQuery(recordType: query.recordType, predicate: predicate, sorts: sorts)
    }

    private static func sort(_ descriptor: Wire.QuerySortDescriptor, label: String) throws(StoreError) -> QuerySort {
        func refuse(_ message: String) -> StoreError { StoreError(.invalidArguments, "\(label): \(message)") }
        if let problem = keyProblem(descriptor.key) { throw refuse(problem) }
        if let location = descriptor.relativeLocation {
            if let problem = locationProblem(location) { throw refuse("relative location \(problem)") }
            guard systemSubjects[descriptor.key] == nil else {
                throw refuse("\(descriptor.key) is not a location field; a relative location sorts a location field")
            }
            return QuerySort(
                key: .distance(key: descriptor.key, latitude: location.latitude, longitude: location.longitude),
                ascending: descriptor.ascending)
        }
        switch systemSubjects[descriptor.key] {
        case nil: return QuerySort(key: .field(descriptor.key), ascending: descriptor.ascending)
        case .creationDate?: return QuerySort(key: .creationDate, ascending: descriptor.ascending)
        case .modificationDate?: return QuerySort(key: .modificationDate, ascending: descriptor.ascending)
        case .some:
            throw refuse("records cannot be sorted by \(descriptor.key); sort by a field, creationDate or modificationDate")
        }
    }

    /// Nil when `key` can name a field: a letter, then letters, digits and '_'.
    static func keyProblem(_ key: String) -> String? {
        if key.isEmpty { return "empty key" }
        if key.contains(".") { return "key \"\(key)\": key paths are not supported" }
        if RecordCodec.checkFieldKey(key) != nil { return "key \"\(key)\" is not a field name" }
        return nil
    }

    /// Nil when `location` has a latitude and longitude on Earth.
    static func locationProblem(_ location: Wire.Location) -> String? {
        guard (-90.0...90.0).contains(location.latitude), (-180.0...180.0).contains(location.longitude) else {
            return "(\(location.latitude), \(location.longitude)) is not a latitude and longitude"
        }
        return nil
    }
}
