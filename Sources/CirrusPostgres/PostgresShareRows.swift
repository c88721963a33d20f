import CirrusStore
import CirrusWire
import Foundation
import Logging
import PostgresNIO

/// The reads and writes of the share rows (`shares`, `share_participants`, schema v8) that
/// ``PostgresStorage``'s ``ShareStorage`` calls and the record writer share.
enum PostgresShareRows {
    /// A share of a live zone as stored, with its participants (the owner first).
    struct Found {
        var key: DatabaseKey
        var zoneID: Int64
        var token: String
        var entry: ShareEntry
    }

    /// The shares of live zones matching `condition` (over `shares s` and `zones z`, its
    /// parameters bound by `bindings`), in the order they were first saved, each with its
    /// participants: the owner first, then by participant ID.
    static func find(
        where condition: String, _ bindings: PostgresBindings, _ connection: PostgresConnection, _ logger: Logger
    ) async throws -> [Found] {
        let rows = try await connection.query(
            PostgresQuery(
                unsafeSQL: """
                    SELECT s.container, s.owner, s.scope, s.zone_id, z.name, s.name, s.root_name, s.token,
                        s.public_permission, p.participant_id, p.user_name, p.role, p.permission, p.status
                    FROM shares s
                    JOIN zones z ON z.container = s.container AND z.owner = s.owner AND z.scope = s.scope
                        AND z.id = s.zone_id
                    LEFT JOIN share_participants p ON p.container = s.container AND p.owner = s.owner
                        AND p.scope = s.scope AND p.zone_id = s.zone_id AND p.share_name = s.name
                    WHERE z.deleted_at IS NULL AND \(condition)
                    ORDER BY s.id, p.role != \(ShareRole.owner.rawValue), p.participant_id
                    """,
                binds: bindings), logger: logger)
        var found: [Found] = []
        for try await row in rows.decode(
            (
                String, String, Int32, Int64, String, String, String?, String, Int32, String?, String?, Int32?, Int32?,
                Int32?
            ).self)
        {
            let (container, owner, scope, zoneID, zoneName, name, rootName, token, publicPermission) =
                (row.0, row.1, row.2, row.3, row.4, row.5, row.6, row.7, row.8)
            if found.last.map({
                $0.key.container != container || $0.key.owner != owner || $0.zoneID != zoneID
                    || $0.entry.recordName != name
            }) ?? true {
                let key = DatabaseKey(container: container, scope: Wire.DatabaseScope(rawValue: scope), owner: owner)
                found.append(
                    Found(
                        key: key, zoneID: zoneID, token: token,
                        entry: ShareEntry(
                            container: container, owner: owner, zoneName: zoneName, recordName: name,
                            rootRecordName: rootName, publicPermission: SharePermission(rawValue: publicPermission) ?? .none,
                            participants: [])))
            }
            if let participantID = row.9, let role = row.11, let permission = row.12, let status = row.13 {
                let participant = ShareParticipantRow(
                    id: participantID, user: row.10, role: Wire.ShareParticipantRole(rawValue: role),
                    permission: Wire.ShareParticipantPermission(rawValue: permission),
                    status: Wire.ShareParticipantAcceptanceStatus(rawValue: status))
                found[found.count - 1].entry.participants.append(participant.entry)
            }
        }
        return found
    }

    /// The shares of a zone, by name (its root's name, nil for a zone-wide share).
    static func zoneShares(
        _ connection: PostgresConnection, _ key: DatabaseKey, zoneID: Int64, _ logger: Logger
    ) async throws -> [(name: String, rootName: String?, token: String)] {
        let rows = try await connection.query(
            PostgresQuery(
                unsafeSQL: """
                    SELECT name, root_name, token FROM shares
                    WHERE container = $1 AND owner = $2 AND scope = $3 AND zone_id = $4 ORDER BY id
                    """,
                binds: PostgresRows.binds(key, zoneID)), logger: logger)
        var shares: [(name: String, rootName: String?, token: String)] = []
        for try await row in rows.decode((String, String?, String).self) { shares.append(row) }
        return shares
    }

