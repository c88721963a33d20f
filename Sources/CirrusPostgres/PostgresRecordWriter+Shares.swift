import CirrusStore
import CirrusWire
import Foundation
import Logging
import PostgresNIO

/// What one record write found and did of shares: each zone's shares (read once, read again
/// after a share of the zone changed), the shares each record it deleted was in, the zones it
/// wrote, and the shares a participant writing through their shared database may change.
///
/// Not `Sendable`: one write's task owns it, from its first statement to its commit.
final class PostgresShareState {
    /// The shares a participant writing through their shared database may change, by zone
    /// (``RecordModification/sharedScope``); nil for the owner's own writes.
    var sharedScope: [String: Set<String>]?
    /// The shares each record this write deleted was in, by zone and name (a record deleted
    /// after its parent in the same write was in the parent's shares).
    var deletedFromShares: [Int64: [String: [String]]] = [:]
    /// The zones written (their participants' subscriptions may fire), by ID.
    var touched: [Int64: String] = [:]
    private var zoneShares: [Int64: ZoneShares] = [:]

    /// The shares of the zone `zoneID`, read once per write (until ``forget(_:)``).
    func zoneShares(
        _ zoneID: Int64, _ connection: PostgresConnection, _ key: DatabaseKey, _ logger: Logger
    ) async throws -> ZoneShares {
        if let known = zoneShares[zoneID] { return known }
        let rows = try await PostgresShareRows.zoneShares(connection, key, zoneID: zoneID, logger)
        let shares = ZoneShares(rows.map { (name: $0.name, rootName: $0.rootName) })
        zoneShares[zoneID] = shares
        return shares
    }

    /// The zone `zoneID` has no share (read with its records).
    func knowUnshared(_ zoneID: Int64) {
        zoneShares[zoneID] = ZoneShares()
    }

    /// After a share of `zoneID` was saved or deleted: its shares are read again when next asked.
    func forget(_ zoneID: Int64) {
        zoneShares[zoneID] = nil
    }

    /// What a rolled-back zone of an atomic request undoes.
    struct Mark {
        fileprivate var deletedFromShares: [Int64: [String: [String]]]
        fileprivate var touched: [Int64: String]
    }

    var mark: Mark { Mark(deletedFromShares: deletedFromShares, touched: touched) }

    func restore(_ mark: Mark, zoneID: Int64) {
        deletedFromShares = mark.deletedFromShares
        touched = mark.touched
        zoneShares[zoneID] = nil
    }
}

extension PostgresRecordWriter {
    /// What the items of a zone written one at a time did: each item's outcome (the record as
    /// stored for a save, nil for a deletion), the records deletions cascaded to and the changes.
    struct OneByOne {
        var outcomes: [(Item, ItemResult<Wire.Record?>)] = []
        var cascaded: [Wire.RecordID] = []
        var changes: [RecordChange] = []
    }

    /// Writes the items of a zone one at a time, as the SQLite engine does, each checked against
    /// the zone as the items before it left it: the way of a zone with shares, a request saving
    /// shares, and a participant's write through their shared database, whose checks follow
    /// parent chains and shares the items before may have changed. An atomic zone runs in a
    /// savepoint, rolled back when an item fails. `arrived` is the asset content earlier saves
    /// of the request brought (see ``checkAssets(_:_:arrived:)``); it gains this zone's.
    func modifyOneByOne(
        _ group: RecordModificationPlan.Group, of request: RecordModification, in zone: PostgresZoneRow,
        matching subscriptions: SubscriptionSet, arrived: inout Set<[UInt8]>
    ) async throws -> OneByOne {
        let token = request.clientChangeToken.isEmpty ? nil : Data(request.clientChangeToken)
        if request.isAtomic { try await connection.query("SAVEPOINT shared_zone", logger: logger) }
        let mark = shares.mark
        let arrivedBefore = arrived
        var done = OneByOne()
        var failed = false
        for entry in group.items {
            let outcome: ItemResult<Wire.Record?>
            if let problem = entry.problem {
                outcome = .failure(problem)
            } else {
                outcome = try await perform(
                    entry.item, of: group, policy: request.savePolicy, clientChangeToken: token, matching: subscriptions,
                    arrived: &arrived, &done)
            }
            if case .failure = outcome { failed = true }
            done.outcomes.append((entry.item, outcome))
        }
        guard request.isAtomic else { return done }
        guard failed else {
            try await connection.query("RELEASE SAVEPOINT shared_zone", logger: logger)
            return done
        }
        try await connection.query("ROLLBACK TO SAVEPOINT shared_zone", logger: logger)
        try await connection.query("RELEASE SAVEPOINT shared_zone", logger: logger)
        shares.restore(mark, zoneID: zone.id)
        arrived = arrivedBefore
        let failure = RecordCodec.error(.batchRequestFailed, "another item of zone \(zone.name) failed")
        let outcomes = done.outcomes.map { item, outcome -> (Item, ItemResult<Wire.Record?>) in
            if case .failure = outcome { return (item, outcome) }
            return (item, .failure(failure))
        }
        return OneByOne(outcomes: outcomes)
    }

