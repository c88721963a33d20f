import CirrusStore
import CirrusWire
import Foundation
import Logging
import NIOCore
import PostgresNIO

/// Carries out one modify-records request in a transaction that holds its database's row
/// lock (``PostgresRows/lockDatabase(_:_:_:)``), which it may share with other requests into
/// the database (``PostgresWriteQueue``): no other transaction writes the database until it
/// commits, so the change sequences it hands out follow commit order without gaps, on every
/// node.
///
/// A request names each record once, so the items of one zone cannot change each other's
/// checks: a zone's items are all checked against one read of their rows, then written
/// together in two statements (and two for each record a deletion cascades to). An atomic zone with a failed item writes nothing, with no
/// savepoint to roll back — what running the items one by one in a savepoint would do. A zone
/// with a share, a zone where the request saves one, and a participant's write through their
/// shared database are the exception: there an item's checks follow parent chains and shares
/// the items before it may have changed, so its items run one at a time, an atomic zone in a
/// savepoint (``modifyOneByOne(_:of:in:matching:)``).
struct PostgresRecordWriter {
    let connection: PostgresConnection
    let key: DatabaseKey
    let user: String
    let now: Wire.Timestamp
    let logger: Logger
    /// The compiled subscriptions of each database (read once per request, in its transaction).
    let subscriptionCache: PostgresSubscriptionCache
    /// What the request found and did of shares (``PostgresShareState``).
    let shares = PostgresShareState()

    typealias Item = RecordModificationPlan.Item

    /// What a request did, and the notifications it stored per subscriber (announced once the
    /// transaction commits).
    struct Outcome: Sendable {
        var result: RecordModificationResult
        var notified: [String: [StoredNotification]]
    }

    /// A save whose checks all passed.
    struct PreparedSave {
        var index: Int
        var existing: PostgresRecordRow?
        var serverRecord: Wire.Record?
        /// The record to store, system fields not yet set, its assets without content.
        var record: Wire.Record
        /// Set when the record is a share: its row and participants.
        var share: PreparedShare? = nil
        /// The asset contents arriving with it (inline bytes, or files of the asset store).
        var assets: [RecordCodec.AssetContent]
        /// Every content its assets name.
        var checksums: Set<[UInt8]>
    }

    /// What one checked item writes.
    enum Write {
        case save(PreparedSave)
        /// A deletion; `existing` nil when the record does not exist (it succeeds, writing nothing).
        case delete(index: Int, name: String, existing: PostgresRecordRow?)
    }

