import CirrusWire
import Foundation
import GRDB

/// Carries out one modify-records request inside one write transaction.
struct RecordWriter {
    let db: Database
    let key: DatabaseKey
    let user: String
    let now: Wire.Timestamp
    let databaseID: Int64

    /// Zones written to (their sequences are stored once, when the transaction ends).
    var touchedZones: [Int64] = []
    /// Records deleted by deleteSelf cascades.
    var cascaded: [Wire.RecordID] = []
    /// The database's subscriptions; when there are none (and no zone written is shared),
    /// changes are not even collected.
    let subscriptions: SubscriptionSet
    /// Every database's subscriptions, for the shared databases of a shared zone's participants.
    let subscriptionCache: SubscriptionCache
    /// The shares of each shared zone written so far, read once per zone and write.
    var zoneShares: [Int64: ZoneShares] = [:]
    /// The shares each record this write deleted was in, by zone and name (a record deleted
    /// after its parent in the same write was in the parent's shares).
    var deletedFromShares: [Int64: [String: [String]]] = [:]
    /// The shares a participant writing through their shared database may change, by zone
    /// (``RecordModification/sharedScope``); nil for the owner's own writes.
    var sharedScope: [String: Set<String>]?
    /// What was saved and deleted, for the subscriptions.
    var changes: [RecordChange] = []
    /// The notifications written per subscriber, once ``modify(_:)`` returned.
    private(set) var notified: [String: [StoredNotification]] = [:]
    /// The names the request saves in the zone being written (``RecordModificationPlan/Group/savedNames``).
    private(set) var savedInZone: Set<String> = []
    /// By save index, the fields the plan encoded ahead (``RecordModificationPlan/encodeFieldsAhead()``).
    private var encodedFields: [Wire.EncodedRecordFields?] = []
    /// The roots the request saves for shares in the zone being written (``RecordModificationPlan/Group/shareRoots``).
    private(set) var shareRootsInZone: [String: String] = [:]
    /// Database and zone rows, and the change sequences handed out, shared with the
    /// transaction's other record writes; it stores the touched zones' sequences before the
    /// commit. A rolled-back item leaves a gap in a sequence, which is harmless: a sequence
    /// only has to grow.
    let transaction: WriteTransactionCache
    /// The statements that write every saved record's row, held for the request's records
    /// (``RawStatement/init(_:sql:reusing:)``), and the buffers the row is written from,
    /// lent by the transaction cache for the request (``WriteTransactionCache/RowBuffers``).
    var recordStatements: RecordStatements

    struct RecordStatements {
        var insert: Statement?
        var update: Statement?
        /// The texts of the row being written, bound without SQLite's copies
        /// (``RawStatement/withBorrowedBindings(_:blob:at:_:)``), and its serialized record (its
        /// `data`): refilled for every record in the same storage.
        var row: WriteTransactionCache.RowBuffers
    }

    init(
        db: Database, key: DatabaseKey, user: String, now: Wire.Timestamp,
        subscriptions cache: SubscriptionCache, transaction: WriteTransactionCache
    ) throws {
        self.db = db
        self.key = key
        self.user = user
        self.now = now
        self.transaction = transaction
        self.databaseID = try transaction.ensureDatabase(db, key)
        self.subscriptions = try cache.subscriptions(db, databaseID: databaseID, transaction: transaction)
        self.subscriptionCache = cache
        self.recordStatements = RecordStatements(row: transaction.borrowRowBuffers())
    }

    /// Where an item's savepoint started, to forget what it did when it rolls back.
    private struct Mark {
        var touchedZones: [Int64]
        var cascaded: Int
        var changes: Int
    }

    /// The per-item rules every engine shares.
    var rules: RecordRules { RecordRules(key: key, user: user) }

    private var mark: Mark { Mark(touchedZones: touchedZones, cascaded: cascaded.count, changes: changes.count) }

    private mutating func rollBack(to mark: Mark) {
        // A share saved or deleted in the savepoint is undone too.
        transaction.sharesChanged(in: nil)
        touchedZones = mark.touchedZones
        cascaded.removeSubrange(mark.cascaded...)
        changes.removeSubrange(mark.changes...)
    }

    typealias Item = RecordModificationPlan.Item
    typealias Group = RecordModificationPlan.Group

