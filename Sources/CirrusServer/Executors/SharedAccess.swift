import CirrusStore
import CirrusWire
import Synchronization

/// What a caller reaches through their shared database, decided at the time of each request
/// from the shares they accepted, compiled once per zone (permission, roots, share names). It
/// is kept across requests only while the storage's ``ShareStorage/sharesGeneration`` stays the
/// same, which every change of a share moves in the transaction that makes it — whichever
/// process writes the data directory: a participant removed a moment ago has lost access on
/// their next request, whatever tokens or cursors they hold.
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

    /// What the caller reaches in one zone, compiled once from their shares of it.
    struct ZoneAccess: Sendable {
        /// The caller's shares of the zone, in the order of their shares.
        let shares: [ShareEntry]
        /// The most any of them allows.
        let permission: SharePermission
        /// The record names of the shares whose records the caller may change.
        let writableShares: Set<String>
        let isZoneWide: Bool
        /// The roots of the hierarchy shares.
        let roots: Set<String>
        /// The share records' names.
        let shareNames: Set<String>
    }

    let caller: String
    let container: String
    let shares: [ShareEntry]
    /// Every zone the caller reaches, in the order of their shares.
    let zones: [Zone]
    private let byZone: [Zone: ZoneAccess]

    init(caller: String, container: String, shares: [ShareEntry]) {
        self.caller = caller
        self.container = container
        self.shares = shares
        var zones: [Zone] = []
        var byZone: [Zone: [ShareEntry]] = [:]
        for share in shares {
            let zone = Zone(owner: share.owner, name: share.zoneName)
            if byZone[zone] == nil { zones.append(zone) }
            byZone[zone, default: []].append(share)
        }
        self.zones = zones
        self.byZone = byZone.compactMapValues { shares -> ZoneAccess? in
            guard let permission = shares.compactMap({ $0.acceptedPermission(of: caller) }).max() else { return nil }
            return ZoneAccess(
                shares: shares, permission: permission,
                writableShares: Set(shares.filter { $0.acceptedPermission(of: caller) == .readWrite }.map(\.recordName)),
                isZoneWide: shares.contains(where: \.isZoneWide), roots: Set(shares.compactMap(\.rootRecordName)),
                shareNames: Set(shares.map(\.recordName)))
        }
    }

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

    /// The zone a client names in the shared database; nil for the caller's own (or no) owner.
    func zone(of zoneID: Wire.RecordZoneID?) -> Zone? {
        guard let zoneID, !zoneID.ownerName.isEmpty, zoneID.ownerName != ZoneOwnerMapping.currentUser,
            zoneID.ownerName != caller
        else { return nil }
        return Zone(owner: zoneID.ownerName, name: zoneID.zoneName)
    }

    /// The shares through which the caller reaches `zone` (empty: the zone is not theirs to see).
    func shares(in zone: Zone) -> [ShareEntry] {
        byZone[zone]?.shares ?? []
    }

    /// What the caller may do in `zone`; nil when they may not see it.
    func permission(in zone: Zone) -> SharePermission? {
        byZone[zone]?.permission
    }

    /// The shares of `zone` whose records the caller may change (read-write participant).
    func writableShares(in zone: Zone) -> Set<String> {
        byZone[zone]?.writableShares ?? []
    }

    /// The owner's database holding `zone`.
    func database(of zone: Zone) -> DatabaseKey {
        .private(container: container, user: zone.owner)
    }

    /// Which records of `zone` are shared with the caller.
    func records(in zone: Zone, storage: any RecordStorage) -> SharedRecords {
        let access = byZone[zone]
        return SharedRecords(
            storage: storage, database: database(of: zone),
            zoneID: Wire.RecordZoneID(zoneName: zone.name, ownerName: zone.owner),
            isZoneWide: access?.isZoneWide ?? false, roots: access?.roots ?? [], shareNames: access?.shareNames ?? [])
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