    /// Carries out a planned request; each zone it writes moves to the database's next change
    /// sequence. What the changes fire is stored in the same transaction
    /// (``PostgresNotificationWriter``).
    func modify(_ plan: RecordModificationPlan) async throws -> Outcome {
        let request = plan.request
        var saves = plan.saves
        var deletes = plan.deletes
        func fail(_ item: Item, _ failure: ItemFailure) {
            switch item {
            case .save(let i, _): saves[i].result = .failure(failure)
            case .delete(let i, _): deletes[i].failure = failure
            }
        }

        var cascaded: [Wire.RecordID] = []
        // Asset contents the request's written saves brought: a later save may name them alone.
        var arrived = Set<[UInt8]>()
        // Read with the first zone: a request that writes no zone changes nothing to match.
        var subscriptions: SubscriptionSet?
        var changes: [RecordChange] = []
        shares.sharedScope = request.sharedScope
        for group in plan.groups {
            let names = group.items.compactMap { $0.problem == nil ? Self.recordName(of: $0.item) : nil }
            guard
                let (zone, existing, generation, isShared) = try await PostgresRows.liveZoneAndRecords(
                    connection, key, group.zoneName, names: names, logger)
            else {
                for entry in group.items {
                    fail(entry.item, RecordCodec.error(.zoneNotFound, "zone \(group.zoneName) does not exist"))
                }
                continue
            }
            if subscriptions == nil {
                subscriptions = try await subscriptionCache.subscriptions(connection, key, generation: generation, logger)
            }
            if isShared || request.sharedScope != nil || Self.savesShares(group) {
                // Shares make an item's checks depend on the items before it: one at a time.
                let written = try await modifyOneByOne(
                    group, of: request, in: zone, matching: subscriptions ?? SubscriptionSet(), arrived: &arrived)
                for (item, result) in written.outcomes {
                    switch result {
                    case .failure(let failure): fail(item, failure)
                    case .success(let record): if case .save(let index, _) = item, let record { saves[index].result = .success(record) }
                    }
                }
                cascaded += written.cascaded
                changes += written.changes
                continue
            }
            shares.knowUnshared(zone.id)
            var writes: [Write] = []
            var failures: [(Item, ItemFailure)] = []
            for entry in group.items {
                if let problem = entry.problem {
                    failures.append((entry.item, problem))
                    continue
                }
                switch entry.item {
                case .save(let index, let record):
                    let name = record.recordID?.recordName ?? ""
                    switch try check(record, index: index, existing: existing[name], in: zone, policy: request.savePolicy) {
                    case .failure(let failure): failures.append((entry.item, failure))
                    case .success(let prepared): writes.append(.save(prepared))
                    }
                case .delete(let index, let recordID):
                    let name = recordID.recordName
                    if let failure = checkDelete(name, existing: existing[name], in: zone) {
                        failures.append((entry.item, failure))
                    } else {
                        writes.append(.delete(index: index, name: name, existing: existing[name]))
                    }
                }
            }
            try await checkDeleteSelfTargets(&writes, &failures, of: group, in: zone, existing: existing)
            try await checkAssets(&writes, &failures, arrived: arrived)
            if request.isAtomic && !failures.isEmpty {
                let failure = RecordCodec.error(.batchRequestFailed, "another item of zone \(zone.name) failed")
                for write in writes {
                    switch write {
                    case .save(let prepared): saves[prepared.index].result = .failure(failure)
                    case .delete(let index, _, _): deletes[index].failure = failure
                    }
                }
            } else {
                let token = request.clientChangeToken.isEmpty ? nil : Data(request.clientChangeToken)
                let written = try await apply(
                    writes, in: zone, clientChangeToken: token, matching: subscriptions ?? SubscriptionSet())
                for (index, record) in written.saved { saves[index].result = .success(record) }
                for case .save(let prepared) in writes { arrived.formUnion(prepared.assets.map(\.sha256)) }
                cascaded += written.cascaded
                changes += written.changes
            }
            for (item, failure) in failures { fail(item, failure) }
        }
        let result = RecordModificationResult(saves: saves, deletes: deletes, cascadedDeletions: cascaded)
        guard let subscriptions, !changes.isEmpty else { return Outcome(result: result, notified: [:]) }
        // The database's own subscriptions, and its shared zones' participants' in their shared
        // databases, their feeds moved together.
        let batches =
            [PostgresNotificationWriter.Batch(subscriptions: subscriptions, key: key, records: changes)]
            + (try await sharedSubscriptionBatches(changes))
        let notified = try await PostgresNotificationWriter.fire(batches, in: key.container, now: now, connection, logger)
        return Outcome(result: result, notified: notified)
    }

    /// Fails the saves of `writes` whose `deleteSelf` reference names a record of the zone
    /// that is neither stored (and not deleted by the group) nor saved by the group: one read
    /// for all the targets the group's items do not name themselves.
    ///
    /// The group's checks all see the zone as it was before the request, so a record the
    /// group deletes counts as gone for every save of the group, whatever their order.
    func checkDeleteSelfTargets(
        _ writes: inout [Write], _ failures: inout [(Item, ItemFailure)], of group: RecordModificationPlan.Group,
        in zone: PostgresZoneRow, existing: [String: PostgresRecordRow]
    ) async throws {
        var deletedNames = Set<String>()
        var targets: [Int: [String]] = [:]
        for (position, write) in writes.enumerated() {
            switch write {
            case .delete(_, let name, let row):
                if row != nil { deletedNames.insert(name) }
            case .save(let prepared):
                let names = RecordCodec.deleteSelfTargets(of: prepared.record, zoneName: zone.name).map(\.name)
                    .filter { !group.savedNames.contains($0) }
                if !names.isEmpty { targets[position] = names }
            }
        }
        guard !targets.isEmpty else { return }
        let unread = Set(targets.values.joined()).filter { existing[$0] == nil }
        let stored = try await PostgresRows.existingNames(connection, key, zoneID: zone.id, names: Array(unread), logger)
            .union(existing.keys)
        var kept: [Write] = []
        for (position, write) in writes.enumerated() {
            guard case .save(let prepared) = write, let names = targets[position],
                let missing = names.first(where: { !stored.contains($0) || deletedNames.contains($0) })
            else {
                kept.append(write)
                continue
            }
            let name = prepared.record.recordID?.recordName ?? ""
            failures.append((.save(prepared.index, prepared.record), RecordRules.missingDeleteSelfTarget(name, target: missing)))
        }
        writes = kept
    }