    /// Checks and writes one item against the zone as it is now.
    private func perform(
        _ item: Item, of group: RecordModificationPlan.Group, policy: Wire.SavePolicy, clientChangeToken token: Data?,
        matching subscriptions: SubscriptionSet, arrived: inout Set<[UInt8]>, _ done: inout OneByOne
    ) async throws -> ItemResult<Wire.Record?> {
        let name: String
        switch item {
        case .save(_, let record): name = record.recordID?.recordName ?? ""
        case .delete(_, let recordID): name = recordID.recordName
        }
        guard
            let (zone, rows, _, _) = try await PostgresRows.liveZoneAndRecords(
                connection, key, group.zoneName, names: [name], logger)
        else {
            return .failure(RecordCodec.error(.zoneNotFound, "zone \(group.zoneName) does not exist"))
        }
        let existing = rows[name]
        switch item {
        case .save(let index, let client):
            if let refusal = try await sharedScopeRefusal(client, existing: existing, in: zone) { return .failure(refusal) }
            let prepared: PreparedSave
            switch try await checkSave(client, index: index, existing: existing, of: group, in: zone, policy: policy) {
            case .failure(let failure): return .failure(failure)
            case .success(let save): prepared = save
            }
            var writes = [Write.save(prepared)]
            var failures: [(Item, ItemFailure)] = []
            try await checkDeleteSelfTargets(&writes, &failures, of: group, in: zone, existing: rows)
            if let (_, failure) = failures.first { return .failure(failure) }
            try await checkAssets(&writes, &failures, arrived: arrived)
            if let (_, failure) = failures.first { return .failure(failure) }
            if let share = prepared.share {
                // Before the record: its change is then one of a shared zone's.
                try await PostgresShareRows.write(share, name: name, connection, key, zoneID: zone.id, logger)
                shares.forget(zone.id)
            }
            let written = try await apply(writes, in: zone, clientChangeToken: token, matching: subscriptions)
            arrived.formUnion(prepared.assets.map(\.sha256))
            done.changes += written.changes
            return .success(written.saved.first?.1)
        case .delete(let index, _):
            if let refusal = rules.deletionRefusal(name, zoneName: zone.name) { return .failure(refusal) }
            if shares.sharedScope != nil {
                // A participant deletes records of their shares only; one that does not exist is
                // refused alike.
                guard let existing else { return .failure(ShareRules.notInScope(name)) }
                if let refusal = try await sharedScopeRefusal(existing.record(), existing: existing, in: zone) {
                    return .failure(refusal)
                }
            }
            guard let existing else { return .success(nil) }
            if let refusal = rules.ownershipRefusal(name, existing: existing) { return .failure(refusal) }
            let written = try await apply(
                [.delete(index: index, name: name, existing: existing)], in: zone, clientChangeToken: token,
                matching: subscriptions)
            done.cascaded += written.cascaded
            done.changes += written.changes
            if existing.recordType == ShareRules.shareType {
                try await forgetShare(name, in: zone, matching: subscriptions, &done)
            } else {
                try await deleteShare(ofRoot: existing, named: name, in: zone, matching: subscriptions, &done)
            }
            return .success(nil)
        }
    }

