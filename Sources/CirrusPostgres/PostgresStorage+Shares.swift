public import CirrusStore
import CirrusWire
import Foundation
import Logging
import PostgresNIO

extension PostgresStorage: ShareStorage {
    /// The share whose URL carries `token` in `container`; nil when there is none.
    ///
    /// - throws: ``StoreError``.
    public func share(withToken token: String, in container: String) async throws -> ShareEntry? {
        let logger = self.logger
        return try await snapshot { connection in
            try await Self.share(withToken: token, in: container, connection, logger)?.entry
        }
    }

    /// Makes `user` an accepted participant of the share whose URL carries `token`, as
    /// ``ShareStorage`` describes, in one transaction under the owner's database's row lock:
    /// nodes accepting, leaving or saving the same share at once take turns, each seeing what
    /// the one before committed.
    ///
    /// - throws: ``StoreError`` `.invalidArguments` without a user.
    public func acceptShare(withToken token: String, in container: String, by user: String) async throws -> ShareEntry? {
        guard !user.isEmpty else { throw StoreError(.invalidArguments, "no user record name") }
        let logger = self.logger
        // Where the share lives, to lock its database; read again under the lock.
        guard let located = try await share(withToken: token, in: container) else { return nil }
        let now = clock()
        let cache = subscriptionCache
        let key = DatabaseKey.private(container: container, user: located.owner)
        return try await write(in: key, weight: 1) { connection -> ShareEntry? in
            guard let found = try await Self.share(withToken: token, in: container, connection, logger), found.key == key
            else { return nil }
            let (acceptance, unchanged) = ShareMembership.acceptance(of: found.entry, by: user)
            guard let acceptance else { return unchanged ? found.entry : nil }
            try await PostgresShareRows.setParticipant(acceptance.participant, of: found, connection, logger)
            // The share record lists its participants: it changes with the acceptance.
            let writer = PostgresRecordWriter(
                connection: connection, key: key, user: user, now: now, logger: logger, subscriptionCache: cache)
            try await writer.rewriteShareRecord(found.entry) { ShareMembership.accept(acceptance, in: &$0) }
            return try await Self.share(withToken: token, in: container, connection, logger)?.entry
        }
    }

    /// Takes `user` out of the share `shareRecordName` in `zoneName` of `owner`'s private
    /// database, as ``ShareStorage`` describes, under the owner's database's row lock.
    ///
    /// - throws: ``StoreError``.
    public func leaveShare(
        _ shareRecordName: String, inZone zoneName: String, of owner: String, in container: String, by user: String
    ) async throws -> Bool {
        guard !user.isEmpty, user != owner else { return false }
        let key = DatabaseKey.private(container: container, user: owner)
        let now = clock()
        let logger = self.logger
        let cache = subscriptionCache
        return try await write(in: key, weight: 1) { connection -> Bool in
            var bindings = PostgresRows.binds(key, zoneName)
            bindings.append(shareRecordName)
            guard
                let found = try await PostgresShareRows.find(
                    where: "s.container = $1 AND s.owner = $2 AND s.scope = $3 AND z.name = $4 AND s.name = $5", bindings,
                    connection, logger
                ).first,
                let participant = ShareMembership.leaving(found.entry, by: user)
            else { return false }
            let left = ShareParticipantRow(
                id: participant.participantID, user: participant.user,
                role: Wire.ShareParticipantRole(rawValue: participant.role.rawValue),
                permission: Wire.ShareParticipantPermission(rawValue: participant.permission.rawValue), status: .removed)
            try await PostgresShareRows.setParticipant(left, of: found, connection, logger)
            let writer = PostgresRecordWriter(
                connection: connection, key: key, user: user, now: now, logger: logger, subscriptionCache: cache)
            try await writer.rewriteShareRecord(found.entry) { ShareMembership.leave(participant.participantID, in: &$0) }
            return true
        }
    }

    /// Every share of `container` in which `user` is an accepted participant (not the owner).
    ///
    /// - throws: ``StoreError``.
    public func acceptedShares(of user: String, in container: String) async throws -> [ShareEntry] {
        let logger = self.logger
        var bindings = PostgresBindings(capacity: 4)
        bindings.append(container)
        bindings.append(user)
        bindings.append(ShareAcceptanceStatus.accepted.rawValue)
        bindings.append(ShareRole.owner.rawValue)
        return try await snapshot { [bindings] connection in
            try await PostgresShareRows.find(
                where: """
                    s.container = $1 AND (s.owner, s.scope, s.zone_id, s.name) IN (
                        SELECT owner, scope, zone_id, share_name FROM share_participants
                        WHERE container = $1 AND user_name = $2 AND status = $3 AND role != $4)
                    """, bindings, connection, logger
            ).map(\.entry)
        }
    }