    /// Fails the saves of `writes` naming asset content the server does not know, as the
    /// SQLite engine does: content neither arriving with the save nor with an earlier save
    /// of the request (`arrived`, or an earlier save of the group) must be stored already.
    /// One read for the group, which locks the contents it finds until the commit.
    func checkAssets(
        _ writes: inout [Write], _ failures: inout [(Item, ItemFailure)], arrived: Set<[UInt8]>
    ) async throws {
        var wanted = Set<[UInt8]>()
        for case .save(let prepared) in writes {
            wanted.formUnion(RecordCodec.checksumsToFind(prepared.checksums, arriving: prepared.assets, arrived: arrived))
        }
        guard !wanted.isEmpty else { return }
        let known = try await PostgresAssetRows.known(wanted, connection, logger)
        var available = arrived.union(known)
        var kept: [Write] = []
        for write in writes {
            guard case .save(let prepared) = write else {
                kept.append(write)
                continue
            }
            guard RecordCodec.checksumsToFind(prepared.checksums, arriving: prepared.assets, arrived: available).isEmpty
            else {
                let name = prepared.record.recordID?.recordName ?? ""
                failures.append((.save(prepared.index, prepared.record), RecordCodec.unknownAsset(in: name)))
                continue
            }
            available.formUnion(prepared.assets.map(\.sha256))
            kept.append(write)
        }
        writes = kept
    }

    private static func recordName(of item: Item) -> String? {
        switch item {
        case .save(_, let record): record.recordID?.recordName
        case .delete(_, let recordID): recordID.recordName
        }
    }

    // MARK: - Checks

    /// The per-item rules every engine shares.
    var rules: RecordRules { RecordRules(key: key, user: user) }

    /// Runs every check of a save (reads nothing: `existing` is the stored row of its name).
    func check(
        _ client: Wire.Record, index: Int, existing: PostgresRecordRow?, in zone: PostgresZoneRow,
        policy: Wire.SavePolicy
    ) throws -> ItemResult<PreparedSave> {
        switch try rules.checkSave(client, existing: existing, zoneName: zone.name, policy: policy, decode: { try $0.record() }) {
        case .failure(let failure):
            return .failure(failure)
        case .success(let checked):
            var record = checked.record
            let assets: [RecordCodec.AssetContent]
            switch RecordCodec.extractAssets(&record) {
            case .failure(let failure): return .failure(failure)
            case .success(let contents): assets = contents
            }
            return .success(PreparedSave(
                index: index, existing: existing, serverRecord: checked.serverRecord, record: record, assets: assets,
                checksums: RecordCodec.assetChecksums(in: record)))
        }
    }

    /// Why a deletion fails, or nil. Deleting a record that does not exist succeeds.
    func checkDelete(_ name: String, existing: PostgresRecordRow?, in zone: PostgresZoneRow) -> ItemFailure? {
        if let refusal = rules.deletionRefusal(name, zoneName: zone.name) { return refusal }
        return existing.flatMap { rules.ownershipRefusal(name, existing: $0) }
    }

    /// Whether a group saves a share, or a record naming one (a new share's root).
    static func savesShares(_ group: RecordModificationPlan.Group) -> Bool {
        group.items.contains { entry in
            guard entry.problem == nil, case .save(_, let record) = entry.item else { return false }
            return record.recordType == ShareRules.shareType || record.share != nil
        }
    }
}
