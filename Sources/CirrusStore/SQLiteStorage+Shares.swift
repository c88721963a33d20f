import CirrusWire
import Foundation
import GRDB

extension SQLiteStorage: ShareStorage {
    public func share(withToken token: String, in container: String) async throws -> ShareEntry? {
        try await read { db in try Self.shareRow(db, where: "s.token = ? AND d.container = ?", [token, container]).first?.entry }
    }

    public func acceptShare(withToken token: String, in container: String, by user: String) async throws -> ShareEntry? {
        guard !user.isEmpty else { throw StoreError(.invalidArguments, "no user record name") }
        let now = clock()
        let cache = subscriptionCache
        let transaction = writer.transactionCache
        return try await write(weight: 1, sharesCache: true) { db -> ShareEntry? in
            guard let found = try Self.shareRow(db, where: "s.token = ? AND d.container = ?", [token, container]).first
            else { return nil }
            let (acceptance, unchanged) = ShareMembership.acceptance(of: found.entry, by: user)
            guard let acceptance else { return unchanged ? found.entry : nil }
            let participant = acceptance.participant
            if acceptance.isNew {
                try db.run(
                    sql: """
                        INSERT INTO share_participants (share_id, participant_id, user, role, permission, status)
                        VALUES (?, ?, ?, ?, ?, ?)
                        """,
                    arguments: [found.id, participant.id, user, participant.role.rawValue, participant.permission.rawValue,
                                participant.status.rawValue])
            } else {
                try db.run(
                    sql: "UPDATE share_participants SET status = ? WHERE share_id = ? AND participant_id = ?",
                    arguments: [ShareAcceptanceStatus.accepted.rawValue, found.id, participant.id])
            }
            // The share record lists its participants: it changes with the acceptance.
            try Self.rewriteShareRecord(found.entry, db: db, now: now, by: user, cache: cache, transaction: transaction) { fields in
                ShareMembership.accept(acceptance, in: &fields)
            }
            return try Self.shareRow(db, where: "s.id = ?", [found.id]).first?.entry
        }
    }

    public func leaveShare(
        _ shareRecordName: String, inZone zoneName: String, of owner: String, in container: String, by user: String
    ) async throws -> Bool {
        guard !user.isEmpty, user != owner else { return false }
        let now = clock()
        let cache = subscriptionCache
        let transaction = writer.transactionCache
        return try await write(weight: 1, sharesCache: true) { db -> Bool in
            guard let found = try Self.shareRow(
                db, where: "d.container = ? AND d.scope = ? AND d.owner = ? AND z.name = ? AND s.name = ?",
                [container, Wire.DatabaseScope.private.rawValue, owner, zoneName, shareRecordName]
            ).first, let participant = ShareMembership.leaving(found.entry, by: user)
            else { return false }
            try db.run(
                sql: "UPDATE share_participants SET status = ? WHERE share_id = ? AND participant_id = ?",
                arguments: [ShareAcceptanceStatus.removed.rawValue, found.id, participant.participantID])
            try Self.rewriteShareRecord(found.entry, db: db, now: now, by: user, cache: cache, transaction: transaction) { fields in
                ShareMembership.leave(participant.participantID, in: &fields)
            }
            return true
        }
    }

    /// Saves the share record of `share` again with `change` made to its share fields (a new
    /// change tag, `user` its last modifier), in the caller's transaction.
    private static func rewriteShareRecord(
        _ share: ShareEntry, db: Database, now: Wire.Timestamp, by user: String, cache: SubscriptionCache,
        transaction: WriteTransactionCache, _ change: (inout Wire.ShareFields) -> Void
    ) throws {
        let key = DatabaseKey.private(container: share.container, user: share.owner)
        var writer = try RecordWriter(db: db, key: key, user: user, now: now, subscriptions: cache, transaction: transaction)
        guard let zone = try StoreRows.liveZone(db, writer.databaseID, share.zoneName),
            let row = try StoreRows.record(db, zoneID: zone.id, name: share.recordName)
        else { return }
        let stored = try row.record()
        var record = stored
        var fields = record.shareFields ?? Wire.ShareFields()
        change(&fields)
        record.shareFields = fields
        _ = try writer.apply(
            RecordWriter.PreparedSave(
                existing: row, serverRecord: stored, record: record, assets: [],
                checksums: RecordCodec.assetChecksums(in: record)),
            in: zone)
        for zoneID in writer.touchedZones { transaction.touch(zoneID, of: writer.databaseID) }
    }

