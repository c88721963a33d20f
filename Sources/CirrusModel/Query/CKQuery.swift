import CirrusWire
import Foundation

/// What to search for: records of one type that match a predicate, in an order (CloudKit's
/// `CKQuery`).
///
/// A class, as Apple's is, so `let query = …; query.sortDescriptors = […]` works; the record
/// type and predicate are fixed when it is made.
///
/// For example:
/// ```swift
/// let predicate = CKPredicate(format: "category == %@", "work")
/// let query = CKQuery(recordType: "Note", predicate: predicate)
/// query.sortDescriptors = [NSSortDescriptor(key: "createdAt", ascending: false)]
/// let operation = CKQueryOperation(query: query)
/// ```
public final class CKQuery: Sendable, CustomStringConvertible {
    /// The type of the records to search.
    public let recordType: CKRecord.RecordType
    /// The condition records must meet.
    public let predicate: CKPredicate
    private let sorting: Locked<[CKSortDescriptor]?>

    /// A query for records of `recordType` that match `predicate`.
    public init(recordType: CKRecord.RecordType, predicate: CKPredicate) {
        self.recordType = recordType
        self.predicate = predicate
        self.sorting = Locked(nil)
    }

    /// The query a wire message describes: an absent predicate is `TRUEPREDICATE`, a sort key
    /// with a relative location is a `CKLocationSortDescriptor`.
    package convenience init(wire: Wire.Query) {
        self.init(recordType: wire.recordType, predicate: wire.predicate.map(CKPredicate.init(wire:)) ?? CKPredicate(value: true))
        self.sortDescriptors = wire.sortDescriptors.isEmpty ? nil : wire.sortDescriptors.map(CKSortDescriptor.fromWire)
    }

    /// The order of the results, first key first; nil or empty = the server's order.
    ///
    /// Each is an `NSSortDescriptor(key:ascending:)`, a ``CKSortDescriptor`` or a
    /// ``CKLocationSortDescriptor``; the query keeps them as `CKSortDescriptor`s. A descriptor
    /// made from a Swift key path names no record field: the operation then fails with
    /// `CKError(.invalidArguments)`.
    public var sortDescriptors: [NSSortDescriptor]? {
        get { sorting.withLock { $0 } }
        set { sorting.withLock { $0 = newValue?.map(CKSortDescriptor.forQuery) } }
    }

    /// The query as a wire message.
    ///
    /// - throws: `CKError` `.invalidArguments` when the record type is empty, a sort key is
    ///   invalid, or the predicate did not parse; then the message is the
    ///   `CKPredicate.ParseError`'s description and `userInfo[NSUnderlyingErrorKey]` holds it.
    package var wireQuery: Wire.Query {
        get throws(CKError) {
            guard !recordType.isEmpty else {
                throw CKError(.invalidArguments, message: "a query needs a record type")
            }
            try FieldValue.checkWireString(recordType, what: "the record type")
            let wirePredicate: Wire.QueryPredicate
            do {
                wirePredicate = try predicate.wirePredicate
            } catch {
                throw error.ckError
            }
            var sorts: [Wire.QuerySortDescriptor] = []
            for descriptor in sorting.withLock({ $0 }) ?? [] { sorts.append(try descriptor.wireSortDescriptor) }
            return Wire.Query(recordType: recordType, predicate: wirePredicate, sortDescriptors: sorts)
        }
    }

    public var description: String {
        let sorts = (sorting.withLock { $0 } ?? []).map(\.description).joined(separator: ", ")
        return "<CKQuery recordType=\(recordType) predicate=\(predicate.predicateFormat) sortDescriptors=[\(sorts)]>"
    }
}
