import CirrusWire
import GRDB

/// The shares of one zone, as a write reads them (``RecordWriter/zoneShares(_:)``).
struct ZoneShares {
    /// The name of the zone-wide share; nil when the zone is shared by hierarchy (or not at all).
    var zoneWide: String?
    /// The share of each root of a hierarchy share, by the root's name.
    var byRoot: [String: String] = [:]

    var isEmpty: Bool { zoneWide == nil && byRoot.isEmpty }
}

extension RecordWriter {
    /// How far up a parent chain a deletion looks for the roots of shares.
    static let maximumShareDepth = 64

    /// The shares of the zone `zoneID`, read once per write.
    mutating func zoneShares(_ zoneID: Int64) throws -> ZoneShares {
        if let known = zoneShares[zoneID] { return known }
        var shares = ZoneShares()
        if try isShared(zoneID) {
            for row in try db.rows(sql: "SELECT name, root_name FROM shares WHERE zone_id = ?", arguments: [zoneID]) {
                let name: String = row["name"]
                if let root: String = row["root_name"] {
                    shares.byRoot[root] = name
                } else {
                    shares.zoneWide = name
                }
            }
        }
        zoneShares[zoneID] = shares
        return shares
    }

    /// After a share of `zoneID` was saved or deleted: its shares are read again when next asked.
    mutating func forgetSharesRead(of zoneID: Int64) {
        zoneShares[zoneID] = nil
        sharedZones[zoneID] = nil
    }

    /// The shares the record `row` (named `name`) is in as it is deleted, for its tombstone
    /// (see ``sharesReached(from:named:zoneID:)``). Remembered for records deleted after it in
    /// the same write, and for the subscriptions of the participants.
    mutating func sharesHolding(_ row: RecordRow, named name: String, zoneID: Int64) throws -> [String] {
        let shares = try zoneShares(zoneID)
        var holding: [String] = []
        if row.recordType == ShareRules.shareType {
            holding = [name]
        } else if let zoneWide = shares.zoneWide {
            holding = [zoneWide]
        } else if !shares.byRoot.isEmpty {
            holding = try sharesReached(from: row.record(), named: name, zoneID: zoneID)
        }
        deletedFromShares[zoneID, default: [:]][name] = holding
        return holding
    }

    /// The shares `record` (named `name`, in the zone `zoneID` as this write left it) is in:
    /// the zone-wide share; or the share of every root its parent chain reaches (a parent
    /// deleted earlier in this write counts with the shares it was in); a share record is in
    /// its own share.
    mutating func sharesReached(from record: Wire.Record, named name: String, zoneID: Int64) throws -> [String] {
        if record.recordType == ShareRules.shareType { return [name] }
        let shares = try zoneShares(zoneID)
        if let zoneWide = shares.zoneWide { return [zoneWide] }
        guard !shares.byRoot.isEmpty else { return [] }
        var holding: [String] = []
        var current = record
        var currentName = name
        for _ in 0..<Self.maximumShareDepth {
            if let share = shares.byRoot[currentName], !holding.contains(share) { holding.append(share) }
            guard let parent = current.parent?.recordID?.recordName else { break }
            if let stored = try StoreRows.record(db, zoneID: zoneID, name: parent) {
                current = try stored.record()
                currentName = parent
            } else {
                for share in deletedFromShares[zoneID]?[parent] ?? [] where !holding.contains(share) {
                    holding.append(share)
                }
                break
            }
        }
        return holding
    }

    /// The refusal of a participant's write of a record that is not in a share they may change
    /// (the same whether it exists or not).
    static func notInScope(_ name: String) -> ItemFailure {
        ItemFailure(.permissionFailure, "record \(name) is not part of a share you may change")
    }

    /// Why a participant writing through their shared database (``sharedScope``) may not save
    /// or delete `client` (`existing`, its stored row): the record as stored, or a new one by
    /// its parent chain, is in none of the shares they may change. Nil for the owner's writes.
    mutating func sharedScopeRefusal(_ client: Wire.Record, existing: RecordRow?, in zone: ZoneRow) throws -> ItemFailure? {
        guard let sharedScope else { return nil }
        let name = client.recordID?.recordName ?? ""
        let allowed = sharedScope[zone.name] ?? []
        let record = try existing?.record() ?? client
        let shares = try sharesReached(from: record, named: name, zoneID: zone.id)
        return allowed.isDisjoint(with: shares) ? Self.notInScope(name) : nil
    }
}