    /// The participants of the share `name` of a zone, as stored.
    static func participants(
        _ connection: PostgresConnection, _ key: DatabaseKey, zoneID: Int64, share name: String, _ logger: Logger
    ) async throws -> [ShareParticipantRow] {
        var bindings = PostgresRows.binds(key, zoneID)
        bindings.append(name)
        let rows = try await connection.query(
            PostgresQuery(
                unsafeSQL: """
                    SELECT participant_id, user_name, role, permission, status FROM share_participants
                    WHERE container = $1 AND owner = $2 AND scope = $3 AND zone_id = $4 AND share_name = $5
                    """,
                binds: bindings), logger: logger)
        var participants: [ShareParticipantRow] = []
        for try await (id, user, role, permission, status) in rows.decode((String, String?, Int32, Int32, Int32).self) {
            participants.append(
                ShareParticipantRow(
                    id: id, user: user, role: Wire.ShareParticipantRole(rawValue: role),
                    permission: Wire.ShareParticipantPermission(rawValue: permission),
                    status: Wire.ShareParticipantAcceptanceStatus(rawValue: status)))
        }
        return participants
    }

    /// Writes the row and the participants of a saved share (replacing those it had).
    static func write(
        _ share: PreparedShare, name: String, _ connection: PostgresConnection, _ key: DatabaseKey, zoneID: Int64,
        _ logger: Logger
    ) async throws {
        var bindings = PostgresRows.binds(key, zoneID)
        bindings.append(name)
        bindings.append(share.rootName)
        bindings.append(share.token)
        bindings.append(share.publicPermission.rawValue)
        try await connection.query(
            PostgresQuery(
                unsafeSQL: """
                    INSERT INTO shares (container, owner, scope, zone_id, name, root_name, token, public_permission)
                    VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
                    ON CONFLICT (container, owner, scope, zone_id, name) DO UPDATE SET
                        public_permission = excluded.public_permission
                    """,
                binds: bindings), logger: logger)
        var participants = PostgresRows.binds(key, zoneID)
        participants.append(name)
        participants.append(share.participants.map(\.id))
        participants.append(share.participants.map { $0.user ?? "" })
        participants.append(share.participants.map(\.role.rawValue))
        participants.append(share.participants.map(\.permission.rawValue))
        participants.append(share.participants.map(\.status.rawValue))
        try await connection.query(
            PostgresQuery(
                unsafeSQL: """
                    WITH dropped AS (
                        DELETE FROM share_participants
                        WHERE container = $1 AND owner = $2 AND scope = $3 AND zone_id = $4 AND share_name = $5
                            AND NOT (participant_id = ANY($6))
                    )
                    INSERT INTO share_participants (container, owner, scope, zone_id, share_name, participant_id,
                        user_name, role, permission, status)
                    SELECT $1, $2, $3, $4, $5, id, nullif(user_name, ''), role, permission, status
                    FROM unnest($6::text[], $7::text[], $8::integer[], $9::integer[], $10::integer[])
                        AS p (id, user_name, role, permission, status)
                    ON CONFLICT (container, owner, scope, zone_id, share_name, participant_id) DO UPDATE SET
                        user_name = excluded.user_name, role = excluded.role, permission = excluded.permission,
                        status = excluded.status
                    """,
                binds: participants), logger: logger)
    }

    /// Deletes the share `name` of a zone with its participants; its root's name (nil for a
    /// zone-wide share), or nil twice when there was no such share.
    static func delete(
        _ name: String, _ connection: PostgresConnection, _ key: DatabaseKey, zoneID: Int64, _ logger: Logger
    ) async throws -> (deleted: Bool, rootName: String?) {
        var bindings = PostgresRows.binds(key, zoneID)
        bindings.append(name)
        let rows = try await connection.query(
            PostgresQuery(
                unsafeSQL: """
                    DELETE FROM shares WHERE container = $1 AND owner = $2 AND scope = $3 AND zone_id = $4 AND name = $5
                    RETURNING root_name
                    """,
                binds: bindings), logger: logger)
        for try await root in rows.decode(String?.self) { return (true, root) }
        return (false, nil)
    }

