import CirrusWire
import GRDB

extension RecordWriter {
    /// The shares of the zone `zoneID`, read once per write.
    mutating func zoneShares(_ zoneID: Int64) throws -> ZoneShares {
        if let known = zoneShares[zoneID] { return known }
        var shares = ZoneShares()
        if try isShared(zoneID) {
            shares = ZoneShares(
                try db.rows(sql: "SELECT name, root_name FROM shares WHERE zone_id = ?", arguments: [zoneID]).map {
                    (name: $0["name"], rootName: $0["root_name"])
                })
        }
        zoneShares[zoneID] = shares
        return shares
    }

    /// After a share of `zoneID` was saved or deleted: its shares are read again when next asked.
    mutating func forgetSharesRead(of zoneID: Int64) {
        zoneShares[zoneID] = nil
        transaction.sharesChanged(in: zoneID)
    }

    /// The shares the record `row` (named `name`) is in as it is deleted, for its tombstone
    /// (see ``sharesReached(from:named:zoneID:)``). Remembered for records deleted after it in
    /// the same write, and for the subscriptions of the participants.
    mutating func sharesHolding(_ row: RecordRow, named name: String, zoneID: Int64) throws -> [String] {
        let holding = try sharesReached(recordType: row.recordType, named: name, zoneID: zoneID) { try row.record() }
        deletedFromShares[zoneID, default: [:]][name] = holding
        return holding
    }

    /// The shares `record` (named `name`, in the zone `zoneID` as this write left it) is in
    /// (``SharesReached``).
    mutating func sharesReached(from record: Wire.Record, named name: String, zoneID: Int64) throws -> [String] {
        try sharesReached(recordType: record.recordType, named: name, zoneID: zoneID) { record }
    }

    private mutating func sharesReached(
        recordType: String, named name: String, zoneID: Int64, record: () throws -> Wire.Record
    ) throws -> [String] {
        var walk = try SharesReached(
            recordType: recordType, name: name, shares: try zoneShares(zoneID), deleted: deletedFromShares[zoneID] ?? [:],
            record: record)
        while let parent = walk.parentToRead {
            walk.read(try StoreRows.record(db, zoneID: zoneID, name: parent)?.record())
        }
        return walk.holding
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
        return allowed.isDisjoint(with: shares) ? ShareRules.notInScope(name) : nil
    }
}
