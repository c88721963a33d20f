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
    func shared(_ records: [Wire.Record]) async throws -> [Bool] {
        if isZoneWide { return Array(repeating: true, count: records.count) }
        var decided = [Bool](repeating: false, count: records.count)
        // The chains still open: which record, and where its chain has got to.
        var open = records.enumerated().map { (index: $0.offset, current: $0.element) }
        // The records by name, as parents; made only once a chain climbs past a root's child.
        var known: [String: Wire.Record]?
        for _ in 0..<Self.maximumDepth where !open.isEmpty {
            var climbing: [(index: Int, parent: String)] = []
            for (index, current) in open {
                let name = current.recordID?.recordName ?? ""
                if roots.contains(name) || shareNames.contains(name) {
                    decided[index] = true
                } else if let parent = current.parent?.recordID?.recordName {
                    if roots.contains(parent) {
                        decided[index] = true
                    } else {
                        climbing.append((index, parent))
                    }
                }
            }
            guard !climbing.isEmpty else { break }
            var parents = known ?? Self.byName(records)
            let unread = Set(climbing.map(\.parent).filter { parents[$0] == nil })
            if !unread.isEmpty {
                for (name, record) in try await self.records(named: Array(unread)) { parents[name] = record }
            }
            known = parents
            // A parent that does not exist ends its chain: not shared.
            open = climbing.compactMap { index, parent in parents[parent].map { (index: index, current: $0) } }
        }
        return decided
    }

    static func byName(_ records: [Wire.Record]) -> [String: Wire.Record] {
        var byName: [String: Wire.Record] = [:]
        for record in records {
            if let name = record.recordID?.recordName, byName[name] == nil { byName[name] = record }
        }
        return byName
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
