import CirrusWire
import Foundation
import GRDB

extension RecordWriter {
    /// A share save whose checks passed: the `shares` row (its ID when it exists) and the
    /// participants ``applyShare`` writes.
    struct SQLitePreparedShare {
        var existingID: Int64?
        var share: PreparedShare
    }

    /// Runs the checks of saving a share (``ShareRules/prepareShare(_:zoneName:in:stored:zoneHasOtherKind:newRoot:directory:)``)
    /// against the zone's stored shares and fills its server-kept share fields into `record`.
    func prepareShare(_ record: inout Wire.Record, in zone: ZoneRow) throws -> ItemResult<SQLitePreparedShare> {
        let name = record.recordID?.recordName ?? ""
        let isZoneWide = name == ShareRules.zoneShareName
        let existing = try db.row(
            sql: "SELECT id, root_name, token FROM shares WHERE zone_id = ? AND name = ?", arguments: [zone.id, name])
        let existingID: Int64? = existing.map { $0["id"] }
        let otherKind = try db.int64(
            sql: "SELECT 1 FROM shares WHERE zone_id = ? AND name != ? AND ((? AND root_name IS NOT NULL) OR (NOT ? AND root_name IS NULL))",
            arguments: [zone.id, name, isZoneWide, isZoneWide])
        var stored: StoredShare?
        if let existing, let existingID {
            let participants = try db.rows(
                sql: "SELECT participant_id, user, role, permission, status FROM share_participants WHERE share_id = ?",
                arguments: [existingID]
            ).map { row in
                ShareParticipantRow(
                    id: row["participant_id"], user: row["user"], role: Wire.ShareParticipantRole(rawValue: row["role"]),
                    permission: Wire.ShareParticipantPermission(rawValue: row["permission"]),
                    status: Wire.ShareParticipantAcceptanceStatus(rawValue: row["status"]))
            }
            stored = StoredShare(rootName: existing["root_name"], token: existing["token"], participants: participants)
        }
        let db = self.db
        let directory = ShareDirectoryAnswers(
            userExists: { try db.int64(sql: "SELECT 1 FROM users WHERE name = ?", arguments: [$0]) != nil },
            owner: { lookup in
                try String.fetchOne(
                    db, sql: "SELECT user FROM user_lookup WHERE kind = ? AND value = ?",
                    arguments: [lookup.kind.rawValue, lookup.value])
            })
        switch try ShareRules.prepareShare(
            &record, zoneName: zone.name, in: key, stored: stored, zoneHasOtherKind: otherKind != nil,
            newRoot: shareRootsInZone[name], directory: directory)
        {
        case .failure(let failure): return .failure(failure)
        case .success(let share): return .success(SQLitePreparedShare(existingID: existingID, share: share))
        }
    }

    /// The `share` a saved record keeps (``ShareRules/shareReference(for:server:zoneName:in:shareRoots:storedShareExists:)``).
    func shareReference(
        for client: Wire.Record, server: Wire.Record?, in zone: ZoneRow
    ) throws -> ItemResult<Wire.Reference?> {
        let db = self.db
        return try ShareRules.shareReference(
            for: client, server: server, zoneName: zone.name, in: key, shareRoots: shareRootsInZone,
            storedShareExists: { name in
                try db.int64(sql: "SELECT 1 FROM shares WHERE zone_id = ? AND name = ?", arguments: [zone.id, name]) != nil
            })
    }

    /// Writes the `shares` row and the participants of a saved share.
    func applyShare(_ prepared: SQLitePreparedShare, name: String, in zone: ZoneRow) throws {
        let share = prepared.share
        let shareID: Int64
        if let existingID = prepared.existingID {
            shareID = existingID
            try db.run(
                sql: "UPDATE shares SET public_permission = ? WHERE id = ?",
                arguments: [share.publicPermission.rawValue, shareID])
            try db.run(sql: "DELETE FROM share_participants WHERE share_id = ?", arguments: [shareID])
        } else {
            try db.run(
                sql: "INSERT INTO shares (zone_id, name, root_name, token, public_permission) VALUES (?, ?, ?, ?, ?)",
                arguments: [zone.id, name, share.rootName, share.token, share.publicPermission.rawValue])
            shareID = db.lastInsertedRowID
        }
        for participant in share.participants {
            try db.run(
                sql: """
                    INSERT INTO share_participants (share_id, participant_id, user, role, permission, status)
                    VALUES (?, ?, ?, ?, ?, ?)
                    """,
                arguments: [shareID, participant.id, participant.user, participant.role.rawValue,
                            participant.permission.rawValue, participant.status.rawValue])
        }
    }

    /// After the share `name` was deleted: drops its row and participants and, for a hierarchy
    /// share, takes the share off its root (a change of the root, as CloudKit makes it).
    mutating func forgetShare(_ name: String, in zone: ZoneRow) throws {
        guard let row = try db.row(sql: "SELECT id, root_name FROM shares WHERE zone_id = ? AND name = ?", arguments: [zone.id, name])
        else { return }
        try db.run(sql: "DELETE FROM shares WHERE id = ?", arguments: [row["id"] as Int64])
        forgetSharesRead(of: zone.id)
        guard let rootName: String = row["root_name"], let rootRow = try StoreRows.record(db, zoneID: zone.id, name: rootName)
        else { return }
        let root = try rootRow.record()
        guard root.share?.recordID?.recordName == name else { return }
        var unshared = root
        unshared.share = nil
        _ = try apply(
            PreparedSave(
                existing: rootRow, serverRecord: root, record: unshared, assets: [],
                checksums: RecordCodec.assetChecksums(in: unshared)),
            in: zone)
    }