    public func acceptedShares(of user: String, in container: String) async throws -> [ShareEntry] {
        try await read { db in
            try Self.shareRow(
                db,
                where: """
                    d.container = ? AND s.id IN (SELECT share_id FROM share_participants
                        WHERE user = ? AND status = ? AND role != ?)
                    """,
                [container, user, ShareAcceptanceStatus.accepted.rawValue, ShareRole.owner.rawValue]
            ).map(\.entry)
        }
    }

    public var sharesGeneration: UInt64? { shareGeneration.current }

    public func sharesOfDeletedRecords(
        _ names: [String], inZone zoneName: String, of owner: String, in container: String
    ) async throws -> [String: Set<String>] {
        try checkItemCount(names.count)
        guard !names.isEmpty else { return [:] }
        return try await read { db in
            guard let databaseID = try StoreRows.databaseID(db, .private(container: container, user: owner)),
                let zone = try StoreRows.liveZone(db, databaseID, zoneName)
            else { return [:] }
            let placeholders = Array(repeating: "?", count: names.count).joined(separator: ", ")
            var values: [(any DatabaseValueConvertible)?] = [zone.id]
            values += names.map { $0 }
            let rows = try db.rows(
                sql: "SELECT name, shared_by FROM tombstones WHERE zone_id = ? AND name IN (\(placeholders))",
                arguments: StatementArguments(values))
            var shares: [String: Set<String>] = [:]
            for row in rows {
                let sharedBy: String? = row["shared_by"]
                shares[row["name"]] = Set(sharedBy.map { $0.split(separator: "\n").map(String.init) } ?? [])
            }
            return shares
        }
    }

    public func shares(inZone zoneName: String, of owner: String, in container: String) async throws -> [ShareEntry] {
        try await read { db in
            try Self.shareRow(
                db, where: "d.container = ? AND d.scope = ? AND d.owner = ? AND z.name = ?",
                [container, Wire.DatabaseScope.private.rawValue, owner, zoneName]
            ).map(\.entry)
        }
    }

    public func shareableUsers(matching lookups: [UserLookup]) async throws -> [String?] {
        try checkItemCount(lookups.count)
        return try await read { db in
            try lookups.map { lookup -> String? in
                let name: String?
                switch lookup {
                case .userRecordName(let user): name = user
                case .email(let text): name = try UserLookup.normalizedEmail(text).flatMap { try Self.lookupOwner(.email, $0, db) }
                case .phone(let text): name = try UserLookup.normalizedPhone(text).flatMap { try Self.lookupOwner(.phone, $0, db) }
                }
                guard let name, let user = try Self.directoryUser(name, db), !user.isDisabled else { return nil }
                return user.name
            }
        }
    }

    /// The shares of live zones matching `condition` (over `shares s`, `zones z`, `databases d`),
    /// each with its row ID and participants.
    private static func shareRow(
        _ db: Database, where condition: String, _ arguments: StatementArguments
    ) throws -> [(id: Int64, entry: ShareEntry)] {
        let rows = try db.rows(
            sql: """
                SELECT s.id, s.name, s.root_name, s.public_permission, z.name AS zone_name, d.owner, d.container
                FROM shares s JOIN zones z ON z.id = s.zone_id JOIN databases d ON d.id = z.database_id
                WHERE z.deleted_at IS NULL AND \(condition)
                ORDER BY s.id
                """,
            arguments: arguments)
        return try rows.map { row in
            let id: Int64 = row["id"]
            let participants = try db.rows(
                sql: """
                    SELECT participant_id, user, role, permission, status FROM share_participants
                    WHERE share_id = ? ORDER BY role != \(ShareRole.owner.rawValue), participant_id
                    """,
                arguments: [id]
            ).map { participant in
                ShareParticipantRow(
                    id: participant["participant_id"], user: participant["user"],
                    role: Wire.ShareParticipantRole(rawValue: participant["role"]),
                    permission: Wire.ShareParticipantPermission(rawValue: participant["permission"]),
                    status: Wire.ShareParticipantAcceptanceStatus(rawValue: participant["status"])
                ).entry
            }
            let entry = ShareEntry(
                container: row["container"], owner: row["owner"], zoneName: row["zone_name"], recordName: row["name"],
                rootRecordName: row["root_name"],
                publicPermission: SharePermission(rawValue: row["public_permission"]) ?? .none,
                participants: participants)
            return (id, entry)
        }
    }
}