    /// Sets the status of one participant of a share, or adds them (a public user joining).
    static func setParticipant(
        _ participant: ShareParticipantRow, of found: Found, _ connection: PostgresConnection, _ logger: Logger
    ) async throws {
        var bindings = PostgresRows.binds(found.key, found.zoneID)
        bindings.append(found.entry.recordName)
        bindings.append(participant.id)
        bindings.append(participant.user)
        bindings.append(participant.role.rawValue)
        bindings.append(participant.permission.rawValue)
        bindings.append(participant.status.rawValue)
        try await connection.query(
            PostgresQuery(
                unsafeSQL: """
                    INSERT INTO share_participants (container, owner, scope, zone_id, share_name, participant_id,
                        user_name, role, permission, status)
                    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
                    ON CONFLICT (container, owner, scope, zone_id, share_name, participant_id) DO UPDATE SET
                        status = excluded.status
                    """,
                binds: bindings), logger: logger)
    }

    /// The directory's answers for the participants of a share record, read in two statements.
    static func directoryAnswers(
        for participants: [Wire.ShareParticipant], _ connection: PostgresConnection, _ logger: Logger
    ) async throws -> ShareDirectoryAnswers {
        let questions = ShareDirectoryAnswers.questions(in: participants)
        var known = Set<String>()
        if !questions.names.isEmpty {
            let rows = try await connection.query(
                "SELECT name FROM users WHERE name = ANY(\(questions.names))", logger: logger)
            for try await name in rows.decode(String.self) { known.insert(name) }
        }
        var owners: [String: String] = [:]
        if !questions.lookups.isEmpty {
            let kinds = questions.lookups.map(\.kind.rawValue)
            let values = questions.lookups.map(\.value)
            let rows = try await connection.query(
                """
                SELECT l.kind, l.value, l.user_name FROM user_lookup l
                JOIN unnest(\(kinds)::integer[], \(values)::text[]) AS q (kind, value)
                    ON l.kind = q.kind AND l.value = q.value
                """, logger: logger)
            for try await (kind, value, user) in rows.decode((Int, String, String).self) { owners["\(kind):\(value)"] = user }
        }
        return ShareDirectoryAnswers(
            userExists: { known.contains($0) }, owner: { owners["\($0.kind.rawValue):\($0.value)"] })
    }

    /// The name of the zone-wide share of each live zone of a database that has one, by zone name.
    static func zoneWideShares(
        _ connection: PostgresConnection, _ key: DatabaseKey, _ logger: Logger
    ) async throws -> [String: String] {
        guard key.scope == .private else { return [:] }
        let rows = try await connection.query(
            PostgresQuery(
                unsafeSQL: """
                    SELECT z.name, s.name FROM shares s
                    JOIN zones z ON z.container = s.container AND z.owner = s.owner AND z.scope = s.scope
                        AND z.id = s.zone_id
                    WHERE s.container = $1 AND s.owner = $2 AND s.scope = $3 AND s.root_name IS NULL
                        AND z.deleted_at IS NULL
                    """,
                binds: PostgresRows.binds(key)), logger: logger)
        var shares: [String: String] = [:]
        for try await (zone, share) in rows.decode((String, String).self) { shares[zone] = share }
        return shares
    }

    /// `zone` as clients see it, with its zone-wide share when it has one (`CKRecordZone.share`).
    static func zone(_ zone: Wire.RecordZone, sharedBy share: String?) -> Wire.RecordZone {
        guard let share, let zoneID = zone.zoneID else { return zone }
        var shared = zone
        shared.share = Wire.Reference(recordID: Wire.RecordID(recordName: share, zoneID: zoneID), action: .none)
        return shared
    }
}