    /// Runs every check of a save against the zone as it is now, a share's and a share root's
    /// included (``ShareRules/prepareShare(_:zoneName:in:stored:zoneHasOtherKind:newRoot:directory:)``).
    private func checkSave(
        _ client: Wire.Record, index: Int, existing: PostgresRecordRow?, of group: RecordModificationPlan.Group,
        in zone: PostgresZoneRow, policy: Wire.SavePolicy
    ) async throws -> ItemResult<PreparedSave> {
        let checked: RecordRules.CheckedSave
        switch try rules.checkSave(client, existing: existing, zoneName: zone.name, policy: policy, decode: { try $0.record() }) {
        case .failure(let failure): return .failure(failure)
        case .success(let save): checked = save
        }
        var record = checked.record
        var share: PreparedShare?
        if record.recordType == ShareRules.shareType {
            let name = checked.name
            let isZoneWide = name == ShareRules.zoneShareName
            let stored = try await PostgresShareRows.zoneShares(connection, key, zoneID: zone.id, logger)
            let otherKind = stored.contains { $0.name != name && (isZoneWide ? $0.rootName != nil : $0.rootName == nil) }
            var storedShare: StoredShare?
            if let mine = stored.first(where: { $0.name == name }) {
                let participants = try await PostgresShareRows.participants(
                    connection, key, zoneID: zone.id, share: name, logger)
                storedShare = StoredShare(rootName: mine.rootName, token: mine.token, participants: participants)
            }
            let directory = try await PostgresShareRows.directoryAnswers(
                for: record.shareFields?.participants ?? [], connection, logger)
            switch try ShareRules.prepareShare(
                &record, zoneName: zone.name, in: key, stored: storedShare, zoneHasOtherKind: otherKind,
                newRoot: group.shareRoots[name], directory: directory)
            {
            case .failure(let failure): return .failure(failure)
            case .success(let prepared): share = prepared
            }
        } else {
            let zoneShares = try await shares.zoneShares(zone.id, connection, key, logger)
            let reference = try ShareRules.shareReference(
                for: client, server: checked.serverRecord, zoneName: zone.name, in: key, shareRoots: group.shareRoots,
                storedShareExists: { zoneShares.zoneWide == $0 || zoneShares.byRoot.values.contains($0) })
            switch reference {
            case .failure(let failure): return .failure(failure)
            case .success(let reference): record.share = reference
            }
        }
        let assets: [RecordCodec.AssetContent]
        switch RecordCodec.extractAssets(&record) {
        case .failure(let failure): return .failure(failure)
        case .success(let contents): assets = contents
        }
        return .success(
            PreparedSave(
                index: index, existing: existing, serverRecord: checked.serverRecord, record: record, share: share,
                assets: assets, checksums: RecordCodec.assetChecksums(in: record)))
    }

    /// After the share `name` was deleted: drops its row and participants and, for a hierarchy
    /// share, takes the share off its root (a change of the root, as CloudKit makes it).
    private func forgetShare(
        _ name: String, in zone: PostgresZoneRow, matching subscriptions: SubscriptionSet, _ done: inout OneByOne
    ) async throws {
        let (deleted, rootName) = try await PostgresShareRows.delete(name, connection, key, zoneID: zone.id, logger)
        guard deleted else { return }
        shares.forget(zone.id)
        guard let rootName,
            let (current, rows, _, _) = try await PostgresRows.liveZoneAndRecords(
                connection, key, zone.name, names: [rootName], logger),
            let rootRow = rows[rootName]
        else { return }
        let root = try rootRow.record()
        guard root.share?.recordID?.recordName == name else { return }
        var unshared = root
        unshared.share = nil
        let written = try await apply(
            [
                .save(
                    PreparedSave(
                        index: 0, existing: rootRow, serverRecord: root, record: unshared, assets: [],
                        checksums: RecordCodec.assetChecksums(in: unshared)))
            ], in: current,
            clientChangeToken: nil, matching: subscriptions)
        done.changes += written.changes
    }

    /// After the record `row` was deleted: when it is the root of a share, the share goes too
    /// (CloudKit deletes a share with its root).
    private func deleteShare(
        ofRoot row: PostgresRecordRow, named name: String, in zone: PostgresZoneRow, matching subscriptions: SubscriptionSet,
        _ done: inout OneByOne
    ) async throws {
        guard row.recordType != ShareRules.shareType,
            let shareName = try await shares.zoneShares(zone.id, connection, key, logger).byRoot[name]
        else { return }
        _ = try await PostgresShareRows.delete(shareName, connection, key, zoneID: zone.id, logger)
        shares.forget(zone.id)
        guard let shareRow = try await deleteCascaded(shareName, in: zone.id) else { return }
        let old = subscriptions.needsPreviousState(of: shareRow.recordType) ? try shareRow.record() : nil
        done.changes.append(
            RecordChange(zoneName: zone.name, recordType: shareRow.recordType, recordName: shareName, old: old, new: nil))
    }

    // MARK: - Which shares a record is in

    /// The shares the record `row` (named `name`) is in as it is deleted, for its tombstone
    /// (``SharesReached``). Remembered for records deleted after it in the same write, and for
    /// the subscriptions of the participants.
    func sharesHolding(_ row: PostgresRecordRow, named name: String, zoneID: Int64) async throws -> [String] {
        let holding = try await sharesReached(recordType: row.recordType, named: name, zoneID: zoneID) { try row.record() }
        shares.deletedFromShares[zoneID, default: [:]][name] = holding
        return holding
    }

