import CirrusWire
import Foundation
import GRDB

extension RecordWriter {
    /// A share save whose checks passed: the `shares` row and participants ``applyShare`` writes.
    struct PreparedShare {
        var existingID: Int64?
        /// The root record of a hierarchy share; nil for a zone-wide share.
        var rootName: String?
        var token: String
        var publicPermission: Wire.ShareParticipantPermission
        var participants: [Participant]
    }

    /// One participant as the store keeps it.
    struct Participant {
        var id: String
        /// The user record name; nil while an invitation names someone the directory does not know.
        var user: String?
        var role: Wire.ShareParticipantRole
        var permission: Wire.ShareParticipantPermission
        var status: Wire.ShareParticipantAcceptanceStatus
        var identity: Wire.UserIdentity

        var wire: Wire.ShareParticipant {
            Wire.ShareParticipant(
                participantID: id, userIdentity: identity, role: role, acceptanceStatus: status, permission: permission)
        }
    }

    /// Runs the checks of saving a share (``ShareRules/checkPlacement(of:zoneName:in:)`` ran
    /// before) and fills its server-kept share fields into `record`: the participants with
    /// their IDs and statuses, the owner, the public permission and the URL.
    ///
    /// A new hierarchy share needs its root in the same request; a root already shared by
    /// another share, or a zone that mixes zone-wide and hierarchy sharing, is `alreadyShared`.
    func prepareShare(_ record: inout Wire.Record, in zone: ZoneRow) throws -> ItemResult<PreparedShare> {
        let name = record.recordID?.recordName ?? ""
        let isZoneWide = name == ShareRules.zoneShareName
        let existing = try db.row(
            sql: "SELECT id, root_name, token FROM shares WHERE zone_id = ? AND name = ?", arguments: [zone.id, name])
        let existingID: Int64? = existing.map { $0["id"] }
        let otherKind = try db.int64(
            sql: "SELECT 1 FROM shares WHERE zone_id = ? AND name != ? AND ((? AND root_name IS NOT NULL) OR (NOT ? AND root_name IS NULL))",
            arguments: [zone.id, name, isZoneWide, isZoneWide])
        if otherKind != nil {
            return .failure(ItemFailure(
                .alreadyShared,
                isZoneWide
                    ? "zone \(zone.name) already has hierarchy shares; a zone is shared either whole or by hierarchy"
                    : "zone \(zone.name) is shared as a whole; a record in it cannot have a share of its own"))
        }
        var rootName: String?
        if !isZoneWide {
            if let existing {
                rootName = existing["root_name"] as String?
            } else if let root = shareRootsInZone[name] {
                rootName = root
            } else {
                return .failure(ItemFailure(
                    .invalidArguments,
                    "share \(name): a new share is saved with its root record in the same operation (the root's share names it)"))
            }
        }
        var previous: [Participant] = []
        if let existingID {
            previous = try db.rows(
                sql: "SELECT participant_id, user, role, permission, status FROM share_participants WHERE share_id = ?",
                arguments: [existingID]
            ).map { row in
                Participant(
                    id: row["participant_id"], user: row["user"], role: Wire.ShareParticipantRole(rawValue: row["role"]),
                    permission: Wire.ShareParticipantPermission(rawValue: row["permission"]),
                    status: Wire.ShareParticipantAcceptanceStatus(rawValue: row["status"]), identity: Wire.UserIdentity())
            }
        }
        let fields = record.shareFields ?? Wire.ShareFields()
        let participants: [Participant]
        switch try self.participants(fields.participants, previous: previous, share: name) {
        case .failure(let failure): return .failure(failure)
        case .success(let list): participants = list
        }
        let token: String = existing.map { $0["token"] } ?? ShareRules.newToken()
        let publicPermission: Wire.ShareParticipantPermission =
            switch fields.publicPermission {
            case .readOnly, .readWrite: fields.publicPermission
            default: .none
            }
        record.shareFields = Wire.ShareFields(
            participants: participants.map(\.wire), publicPermission: publicPermission,
            owner: participants.first?.wire, currentUserParticipant: nil,
            url: ShareRules.urlPath(container: key.container, token: token))
        return .success(PreparedShare(
            existingID: existingID, rootName: rootName, token: token, publicPermission: publicPermission,
            participants: participants))
    }

