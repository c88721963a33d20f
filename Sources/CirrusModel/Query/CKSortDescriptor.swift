import CirrusWire
import Foundation

/// One sort key of a query, standing in for `NSSortDescriptor(key:ascending:)` (unavailable on
/// Linux, where key-value coding does not exist).
///
/// The key is a field name or `creationDate` / `modificationDate`.
///
/// For example:
/// ```swift
/// query.sortDescriptors = [CKSortDescriptor(key: "createdAt", ascending: false)]
/// ```
public class CKSortDescriptor: @unchecked Sendable, Hashable, CustomStringConvertible {
    // @unchecked Sendable: every stored property is an immutable `let` of a Sendable type,
    // and the class is `public`, not `open`: its only subclass (CKLocationSortDescriptor,
    // below) is immutable too. The class is not final only so that subclass can exist.

    /// The field to sort by.
    public let key: String?
    /// Smallest first when true; largest (or, for a location sort, farthest) first when false.
    public let ascending: Bool
    /// Set for a location sort: the point distances are measured from.
    let location: CKLocation?

    /// Sorts by `key`, in ascending or descending order.
    public init(key: String?, ascending: Bool) {
        self.key = key
        self.ascending = ascending
        self.location = nil
    }

    init(key: String?, ascending: Bool, location: CKLocation?) {
        self.key = key
        self.ascending = ascending
        self.location = location
    }

    /// The same sort in the opposite order.
    public var reversedSortDescriptor: CKSortDescriptor {
        CKSortDescriptor.make(key: key, ascending: !ascending, location: location)
    }

    /// A sort descriptor of the right class for its fields.
    static func make(key: String?, ascending: Bool, location: CKLocation?) -> CKSortDescriptor {
        if let location, let key { return CKLocationSortDescriptor(key: key, relativeLocation: location, ascending: ascending) }
        return CKSortDescriptor(key: key, ascending: ascending, location: location)
    }

    /// The sort descriptor a wire message describes (a `CKLocationSortDescriptor` when it has
    /// a relative location).
    static func fromWire(_ wire: Wire.QuerySortDescriptor) -> CKSortDescriptor {
        make(key: wire.key, ascending: wire.ascending, location: wire.relativeLocation.map(CKLocation.init(wire:)))
    }

    /// The sort descriptor as a wire message; `creationDate` and `modificationDate` may also be
    /// given as `CKRecord.SystemFieldKey` names.
    ///
    /// - throws: `CKError` `.invalidArguments` when the key is missing or not a sortable key.
    package var wireSortDescriptor: Wire.QuerySortDescriptor {
        get throws(CKError) {
            guard let key else { throw CKError(.invalidArguments, message: "a sort descriptor has no key") }
            let canonical: String
            switch PredicateKey.canonical(key) {
            case .success(let name): canonical = name
            case .failure(let problem): throw CKError(.invalidArguments, message: "invalid sort key: \(problem.message)")
            }
            switch PredicateKey.systemKeys[canonical] {
            case .reference?:
                throw CKError(.invalidArguments, message: "cannot sort by \(canonical); sort by a field, creationDate or modificationDate")
            case .date? where location != nil:
                throw CKError(.invalidArguments, message: "a location sort needs a location field, not \(canonical)")
            default:
                break
            }
            return Wire.QuerySortDescriptor(key: canonical, ascending: ascending, relativeLocation: location?.wireLocation)
        }
    }

    public var description: String {
        let order = ascending ? "ascending" : "descending"
        guard let location else { return "(\(key ?? "nil"), \(order))" }
        return "(\(key ?? "nil"), \(order) from \(location))"
    }

    public static func == (lhs: CKSortDescriptor, rhs: CKSortDescriptor) -> Bool {
        lhs.key == rhs.key && lhs.ascending == rhs.ascending && lhs.location == rhs.location
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(key)
        hasher.combine(ascending)
        hasher.combine(location)
    }
}

/// Sorts by distance of a location field from a point (CloudKit's `CKLocationSortDescriptor`):
/// nearest first unless reversed.
///
/// For example:
/// ```swift
/// query.sortDescriptors = [CKLocationSortDescriptor(key: "location", relativeLocation: here)]
/// ```
public final class CKLocationSortDescriptor: CKSortDescriptor, @unchecked Sendable {
    // @unchecked Sendable: restates the superclass's reasoning; this class adds one immutable,
    // Sendable `let`.

    /// The point distances are measured from.
    public let relativeLocation: CKLocation

    /// Sorts by the distance of the location field `key` from `relativeLocation`, nearest first.
    public init(key: String, relativeLocation: CKLocation) {
        self.relativeLocation = relativeLocation
        super.init(key: key, ascending: true, location: relativeLocation)
    }

    init(key: String, relativeLocation: CKLocation, ascending: Bool) {
        self.relativeLocation = relativeLocation
        super.init(key: key, ascending: ascending, location: relativeLocation)
    }
}
