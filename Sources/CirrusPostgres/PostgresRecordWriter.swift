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

    /// A planned request of `user` (at `now`) waiting in its database's write queue, which
    /// runs it with the requests beside it when they may run together
    /// (``PostgresWriteQueue``, ``run(_:in:_:_:)``).
    struct Request: Sendable {
        var plan: RecordModificationPlan
        var user: String
        var now: Wire.Timestamp
        var subscriptionCache: PostgresSubscriptionCache

        /// Carries out `requests` (gathered by ``Together``) in one
        /// ``PostgresRecordWriter/modify(_:)-([RecordModificationPlan])`` of their user, at
        /// the latest of their times. One outcome per request.
        static func run(
            _ requests: [Request], in key: DatabaseKey, _ connection: PostgresConnection, _ logger: Logger
        ) async throws -> [Outcome] {
            guard let first = requests.first else { return [] }
            let now = requests.map(\.now).max { RecordCodec.nanoseconds($0) < RecordCodec.nanoseconds($1) } ?? first.now
            let writer = PostgresRecordWriter(
                connection: connection, key: key, user: first.user, now: now, logger: logger,
                subscriptionCache: first.subscriptionCache)
            return try await writer.modify(requests.map(\.plan))
        }
    }

    /// Requests that may run together in one ``modify(_:)-([RecordModificationPlan])``, as one
    /// after the other would, gathered one at a time: the requests of one user, none of them
    /// a participant's write through their shared database, a deletion (its cascade reaches
    /// records no name of the request says) or a save of a share, no record named by two of
    /// them. Any request may run alone.
    struct Together {
        private(set) var requests: [Request] = []
        /// The records the requests name (zone, name).
        private var named = Set<[String]>()
        /// False once a request that must run alone is here.
        private var isOpen = true

        /// Adds `next` when it may run with the requests gathered; false (and nothing changes)
        /// when it may not.
        mutating func add(_ next: Request) -> Bool {
            guard requests.isEmpty || (isOpen && next.user == requests[0].user && Self.mayJoin(next.plan)) else {
                return false
            }
            let names = next.plan.groups.flatMap { group in
                group.items.compactMap { $0.problem == nil ? recordName(of: $0.item).map { [group.zoneName, $0] } : nil }
            }
            guard requests.isEmpty || names.allSatisfy({ !named.contains($0) }) else { return false }
            if requests.isEmpty { isOpen = Self.mayJoin(next.plan) }
            named.formUnion(names)
            requests.append(next)
            return true
        }

        private static func mayJoin(_ plan: RecordModificationPlan) -> Bool {
            plan.request.sharedScope == nil && plan.request.recordIDsToDelete.isEmpty
                && !plan.groups.contains(where: savesShares)
        }
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

        /// Whether it changes the zone (a deletion of a record that does not exist does not).
        var changes: Bool {
            if case .delete(_, _, nil) = self { false } else { true }
        }
    }

    /// Carries out a planned request; each zone it writes moves to the database's next change
    /// sequence. What the changes fire is stored in the same transaction
    /// (``PostgresNotificationWriter``).
    func modify(_ plan: RecordModificationPlan) async throws -> Outcome {
        guard let outcome = try await modify([plan]).first else {
            throw StoreError(.storageFailure, "a modification had no outcome")
        }
        return outcome
    }

    /// Carries out planned requests of this writer's user as if one ran after the other in
    /// their order, with the statements of the single request: each zone is read once for all
    /// the requests naming it, and its writes go in one set of statements (one change sequence
    /// of the database for the zone), however many requests they come from. One outcome per
    /// request, in order; the notifications of all of them in the first.
    ///
    /// The requests must be ones that may run together (``Together``, each naming records no
    /// other one names): each request then sees the zone as the requests before
    /// it left it, as running them in turn would — its checks read only the rows of its own
    /// names, the names the requests before it saved (a `deleteSelf` target), and the asset
    /// contents they brought.
    func modify(_ plans: [RecordModificationPlan]) async throws -> [Outcome] {
        var progress = plans.map { Progress(saves: $0.saves, deletes: $0.deletes) }
        // Asset contents the requests' written saves brought: a later save may name them alone.
        var arrived = Set<[UInt8]>()
        // Read with the first zone: requests that write no zone change nothing to match.
        var subscriptions: SubscriptionSet?
        var changes: [RecordChange] = []
        // Several requests together hold no participant's write (see ``Together``).
        shares.sharedScope = plans.count == 1 ? plans[0].request.sharedScope : nil
        for (zoneName, groups) in Self.groupsByZone(plans) {
            let names = groups.flatMap { $0.group.items.compactMap { $0.problem == nil ? Self.recordName(of: $0.item) : nil } }
            guard
                let (zone, existing, generation, isShared) = try await PostgresRows.liveZoneAndRecords(
                    connection, key, zoneName, names: names, logger)
            else {
                for (p, group) in groups {
                    for entry in group.items {
                        progress[p].fail(entry.item, RecordCodec.error(.zoneNotFound, "zone \(zoneName) does not exist"))
                    }
                }
                continue
            }
            if subscriptions == nil {
                subscriptions = try await subscriptionCache.subscriptions(connection, key, generation: generation, logger)
            }
            let matching = subscriptions ?? SubscriptionSet()
            if isShared || shares.sharedScope != nil || groups.contains(where: { Self.savesShares($0.group) }) {
                // Shares make an item's checks depend on the items before it: one at a time.
                for (p, group) in groups {
                    let written = try await modifyOneByOne(
                        group, of: plans[p].request, in: zone, matching: matching, arrived: &arrived)
                    for (item, result) in written.outcomes {
                        switch result {
                        case .failure(let failure): progress[p].fail(item, failure)
                        case .success(let record):
                            if case .save(let index, _) = item, let record { progress[p].saves[index].result = .success(record) }
                        }
                    }
                    progress[p].cascaded += written.cascaded
                    changes += written.changes
                }
                continue
            }
            shares.knowUnshared(zone.id)
            // Every request's checked writes of the zone, in order, with the request of each.
            var writes: [(plan: Int, write: Write)] = []
            // The names the requests before saved, and the client change token the zone keeps.
            var saved = Set<String>()
            var token: Data?
            for (p, group) in groups {
                let request = plans[p].request
                var (checked, failures) = try check(group, existing: existing, in: zone, policy: request.savePolicy)
                try await checkDeleteSelfTargets(
                    &checked, &failures, of: group, in: zone, existing: existing, savedBefore: saved)
                try await checkAssets(&checked, &failures, arrived: arrived)
                if request.isAtomic && !failures.isEmpty {
                    let failure = RecordCodec.error(.batchRequestFailed, "another item of zone \(zone.name) failed")
                    for write in checked { progress[p].fail(write, failure) }
                } else {
                    writes += checked.map { (p, $0) }
                    for case .save(let prepared) in checked {
                        arrived.formUnion(prepared.assets.map(\.sha256))
                        saved.insert(prepared.record.recordID?.recordName ?? "")
                    }
                    // The zone keeps the token of the last request that changed it.
                    if !request.clientChangeToken.isEmpty && checked.contains(where: \.changes) {
                        token = Data(request.clientChangeToken)
                    }
                }
                for (item, failure) in failures { progress[p].fail(item, failure) }
            }
            let written = try await apply(writes.map(\.write), in: zone, clientChangeToken: token, matching: matching)
            // `saved` follows the order of the saves, `cascaded` that of the deletions.
            let savers = writes.compactMap { if case .save = $0.write { $0.plan } else { nil } }
            for (p, (index, record)) in zip(savers, written.saved) { progress[p].saves[index].result = .success(record) }
            var deleters: [String: Int] = [:]
            for case (let p, .delete(_, let name, _)) in writes { deleters[name] = p }
            for (source, recordID) in zip(written.cascadedFrom, written.cascaded) {
                progress[deleters[source] ?? 0].cascaded.append(recordID)
            }
            changes += written.changes
        }
        var outcomes = progress.map { Outcome(result: $0.result, notified: [:]) }
        guard let subscriptions, !changes.isEmpty, !outcomes.isEmpty else { return outcomes }
        // The database's own subscriptions, and its shared zones' participants' in their shared
        // databases, their feeds moved together.
        let batches =
            [PostgresNotificationWriter.Batch(subscriptions: subscriptions, key: key, records: changes)]
            + (try await sharedSubscriptionBatches(changes))
        outcomes[0].notified = try await PostgresNotificationWriter.fire(
            batches, in: key.container, now: now, connection, logger)
        return outcomes
    }

    /// The groups of `plans` by zone, the zones in order of first appearance, each zone's
    /// groups in the order of their requests.
    private static func groupsByZone(
        _ plans: [RecordModificationPlan]
    ) -> [(zoneName: String, groups: [(plan: Int, group: RecordModificationPlan.Group)])] {
        var zones: [(zoneName: String, groups: [(plan: Int, group: RecordModificationPlan.Group)])] = []
        var position: [String: Int] = [:]
        for (p, plan) in plans.enumerated() {
            for group in plan.groups {
                if let i = position[group.zoneName] {
                    zones[i].groups.append((p, group))
                } else {
                    position[group.zoneName] = zones.count
                    zones.append((group.zoneName, [(p, group)]))
                }
            }
        }
        return zones
    }

    /// What one request of ``modify(_:)-([RecordModificationPlan])`` has come to so far.
    private struct Progress {
        var saves: [RecordSaveOutcome]
        var deletes: [RecordDeletion]
        var cascaded: [Wire.RecordID] = []

        mutating func fail(_ item: Item, _ failure: ItemFailure) {
            switch item {
            case .save(let i, _): saves[i].result = .failure(failure)
            case .delete(let i, _): deletes[i].failure = failure
            }
        }

        mutating func fail(_ write: Write, _ failure: ItemFailure) {
            switch write {
            case .save(let prepared): saves[prepared.index].result = .failure(failure)
            case .delete(let i, _, _): deletes[i].failure = failure
            }
        }

        var result: RecordModificationResult {
            RecordModificationResult(saves: saves, deletes: deletes, cascadedDeletions: cascaded)
        }
    }

    /// Runs the checks of a group's items that read nothing but the zone's stored rows of
    /// their names (`existing`): the writes of those that pass, the failures of the others.
    private func check(
        _ group: RecordModificationPlan.Group, existing: [String: PostgresRecordRow], in zone: PostgresZoneRow,
        policy: Wire.SavePolicy
    ) throws -> (writes: [Write], failures: [(Item, ItemFailure)]) {
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
                switch try check(record, index: index, existing: existing[name], in: zone, policy: policy) {
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
        return (writes, failures)
    }

    /// Fails the saves of `writes` whose `deleteSelf` reference names a record of the zone
    /// that is neither stored (and not deleted by the group) nor saved by the group: one read
    /// for all the targets the group's items do not name themselves.
    ///
    /// The group's checks all see the zone as it was before the request, so a record the
    /// group deletes counts as gone for every save of the group, whatever their order.
    /// `savedBefore` names the records requests written before the group's in the same
    /// statements save (``modify(_:)-([RecordModificationPlan])``): they count as stored.
    func checkDeleteSelfTargets(
        _ writes: inout [Write], _ failures: inout [(Item, ItemFailure)], of group: RecordModificationPlan.Group,
        in zone: PostgresZoneRow, existing: [String: PostgresRecordRow], savedBefore: Set<String> = []
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
        let unread = Set(targets.values.joined()).filter { existing[$0] == nil && !savedBefore.contains($0) }
        let stored = try await PostgresRows.existingNames(connection, key, zoneID: zone.id, names: Array(unread), logger)
            .union(existing.keys).union(savedBefore)
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