    /// Carries out a planned request (see ``RecordModificationPlan``).
    mutating func modify(_ plan: RecordModificationPlan) throws -> RecordModificationResult {
        let request = plan.request
        encodedFields = plan.encodedFields
        sharedScope = request.sharedScope
        var saves = plan.saves
        var deletes = plan.deletes
        func fail(_ item: Item, _ failure: ItemFailure) {
            switch item {
            case .save(let i, _): saves[i].result = .failure(failure)
            case .delete(let i, _): deletes[i].failure = failure
            }
        }

        for group in plan.groups {
            savedInZone = group.savedNames
            shareRootsInZone = group.shareRoots
            guard let zone = try transaction.liveZone(db, databaseID, group.zoneName) else {
                for entry in group.items {
                    fail(entry.item, RecordCodec.error(.zoneNotFound, "zone \(group.zoneName) does not exist"))
                }
                continue
            }
            if request.isAtomic {
                if try saveAtOnce(group, in: zone, policy: request.savePolicy, &saves) { continue }
                var failures: [(Item, ItemFailure)] = []
                var outcomes: [(Item, Wire.Record?)] = []
                let before = mark
                try db.inSavepoint {
                    for entry in group.items {
                        if let problem = entry.problem {
                            failures.append((entry.item, problem))
                            continue
                        }
                        switch try perform(entry.item, in: zone, policy: request.savePolicy) {
                        case .failure(let failure): failures.append((entry.item, failure))
                        case .success(let record): outcomes.append((entry.item, record))
                        }
                    }
                    return failures.isEmpty ? .commit : .rollback
                }
                if failures.isEmpty {
                    for (item, record) in outcomes { succeed(item, record, &saves) }
                } else {
                    rollBack(to: before)
                    for (item, _) in outcomes {
                        fail(item, RecordCodec.error(.batchRequestFailed, "another item of zone \(zone.name) failed"))
                    }
                    for (item, failure) in failures { fail(item, failure) }
                }
            } else {
                // No savepoint: an item fails only in checks that run before
                // it writes anything (and when SQLite throws, the whole job does).
                let existing = try existingRows(of: group, in: zone)
                for entry in group.items {
                    let item = entry.item
                    if let problem = entry.problem {
                        fail(item, problem)
                        continue
                    }
                    switch try perform(item, in: zone, policy: request.savePolicy, existing: existing) {
                    case .failure(let failure): fail(item, failure)
                    case .success(let record): succeed(item, record, &saves)
                    }
                }
            }
        }

        for zoneID in touchedZones {
            transaction.touch(zoneID, of: databaseID)
            if !request.clientChangeToken.isEmpty {
                try db.run(
                    sql: "UPDATE zones SET client_change_token = ? WHERE id = ?",
                    arguments: [Data(request.clientChangeToken), zoneID])
            }
        }
        var notifications = NotificationWriter(db: db, key: key, now: now)
        try notifications.fire(subscriptions, databaseID: databaseID, records: changes, zones: [])
        if notifications.deletedSubscriptions { transaction.subscriptionsChanged(in: databaseID) }
        notified = notifications.notified
        // Each user's notifications in feed order (a user's private and shared subscriptions
        // write to one feed).
        notified.merge(try fireSharedSubscriptions()) { ($0 + $1).sorted { $0.seq < $1.seq } }
        // Handed back for the next request's rows (a request that threw leaves the next one
        // to allocate its own).
        var row = WriteTransactionCache.RowBuffers()
        swap(&row, &recordStatements.row)
        transaction.returnRowBuffers(row)
        return RecordModificationResult(saves: saves, deletes: deletes, cascadedDeletions: cascaded)
    }