    /// None: every access check reads the shares afresh (``acceptedShares(of:in:)``).
    ///
    /// A generation kept in the database cannot be read here without a round trip (this is
    /// not `async`), and one kept in memory, moved by the `NOTIFY` of another node's change,
    /// would lag that change by the notification's way, or forever when it is lost: a
    /// participant removed on one node would keep their access on another in between. With
    /// none, a revocation committed on any node holds on every node from the next request on,
    /// at the cost of one read of the caller's shares per shared-database request.
    public var sharesGeneration: UInt64? { nil }

    /// The shares each of the deleted records `names` of the zone `zoneName` in `owner`'s
    /// private database was in when it was deleted, as its tombstone keeps them.
    ///
    /// - throws: ``StoreError`` `.limitExceeded` for more names than one request may carry.
    public func sharesOfDeletedRecords(
        _ names: [String], inZone zoneName: String, of owner: String, in container: String
    ) async throws -> [String: Set<String>] {
        try checkItemCount(names.count)
        guard !names.isEmpty else { return [:] }
        let key = DatabaseKey.private(container: container, user: owner)
        let logger = self.logger
        return try await snapshot { connection in
            guard let zone = try await PostgresRows.liveZone(connection, key, zoneName, logger) else { return [:] }
            var bindings = PostgresRows.binds(key, zone.id)
            bindings.append(names)
            let rows = try await connection.query(
                PostgresQuery(
                    unsafeSQL: """
                        SELECT name, shared_by FROM tombstones
                        WHERE container = $1 AND owner = $2 AND scope = $3 AND zone_id = $4 AND name = ANY($5)
                        """,
                    binds: bindings), logger: logger)
            var shares: [String: Set<String>] = [:]
            for try await (name, sharedBy) in rows.decode((String, [String]?).self) { shares[name] = Set(sharedBy ?? []) }
            return shares
        }
    }

    /// The shares of the zone `zoneName` of `owner`'s private database.
    ///
    /// - throws: ``StoreError``.
    public func shares(inZone zoneName: String, of owner: String, in container: String) async throws -> [ShareEntry] {
        let key = DatabaseKey.private(container: container, user: owner)
        let logger = self.logger
        return try await snapshot { connection in
            try await PostgresShareRows.find(
                where: "s.container = $1 AND s.owner = $2 AND s.scope = $3 AND z.name = $4", PostgresRows.binds(key, zoneName),
                connection, logger
            ).map(\.entry)
        }
    }

    /// The user each lookup names, for inviting them to a share: any enabled user of the
    /// directory, discoverable or not; nil for a lookup that names nobody.
    ///
    /// - throws: ``StoreError`` `.limitExceeded` for more lookups than one request may carry.
    public func shareableUsers(matching lookups: [UserLookup]) async throws -> [String?] {
        try checkItemCount(lookups.count)
        let logger = self.logger
        return try await snapshot { connection in
            var answers: [String?] = []
            for lookup in lookups {
                let name = try await Self.userName(of: lookup, connection, logger)
                guard let name, let user = try await Self.directoryUsers([name], connection, logger).first, !user.isDisabled
                else {
                    answers.append(nil)
                    continue
                }
                answers.append(user.name)
            }
            return answers
        }
    }

    /// The share of a live zone whose URL carries `token` in `container`.
    private static func share(
        withToken token: String, in container: String, _ connection: PostgresConnection, _ logger: Logger
    ) async throws -> PostgresShareRows.Found? {
        var bindings = PostgresBindings(capacity: 2)
        bindings.append(token)
        bindings.append(container)
        return try await PostgresShareRows.find(where: "s.token = $1 AND s.container = $2", bindings, connection, logger).first
    }
}

extension PostgresRecordWriter {
    /// Saves the share record of `share` again with `change` made to its share fields (a new
    /// change tag, the writer's user its last modifier), in the writer's transaction.
    func rewriteShareRecord(_ share: ShareEntry, _ change: (inout Wire.ShareFields) -> Void) async throws {
        guard
            let (zone, rows, _, _) = try await PostgresRows.liveZoneAndRecords(
                connection, key, share.zoneName, names: [share.recordName], logger),
            let row = rows[share.recordName]
        else { return }
        let stored = try row.record()
        var record = stored
        var fields = record.shareFields ?? Wire.ShareFields()
        change(&fields)
        record.shareFields = fields
        _ = try await apply(
            [
                .save(
                    PreparedSave(
                        index: 0, existing: row, serverRecord: stored, record: record, assets: [],
                        checksums: RecordCodec.assetChecksums(in: record)))
            ], in: zone,
            clientChangeToken: nil, matching: SubscriptionSet())
    }
}