    /// The participants to keep: the owner (the database's owner) first, then everyone the
    /// client listed, each resolved to a user where the directory knows them, keeping the ID
    /// and acceptance of a participant already in the share; newcomers are pending.
    private func participants(
        _ requested: [Wire.ShareParticipant], previous: [Participant], share name: String
    ) throws -> ItemResult<[Participant]> {
        let previousOwner = previous.first { $0.role == .owner }
        var result = [
            Participant(
                id: previousOwner?.id ?? UUID().uuidString, user: key.owner, role: .owner, permission: .readWrite,
                status: .accepted, identity: Wire.UserIdentity(
                    userRecordID: ZoneResolution.userRecordID(key.owner), hasIcloudAccount: true))
        ]
        for participant in requested {
            let recordName = participant.userIdentity?.userRecordID?.recordName
            if participant.role == .owner || recordName == key.owner || recordName == ZoneOwnerNames.currentUser {
                continue
            }
            let user = try self.user(of: participant)
            let match = previous.first { old in
                (!participant.participantID.isEmpty && old.id == participant.participantID)
                    || (user != nil && old.user == user)
            }
            if user == nil && match == nil && participant.userIdentity?.lookupInfo == nil {
                return .failure(ItemFailure(
                    .invalidArguments, "share \(name): a participant names no user record ID, email address or phone number"))
            }
            if result.contains(where: { ($0.user != nil && $0.user == user) || (match != nil && $0.id == match?.id) }) {
                continue
            }
            var identity = participant.userIdentity ?? Wire.UserIdentity()
            identity.userRecordID = (user ?? match?.user).map(ZoneResolution.userRecordID)
            identity.hasIcloudAccount = (user ?? match?.user) != nil
            identity.contactIdentifiers = []
            let permission: Wire.ShareParticipantPermission =
                participant.permission == .readWrite ? .readWrite : .readOnly
            // One who left stays removed (the owner removes them from the list and adds them
            // again to invite them again).
            let status: Wire.ShareParticipantAcceptanceStatus = match?.status ?? .pending
            result.append(Participant(
                id: match?.id ?? UUID().uuidString, user: user ?? match?.user,
                role: match?.role == .publicUser ? .publicUser : .privateUser, permission: permission, status: status,
                identity: identity))
        }
        guard result.count <= ShareRules.maximumParticipants else {
            return .failure(ItemFailure(
                .tooManyParticipants,
                "share \(name) has \(result.count) participants; a share has at most \(ShareRules.maximumParticipants)"))
        }
        return .success(result)
    }

    /// The user a participant names: its user record ID, or the owner of its email address or
    /// phone number in the directory; nil when the directory knows no such user.
    private func user(of participant: Wire.ShareParticipant) throws -> String? {
        if let name = participant.userIdentity?.userRecordID?.recordName, UserLookup.isValidUserRecordName(name) {
            return try db.int64(sql: "SELECT 1 FROM users WHERE name = ?", arguments: [name]) != nil ? name : nil
        }
        guard let info = participant.userIdentity?.lookupInfo else { return nil }
        if let name = info.userRecordID?.recordName, UserLookup.isValidUserRecordName(name) {
            return try db.int64(sql: "SELECT 1 FROM users WHERE name = ?", arguments: [name]) != nil ? name : nil
        }
        if let email = UserLookup.normalizedEmail(info.emailAddress) {
            return try String.fetchOne(
                db, sql: "SELECT user FROM user_lookup WHERE kind = 1 AND value = ?", arguments: [email])
        }
        if let phone = UserLookup.normalizedPhone(info.phoneNumber) {
            return try String.fetchOne(
                db, sql: "SELECT user FROM user_lookup WHERE kind = 2 AND value = ?", arguments: [phone])
        }
        return nil
    }

    /// The `share` a saved record keeps: what the server has, unless the request also saves
    /// the share the client names and names this record its root (a new share). A record whose
    /// stored share still exists cannot become the root of another: `alreadyShared`.
    func shareReference(
        for client: Wire.Record, server: Wire.Record?, in zone: ZoneRow
    ) throws -> ItemResult<Wire.Reference?> {
        let name = client.recordID?.recordName ?? ""
        let current = server?.share?.recordID?.recordName
        guard let requested = client.share?.recordID?.recordName, requested != current,
            shareRootsInZone[requested] == name
        else {
            return .success(server?.share)
        }
        if let current,
            try db.int64(sql: "SELECT 1 FROM shares WHERE zone_id = ? AND name = ?", arguments: [zone.id, current]) != nil
        {
            return .failure(ItemFailure(.alreadyShared, "record \(name) is already the root of share \(current)"))
        }
        return .success(Wire.Reference(
            recordID: Wire.RecordID(recordName: requested, zoneID: ZoneResolution.zoneID(zone.name, in: key)),
            action: .none))
    }

    /// Writes the `shares` row and the participants of a saved share.
    func applyShare(_ share: PreparedShare, name: String, in zone: ZoneRow) throws {
        let shareID: Int64
        if let existingID = share.existingID {
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
    /// Whether the zone `zoneID` has a share (asked once per zone and write).
    mutating func isShared(_ zoneID: Int64) throws -> Bool {
        if let known = sharedZones[zoneID] { return known }
        let read = try RawStatement(db, sql: "SELECT 1 FROM shares WHERE zone_id = ? LIMIT 1")
        read.bind(1, zoneID)
        let shared = try read.int64() != nil
        sharedZones[zoneID] = shared
        return shared
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
            for (user, shares) in sharesByUser {
                changesByUser[user, default: []] += inShares.filter { !shares.isDisjoint(with: $0.shares) }.map(\.change)
            }
        }
        var notified: [String: [StoredNotification]] = [:]
        for (user, userChanges) in changesByUser.sorted(by: { $0.key < $1.key }) where !userChanges.isEmpty {
            let sharedKey = DatabaseKey.shared(container: key.container, user: user)
            guard let sharedID = try StoreRows.databaseID(db, sharedKey) else { continue }
            let subscriptions = try subscriptionCache.subscriptions(db, databaseID: sharedID)
            guard !subscriptions.isEmpty else { continue }
            var notifications = NotificationWriter(db: db, key: sharedKey, now: now)
            try notifications.fire(subscriptions, databaseID: sharedID, records: userChanges, zones: [])
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
        return try !subscriptionCache.subscriptions(db, databaseID: sharedID).isEmpty
    }
}

/// The owner name clients use for themselves (`CKCurrentUserDefaultName`).
enum ZoneOwnerNames {
    static let currentUser = "__defaultOwner__"
}