    /// Before the record `row` is deleted: when it is the root of a share, the share goes too
    /// (CloudKit deletes a share with its root).
    mutating func deleteShare(ofRoot row: RecordRow, named name: String, in zone: ZoneRow) throws {
        guard row.recordType != ShareRules.shareType,
            let shareName = try String.fetchOne(
                db, sql: "SELECT name FROM shares WHERE zone_id = ? AND root_name = ?", arguments: [zone.id, name])
        else { return }
        try db.run(sql: "DELETE FROM shares WHERE zone_id = ? AND name = ?", arguments: [zone.id, shareName])
        forgetSharesRead(of: zone.id)
        if let shareRow = try StoreRows.record(db, zoneID: zone.id, name: shareName) {
            try deleteRow(shareRow, zoneID: zone.id, zoneName: zone.name, name: shareName)
        }
    }
}

extension RecordWriter {
    /// Whether the zone `zoneID` has a share (asked once per zone and transaction:
    /// ``WriteTransactionCache/isShared(_:zoneID:)``).
    func isShared(_ zoneID: Int64) throws -> Bool {
        try transaction.isShared(db, zoneID: zoneID)
    }

    /// Fires the subscriptions of the shared databases of the accepted participants of every
    /// shared zone this write changed, each for the changes to records in the shares they
    /// take part in (all of a zone shared whole; in a hierarchy, the records whose parent chain
    /// reaches their share's root, and the records deleted from it); what each subscriber was
    /// notified of. Who takes part is read now, in the write's transaction: a participant
    /// removed before it gets nothing.
    mutating func fireSharedSubscriptions() throws -> [String: [StoredNotification]] {
        guard !changes.isEmpty else { return [:] }
        var changesByUser: [String: [RecordChange]] = [:]
        for zoneID in touchedZones where try isShared(zoneID) {
            let rows = try db.rows(
                sql: """
                    SELECT p.user, s.name AS share_name, z.name AS zone_name FROM share_participants p
                    JOIN shares s ON s.id = p.share_id JOIN zones z ON z.id = s.zone_id
                    WHERE s.zone_id = ? AND p.status = ? AND p.role != ? AND p.user IS NOT NULL
                    """,
                arguments: [zoneID, ShareAcceptanceStatus.accepted.rawValue, ShareRole.owner.rawValue])
            guard let zoneName: String = rows.first?["zone_name"] else { continue }
            var sharesByUser: [String: Set<String>] = [:]
            for row in rows { sharesByUser[row["user"], default: []].insert(row["share_name"]) }
            // Only participants who subscribed in their shared database need to know.
            for user in Array(sharesByUser.keys) where try !hasSharedSubscriptions(user) {
                sharesByUser[user] = nil
            }
            guard !sharesByUser.isEmpty else { continue }
            // The shares each change of the zone is in, worked out once for all participants.
            var inShares: [(change: RecordChange, shares: [String])] = []
            for change in changes where change.zoneName == zoneName {
                let shares: [String]
                if let record = change.new {
                    shares = try sharesReached(from: record, named: change.recordName, zoneID: zoneID)
                } else {
                    shares = deletedFromShares[zoneID]?[change.recordName] ?? []
                }
                if !shares.isEmpty { inShares.append((change, shares)) }
            }
            for (user, changes) in ShareRules.changesByParticipant(inShares, sharesByUser: sharesByUser) {
                changesByUser[user, default: []] += changes
            }
        }
        var notified: [String: [StoredNotification]] = [:]
        for (user, userChanges) in changesByUser.sorted(by: { $0.key < $1.key }) where !userChanges.isEmpty {
            let sharedKey = DatabaseKey.shared(container: key.container, user: user)
            guard let sharedID = try StoreRows.databaseID(db, sharedKey) else { continue }
            let subscriptions = try subscriptionCache.subscriptions(db, databaseID: sharedID, transaction: transaction)
            guard !subscriptions.isEmpty else { continue }
            var notifications = NotificationWriter(db: db, key: sharedKey, now: now)
            try notifications.fire(subscriptions, databaseID: sharedID, records: userChanges, zones: [])
            if notifications.deletedSubscriptions { transaction.subscriptionsChanged(in: sharedID) }
            notified.merge(notifications.notified) { $0 + $1 }
        }
        return notified
    }
}

extension RecordWriter {
    /// Whether `user` has subscriptions in their shared database of this container.
    func hasSharedSubscriptions(_ user: String) throws -> Bool {
        guard let sharedID = try StoreRows.databaseID(db, DatabaseKey.shared(container: key.container, user: user)) else {
            return false
        }
        return try !subscriptionCache.subscriptions(db, databaseID: sharedID, transaction: transaction).isEmpty
    }
}

/// The owner name clients use for themselves (`CKCurrentUserDefaultName`).
enum ZoneOwnerNames {
    static let currentUser = "__defaultOwner__"
}
