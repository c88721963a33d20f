import CirrusStore
import CirrusWire

/// Which records of one shared zone the caller may see: all of a zone shared whole; in a zone
/// shared by hierarchy, the share records and the records whose parent chain reaches a root.
struct SharedRecords: Sendable {
    /// How far up a parent chain is followed before a record counts as not shared.
    static let maximumDepth = 64

    let storage: any RecordStorage
    let database: DatabaseKey
    let zoneID: Wire.RecordZoneID
    let isZoneWide: Bool
    let roots: Set<String>
    let shareNames: Set<String>

    /// Which of `records` are shared with the caller, in their order: each by its own parent
    /// chain. A record is decided without a read when it is a root or a share, or its parent
    /// is a root; the parents further up are read a level at a time, one read for every
    /// chain that needs one, and a parent among `records` themselves is not read again.
    ///
    /// Chains are followed by name: no record is copied (a fetch of 100 records whose parent
    /// is the root spent about 60 µs copying and releasing them in tuples before).
    func shared(_ records: [Wire.Record]) async throws -> [Bool] {
        if isZoneWide { return Array(repeating: true, count: records.count) }
        var decided = [Bool](repeating: false, count: records.count)
        // The chains still open: which record, and the name of the parent it has climbed to.
        var climbing: [(index: Int, parent: String)] = []
        for index in records.indices {
            switch self.decide(records[index]) {
            case .shared: decided[index] = true
            case .notShared: break
            case .climb(let parent): climbing.append((index, parent))
            }
        }
        // The parents read so far (and `records` themselves), by name: made only once a chain
        // climbs past a root's child.
        var parents: [String: Step] = [:]
        if !climbing.isEmpty {
            for record in records {
                if let name = record.recordID?.recordName, parents[name] == nil { parents[name] = self.decide(record) }
            }
        }
        for _ in 1..<Self.maximumDepth where !climbing.isEmpty {
            let unread = Set(climbing.lazy.map(\.parent).filter { parents[$0] == nil })
            if !unread.isEmpty {
                for (name, record) in try await self.records(named: Array(unread)) { parents[name] = self.decide(record) }
            }
            // A parent that does not exist ends its chain: not shared.
            climbing = climbing.compactMap { index, parent in
                switch parents[parent] {
                case .shared?:
                    decided[index] = true
                    return nil
                case .climb(let grandparent)?: return (index, grandparent)
                case .notShared?, nil: return nil
                }
            }
        }
        return decided
    }

    /// What one record's own fields decide.
    private enum Step {
        case shared, notShared
        /// Decided by the parent of this name.
        case climb(String)
    }

    private func decide(_ record: Wire.Record) -> Step {
        let name = record.recordID?.recordName ?? ""
        if roots.contains(name) || shareNames.contains(name) { return .shared }
        guard let parent = record.parent?.recordID?.recordName else { return .notShared }
        return roots.contains(parent) ? .shared : .climb(parent)
    }

    /// The records of the zone named `names` that exist (system fields only), read together
    /// (a read per ``StorageExecutor/maximumItems``, the most a storage takes at once).
    func records(named names: [String]) async throws -> [String: Wire.Record] {
        var found: [String: Wire.Record] = [:]
        for start in stride(from: 0, to: names.count, by: StorageExecutor.maximumItems) {
            let chunk = names[start..<min(start + StorageExecutor.maximumItems, names.count)]
            let fetched = try await storage.fetchRecords(
                chunk.map { Wire.RecordID(recordName: $0, zoneID: zoneID) }, desiredKeys: [], in: database)
            for outcome in fetched {
                if case .success(let record) = outcome.result, let name = record.recordID?.recordName { found[name] = record }
            }
        }
        return found
    }
}
