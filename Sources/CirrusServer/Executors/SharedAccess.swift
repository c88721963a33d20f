import CirrusStore
import CirrusWire
import Synchronization

/// What a caller reaches through their shared database, decided at the time of each request
/// from the shares they accepted. It is kept across requests only while the storage's
/// ``ShareStorage/sharesGeneration`` stays the same, which every change of a share moves before
/// the write returns: a participant removed a moment ago has lost access on their next
/// request, whatever tokens or cursors they hold.
///
/// A zone of another user appears in the caller's shared database while the caller is an
/// accepted participant of a share in it. In a zone shared whole, every record is shared; in a
/// zone shared by hierarchy, a record is shared when its `parent` chain reaches a share's root,
/// and each share record is visible to its participants. A zone, or a record, the caller may
/// not see answers exactly as one that does not exist.
struct SharedAccess: Sendable {
    /// A zone of another user's private database.
    struct Zone: Hashable, Sendable {
        var owner: String
        var name: String
    }

    let caller: String
    let container: String
    let shares: [ShareEntry]

    /// The caller's access now: from `cache` while no share changed since it was compiled,
    /// else read from `storage` (and kept in `cache`).
    static func load(
        _ storage: any RecordStorage, caller: String, container: String, cache: SharedAccessCache
    ) async throws -> SharedAccess {
        // The generation is read before the shares: a change committed in between moves it,
        // so what is kept below is never taken for newer than it is.
        let generation = storage.sharesGeneration
        let key = SharedAccessCache.Key(caller: caller, container: container)
        if let generation, let access = cache.access(key, generation: generation) { return access }
        let access = SharedAccess(
            caller: caller, container: container, shares: try await storage.acceptedShares(of: caller, in: container))
        if let generation { cache.keep(access, key, generation: generation) }
        return access
    }

    /// Every zone the caller reaches, in the order of their shares.
    var zones: [Zone] {
        var seen = Set<Zone>()
        return shares.map { Zone(owner: $0.owner, name: $0.zoneName) }.filter { seen.insert($0).inserted }
    }

    /// The zone a client names in the shared database; nil for the caller's own (or no) owner.
    func zone(of zoneID: Wire.RecordZoneID?) -> Zone? {
        guard let zoneID, !zoneID.ownerName.isEmpty, zoneID.ownerName != ZoneOwnerMapping.currentUser,
            zoneID.ownerName != caller
        else { return nil }
        return Zone(owner: zoneID.ownerName, name: zoneID.zoneName)
    }

    /// The shares through which the caller reaches `zone` (empty: the zone is not theirs to see).
    func shares(in zone: Zone) -> [ShareEntry] {
        shares.filter { $0.owner == zone.owner && $0.zoneName == zone.name }
    }

    /// What the caller may do in `zone`; nil when they may not see it.
    func permission(in zone: Zone) -> SharePermission? {
        shares(in: zone).compactMap { $0.acceptedPermission(of: caller) }.max()
    }

    /// The shares of `zone` whose records the caller may change (read-write participant).
    func writableShares(in zone: Zone) -> Set<String> {
        Set(shares(in: zone).filter { $0.acceptedPermission(of: caller) == .readWrite }.map(\.recordName))
    }

    /// The owner's database holding `zone`.
    func database(of zone: Zone) -> DatabaseKey {
        .private(container: container, user: zone.owner)
    }

    /// Which records of `zone` are shared with the caller.
    func records(in zone: Zone, storage: any RecordStorage) -> SharedRecords {
        let shares = self.shares(in: zone)
        return SharedRecords(
            storage: storage, database: database(of: zone),
            zoneID: Wire.RecordZoneID(zoneName: zone.name, ownerName: zone.owner),
            isZoneWide: shares.contains(where: \.isZoneWide),
            roots: Set(shares.compactMap(\.rootRecordName)), shareNames: Set(shares.map(\.recordName)))
    }
}

/// Compiled ``SharedAccess`` per caller and container, each valid for one shares generation.
/// Bounded: when full it starts over.
final class SharedAccessCache: Sendable {
    struct Key: Hashable, Sendable {
        var caller: String
        var container: String
    }

    /// The most callers kept at once.
    static let capacity = 4_096

    private let entries = Mutex<[Key: (generation: UInt64, access: SharedAccess)]>([:])

    /// The access kept for `key` if it was compiled at `generation`.
    func access(_ key: Key, generation: UInt64) -> SharedAccess? {
        entries.withLock { entries in
            guard let entry = entries[key], entry.generation == generation else { return nil }
            return entry.access
        }
    }

    func keep(_ access: SharedAccess, _ key: Key, generation: UInt64) {
        entries.withLock { entries in
            if entries.count >= Self.capacity && entries[key] == nil { entries.removeAll(keepingCapacity: true) }
            entries[key] = (generation, access)
        }
    }
}

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

    /// Whether `record` (as the store has it) is shared with the caller.
    func contains(_ record: Wire.Record) async throws -> Bool {
        if isZoneWide { return true }
        var current = record
        for _ in 0..<Self.maximumDepth {
            let name = current.recordID?.recordName ?? ""
            if roots.contains(name) || shareNames.contains(name) { return true }
            guard let parent = current.parent?.recordID?.recordName else { return false }
            // A parent that is a root needs no read.
            if roots.contains(parent) { return true }
            guard let stored = try await self.record(named: parent) else { return false }
            current = stored
        }
        return false
    }

    /// Whether the stored record `name` is shared with the caller (false when it does not exist).
    func contains(name: String) async throws -> Bool {
        if isZoneWide || roots.contains(name) || shareNames.contains(name) { return true }
        guard let record = try await self.record(named: name) else { return false }
        return try await contains(record)
    }

    /// A record of the zone with its system fields only; nil when it does not exist.
    func record(named name: String) async throws -> Wire.Record? {
        try await records(named: [name])[name]
    }

    /// The records of the zone named `names` that exist (system fields only), read at once.
    func records(named names: [String]) async throws -> [String: Wire.Record] {
        guard !names.isEmpty else { return [:] }
        let fetched = try await storage.fetchRecords(
            names.map { Wire.RecordID(recordName: $0, zoneID: zoneID) }, desiredKeys: [], in: database)
        var found: [String: Wire.Record] = [:]
        for outcome in fetched {
            if case .success(let record) = outcome.result, let name = record.recordID?.recordName { found[name] = record }
        }
        return found
    }
}