    /// The shares a record of type `recordType` named `name` (`record` decodes it) is in, in
    /// the zone `zoneID` as this write left it, reading its parent chain one record at a time.
    private func sharesReached(
        recordType: String, named name: String, zoneID: Int64, record: () throws -> Wire.Record
    ) async throws -> [String] {
        var walk = try SharesReached(
            recordType: recordType, name: name, shares: try await shares.zoneShares(zoneID, connection, key, logger),
            deleted: shares.deletedFromShares[zoneID] ?? [:], record: record)
        while let parent = walk.parentToRead {
            walk.read(try await PostgresRows.record(connection, key, zoneID: zoneID, name: parent, logger)?.record())
        }
        return walk.holding
    }

    /// Why a participant writing through their shared database (``PostgresShareState/sharedScope``)
    /// may not save or delete `client` (`existing`, its stored row): the record as stored, or a
    /// new one by its parent chain, is in none of the shares they may change. Nil for the
    /// owner's writes.
    private func sharedScopeRefusal(
        _ client: Wire.Record, existing: PostgresRecordRow?, in zone: PostgresZoneRow
    ) async throws -> ItemFailure? {
        guard let sharedScope = shares.sharedScope else { return nil }
        let name = client.recordID?.recordName ?? ""
        let allowed = sharedScope[zone.name] ?? []
        let record = try existing?.record() ?? client
        let reached = try await sharesReached(recordType: record.recordType, named: name, zoneID: zone.id) { record }
        return allowed.isDisjoint(with: reached) ? ShareRules.notInScope(name) : nil
    }

    // MARK: - Participants' subscriptions

    /// What the subscriptions of the shared databases of the accepted participants of every
    /// shared zone this write changed hear of: each participant's changes to records in the
    /// shares they take part in (all of a zone shared whole; in a hierarchy, the records whose
    /// parent chain reaches their share's root, and the records deleted from it). Who takes
    /// part is read now, in the write's transaction: a participant removed before it hears of
    /// nothing.
    func sharedSubscriptionBatches(_ changes: [RecordChange]) async throws -> [PostgresNotificationWriter.Batch] {
        var changesByUser: [String: [RecordChange]] = [:]
        for (zoneID, zoneName) in shares.touched.sorted(by: { $0.key < $1.key }) {
            guard try await !shares.zoneShares(zoneID, connection, key, logger).isEmpty else { continue }
            var bindings = PostgresRows.binds(key, zoneID)
            bindings.append(ShareAcceptanceStatus.accepted.rawValue)
            bindings.append(ShareRole.owner.rawValue)
            let rows = try await connection.query(
                PostgresQuery(
                    unsafeSQL: """
                        SELECT user_name, share_name FROM share_participants
                        WHERE container = $1 AND owner = $2 AND scope = $3 AND zone_id = $4 AND status = $5
                            AND role != $6 AND user_name IS NOT NULL
                        """,
                    binds: bindings), logger: logger)
            var sharesByUser: [String: Set<String>] = [:]
            for try await (user, share) in rows.decode((String, String).self) { sharesByUser[user, default: []].insert(share) }
            // Only participants who subscribed in their shared database need to know.
            for user in Array(sharesByUser.keys) {
                let shared = DatabaseKey.shared(container: key.container, user: user)
                if try await subscriptionCache.subscriptions(connection, shared, logger).isEmpty { sharesByUser[user] = nil }
            }
            guard !sharesByUser.isEmpty else { continue }
            // The shares each change of the zone is in, worked out once for all participants.
            var inShares: [(change: RecordChange, shares: [String])] = []
            for change in changes where change.zoneName == zoneName {
                let reached: [String]
                if let record = change.new {
                    reached = try await sharesReached(recordType: record.recordType, named: change.recordName, zoneID: zoneID) {
                        record
                    }
                } else {
                    reached = shares.deletedFromShares[zoneID]?[change.recordName] ?? []
                }
                if !reached.isEmpty { inShares.append((change, reached)) }
            }
            for (user, userChanges) in ShareRules.changesByParticipant(inShares, sharesByUser: sharesByUser) {
                changesByUser[user, default: []] += userChanges
            }
        }
        var batches: [PostgresNotificationWriter.Batch] = []
        for (user, userChanges) in changesByUser.sorted(by: { $0.key < $1.key }) where !userChanges.isEmpty {
            let shared = DatabaseKey.shared(container: key.container, user: user)
            let subscriptions = try await subscriptionCache.subscriptions(connection, shared, logger)
            guard !subscriptions.isEmpty else { continue }
            batches.append(PostgresNotificationWriter.Batch(subscriptions: subscriptions, key: shared, records: userChanges))
        }
        return batches
    }
}
