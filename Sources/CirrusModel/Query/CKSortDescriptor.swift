import CirrusWire
import Foundation

/// One sort key of a query: an `NSSortDescriptor` that names a record field, as CloudKit's
/// `CKQuery.sortDescriptors` expects.
///
/// Code written for CloudKit compiles unchanged: `NSSortDescriptor(key:ascending:)` (which
/// swift-corelibs-foundation lacks, having no key-value coding) is provided for Linux and makes
/// a descriptor a query can read; this class is what `CKQuery.sortDescriptors` holds. The key
/// is a field name or `creationDate` / `modificationDate`.
///
/// For example:
/// ```swift
/// query.sortDescriptors = [NSSortDescriptor(key: "createdAt", ascending: false)]
/// query.sortDescriptors = [CKSortDescriptor(key: "createdAt", ascending: false)]  // the same
/// ```
public class CKSortDescriptor: NSSortDescriptor, NSSecureCoding {
    // Not Sendable: Foundation makes NSSortDescriptor's Sendable conformance unavailable.
    // CKQuery keeps its descriptors behind a lock and never hands them across tasks itself.
    // The class is not final only so that CKLocationSortDescriptor can exist.

    /// Set for a location sort: the point distances are measured from.
    let location: CKLocation?

    /// Sorts by `key`, in ascending or descending order; with a `location`, by the distance of
    /// the location field `key` from it (as ``CKLocationSortDescriptor`` does).
    public init(key: String?, ascending: Bool, location: CKLocation? = nil) {
        self.location = location
        super.init(keyPath: SortFieldKey.keyPath(key), ascending: ascending)
    }

    /// The descriptor a query uses for `descriptor`: itself when it is one, else one with the
    /// field key an `NSSortDescriptor(key:ascending:)` carries (nil for a Swift key path
    /// descriptor, which names no record field; the query then fails with
    /// `CKError(.invalidArguments)`).
    static func forQuery(_ descriptor: NSSortDescriptor) -> CKSortDescriptor {
        if let descriptor = descriptor as? CKSortDescriptor { return descriptor }
        return CKSortDescriptor(key: descriptor.recordFieldKey, ascending: descriptor.ascending, location: nil)
    }

    // MARK: NSSecureCoding

    public class var supportsSecureCoding: Bool { true }

    public func encode(with coder: NSCoder) {
        if let key = recordFieldKey { coder.encode(key as NSString, forKey: "key") }
        coder.encode(self.ascending, forKey: "ascending")
        if let location { coder.encode(Data(location.wireLocation.serializedBytes()) as NSData, forKey: "location") }
    }

    /// The descriptor `encode(with:)` wrote; nil when a location is there but does not decode.
    public required convenience init?(coder: NSCoder) {
        let key = coder.containsValue(forKey: "key") ? coder.decodeObject(of: NSString.self, forKey: "key").map { $0 as String } : nil
        let ascending = coder.decodeBool(forKey: "ascending")
        var location: CKLocation?
        if coder.containsValue(forKey: "location") {
            guard let data = coder.decodeObject(of: NSData.self, forKey: "location") else { return nil }
            guard let wire = try? Wire.Location(serializedBytes: [UInt8](data as Data)) else { return nil }
            location = CKLocation(wire: wire)
        }
        self.init(key: key, ascending: ascending, location: location)
    }

    /// The same sort in the opposite order.
    public override var reversedSortDescriptor: Any {
        CKSortDescriptor.make(key: recordFieldKey, ascending: !ascending, location: location)
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
            guard let key = recordFieldKey, !key.isEmpty else {
                throw CKError(.invalidArguments, message: "a sort descriptor has no field key (make it with NSSortDescriptor(key:ascending:))")
            }
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

    public override var description: String {
        let order = ascending ? "ascending" : "descending"
        guard let location else { return "(\(recordFieldKey ?? "nil"), \(order))" }
        return "(\(recordFieldKey ?? "nil"), \(order) from \(location))"
    }

    public override func isEqual(_ object: Any?) -> Bool {
        guard let other = object as? CKSortDescriptor else { return false }
        return recordFieldKey == other.recordFieldKey && ascending == other.ascending && location == other.location
    }

    public override var hash: Int {
        var hasher = Hasher()
        hasher.combine(recordFieldKey)
        hasher.combine(ascending)
        hasher.combine(location)
        return hasher.finalize()
    }
}

/// Sorts by distance of a location field from a point (CloudKit's `CKLocationSortDescriptor`):
/// nearest first unless reversed.
///
/// For example:
/// ```swift
/// query.sortDescriptors = [CKLocationSortDescriptor(key: "location", relativeLocation: here)]
/// ```
public final class CKLocationSortDescriptor: CKSortDescriptor {

    /// The point distances are measured from.
    public var relativeLocation: CKLocation { self.location ?? CKLocation(latitude: 0, longitude: 0) }

    /// Sorts by the distance of the location field `key` from `relativeLocation`, nearest first.
    public convenience init(key: String, relativeLocation: CKLocation) {
        self.init(key: key, relativeLocation: relativeLocation, ascending: true)
    }

    init(key: String, relativeLocation: CKLocation, ascending: Bool) {
        super.init(key: key, ascending: ascending, location: relativeLocation)
    }

    /// Always made with a location; `CKSortDescriptor.make` picks this class for one.
    override init(key: String?, ascending: Bool, location: CKLocation? = nil) {
        super.init(key: key, ascending: ascending, location: location)
    }
}

/// The root of the key paths that carry a record field key in an `NSSortDescriptor` (on Linux,
/// swift-corelibs-foundation stores only Swift key paths): the key path's subscript argument is
/// the field key, and reading through it gives the key back.
struct SortFieldKey: Sendable {
    subscript(fieldKey key: String) -> String { key }

    /// The key path for `key`; nil is stored as the empty string, which no field has.
    static func keyPath(_ key: String?) -> KeyPath<SortFieldKey, String> { \SortFieldKey.[fieldKey: key ?? ""] }
}

#if !canImport(Darwin)
extension NSSortDescriptor {
    /// A descriptor that sorts query results by the record field `key` (CloudKit's use of
    /// `NSSortDescriptor(key:ascending:)`, which swift-corelibs-foundation does not have).
    ///
    /// For example:
    /// ```swift
    /// query.sortDescriptors = [NSSortDescriptor(key: "createdAt", ascending: false)]
    /// ```
    public convenience init(key: String?, ascending: Bool) {
        self.init(keyPath: SortFieldKey.keyPath(key), ascending: ascending)
    }
}
#endif

extension NSSortDescriptor {
    /// The record field key of a descriptor made with `init(key:ascending:)`; nil for one made
    /// from another Swift key path. (Foundation's `key` is unavailable on Linux, and a property
    /// of that name here trips the compiler's module deserialization; hence the other name.)
    public var recordFieldKey: String? {
        guard let path = self.keyPath as? KeyPath<SortFieldKey, String> else { return nil }
        let key = SortFieldKey()[keyPath: path]
        return key.isEmpty ? nil : key
    }
}