    /// An atomic group of saves only, written without a savepoint: every
    /// record's existing row is read in one probe, every check runs before
    /// anything is written, then everything is written. Saves of distinct
    /// records cannot change each other's checks, so this is what running them
    /// one by one would do. False, with nothing written, when the group has a
    /// delete or an item fails a check: the group then runs one by one in a
    /// savepoint, which reports each item's error exactly.
    private mutating func saveAtOnce(
        _ group: Group, in zone: ZoneRow, policy: Wire.SavePolicy, _ saves: inout [RecordSaveOutcome]
    ) throws -> Bool {
        var records: [(index: Int, record: Wire.Record)] = []
        records.reserveCapacity(group.items.count)
        for entry in group.items {
            guard entry.problem == nil, case .save(let index, let record) = entry.item else { return false }
            records.append((index, record))
        }
        if records.count == 1, let (index, record) = records.first, mayAssumeNew(record) {
            // A group of one record taken to be new: nothing else of the group to undo if its
            // name is taken, so it is saved as a single save is (``save(_:in:policy:encodedFields:existing:)``).
            // A failure wrote nothing: the group then runs in a savepoint, which reports it.
            guard case .success(let saved) = try save(record, in: zone, policy: policy, encodedFields: encodedFields(at: index))
            else { return false }
            saves[index].result = .success(saved)
            return true
        }
        let existing = try StoreRows.records(db, zoneID: zone.id, names: records.map { $0.record.recordID?.recordName ?? "" })
        var prepared: [(index: Int, save: PreparedSave?)] = []
        prepared.reserveCapacity(records.count)
        for (index, record) in records {
            let row = existing[record.recordID?.recordName ?? ""]
            if try sharedScopeRefusal(record, existing: row, in: zone) != nil { return false }
            guard
                case .success(let save) = try prepareSave(
                    record, existing: row, in: zone, policy: policy, encodedFields: encodedFields(at: index))
            else {
                return false
            }
            prepared.append((index, save))
        }
        // Each save taken out of the array, not iterated over: a copy the array still held
        // would make ``apply(_:in:)`` copy the record to set its system fields.
        for position in prepared.indices {
            guard let save = prepared[position].save.take() else { continue }
            saves[prepared[position].index].result = .success(try apply(consume save, in: zone))
        }
        return true
    }

    /// The fields of save `index` encoded ahead, if the plan encoded them.
    private func encodedFields(at index: Int) -> Wire.EncodedRecordFields? {
        index < encodedFields.count ? encodedFields[index] : nil
    }

    private func succeed(_ item: Item, _ record: Wire.Record?, _ saves: inout [RecordSaveOutcome]) {
        if case .save(let i, _) = item, let record { saves[i].result = .success(record) }
    }

    /// The next change sequence of a zone.
    func nextSeq(_ zoneID: Int64) throws -> Int64 {
        try transaction.nextSeq(db, zoneID)
    }

    mutating func touch(_ zoneID: Int64) {
        if !touchedZones.contains(zoneID) { touchedZones.append(zoneID) }
    }

    /// The stored rows of every record a group saves, read in one probe, when nothing the group
    /// does can change them before their save reads them: the group only saves (a delete may
    /// cascade to a record saved after it), saves no share (whose save writes other records'
    /// rows), and saves more than one record. nil otherwise: each save reads its own row.
    /// The group's saves name distinct records (the plan refuses a second mention).
    ///
    /// Records a save takes to be new (``mayAssumeNew(_:)``) are not probed: their saves read
    /// their rows only if their names turn out to be taken.
    private func existingRows(of group: Group, in zone: ZoneRow) throws -> [String: RecordRow]? {
        guard group.items.count > 1 else { return nil }
        var names: [String] = []
        for entry in group.items {
            guard case .save(_, let record) = entry.item, record.recordType != ShareRules.shareType else { return nil }
            if entry.problem == nil, !mayAssumeNew(record), let name = record.recordID?.recordName { names.append(name) }
        }
        return names.isEmpty ? [:] : try StoreRows.records(db, zoneID: zone.id, names: names)
    }

    /// Saves or deletes one item; `.success(nil)` for a delete.
    private mutating func perform(
        _ item: Item, in zone: ZoneRow, policy: Wire.SavePolicy, existing: [String: RecordRow]? = nil
    ) throws -> ItemResult<Wire.Record?> {
        switch item {
        case .save(let index, let record):
            switch try save(record, in: zone, policy: policy, encodedFields: encodedFields(at: index), existing: existing) {
            case .success(let saved): return .success(saved)
            case .failure(let failure): return .failure(failure)
            }
        case .delete(_, let recordID):
            if let failure = try delete(recordID.recordName, in: zone) { return .failure(failure) }
            return .success(nil)
        }
    }
}
