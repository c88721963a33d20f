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

    /// Zones written to (their database change sequence is bumped once at the end).
    var touchedZones: [Int64] = []
    /// Records deleted by deleteSelf cascades.
    var cascaded: [Wire.RecordID] = []
    /// The database's subscriptions; when there are none, changes are not even collected.
    let subscriptions: SubscriptionSet
    /// What was saved and deleted, for the subscriptions.
    var changes: [RecordChange] = []
    /// The subscribers who got notifications, once ``modify(_:)`` returned.
    private(set) var notified: Set<String> = []
    /// The last change sequence handed out per zone; written to the zone rows
    /// at the end. A rolled-back item leaves a gap, which is harmless: a
    /// sequence only has to grow.
    private var zoneSeqs: [Int64: Int64] = [:]

    init(db: Database, key: DatabaseKey, user: String, now: Wire.Timestamp) throws {
        self.db = db
        self.key = key
        self.user = user
        self.now = now
        self.databaseID = try StoreRows.ensureDatabase(db, key)
        self.subscriptions = try SubscriptionSet.load(db, databaseID: databaseID)
    }

    /// Where an item's savepoint started, to forget what it did when it rolls back.
    private struct Mark {
        var touchedZones: [Int64]
        var cascaded: Int
        var changes: Int
    }

    private var mark: Mark { Mark(touchedZones: touchedZones, cascaded: cascaded.count, changes: changes.count) }

    private mutating func rollBack(to mark: Mark) {
        touchedZones = mark.touchedZones
        cascaded.removeSubrange(mark.cascaded...)
        changes.removeSubrange(mark.changes...)
    }

    private enum Item {
        case save(Int, Wire.Record)
        case delete(Int, Wire.RecordID)
    }

    /// An item and, when it is malformed, the error it gets without running.
    private struct GroupItem {
        var item: Item
        var problem: Wire.OperationError?
    }

    private struct Group {
        var zoneName: String
        var items: [GroupItem] = []
    }

    mutating func modify(_ request: RecordModification) throws -> RecordModificationResult {
        var saves = request.recordsToSave.map { Wire.ModifyRecordsPerRecordSave(recordID: $0.recordID) }
        var deletes = request.recordIDsToDelete.map { Wire.ModifyRecordsPerRecordDelete(recordID: $0) }
        func fail(_ item: Item, _ error: Wire.OperationError) {
            switch item {
            case .save(let i, _): saves[i].outcome = .error(error)
            case .delete(let i, _): deletes[i].error = error
            }
        }

        // Group by zone in order of first appearance. An item whose zone is
        // known but which is malformed (or names a record a second time) stays
        // in its group with its error, so an atomic zone fails with it.
        var groups: [Group] = []
        var groupIndex: [String: Int] = [:]
        var seen = Set<[String]>()
        let items = request.recordsToSave.enumerated().map { Item.save($0.offset, $0.element) }
            + request.recordIDsToDelete.enumerated().map { Item.delete($0.offset, $0.element) }
        for item in items {
            let recordID: Wire.RecordID?
            switch item {
            case .save(_, let record): recordID = record.recordID
            case .delete(_, let id): recordID = id
            }
            guard let recordID else { fail(item, RecordCodec.error(.invalidArguments, "missing record ID")); continue }
            let zoneName: String
            switch ZoneResolution.zoneName(of: recordID.zoneID, in: key) {
            case .failure(let failure): fail(item, failure); continue
            case .success(let name): zoneName = name
            }
            var problem = RecordCodec.checkName(recordID.recordName, of: "record")
            if problem == nil, case .save(_, let record) = item { problem = RecordCodec.checkRecordToSave(record) }
            if problem == nil && !seen.insert([zoneName, recordID.recordName]).inserted {
                problem = RecordCodec.error(.invalidArguments, "record \(recordID.recordName) appears twice in one request")
            }
            let entry = GroupItem(item: item, problem: problem)
            if let i = groupIndex[zoneName] {
                groups[i].items.append(entry)
            } else {
                groupIndex[zoneName] = groups.count
                groups.append(Group(zoneName: zoneName, items: [entry]))
            }
        }

        for group in groups {
            guard let zone = try StoreRows.liveZone(db, databaseID, group.zoneName) else {
                for entry in group.items {
                    fail(entry.item, RecordCodec.error(.zoneNotFound, "zone \(group.zoneName) does not exist"))
                }
                continue
            }
            if request.isAtomic {
                if try saveAtOnce(group, in: zone, policy: request.savePolicy, &saves) { continue }
                var failures: [(Item, Wire.OperationError)] = []
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
                for entry in group.items {
                    let item = entry.item
                    if let problem = entry.problem {
                        fail(item, problem)
                        continue
                    }
                    switch try perform(item, in: zone, policy: request.savePolicy) {
                    case .failure(let failure): fail(item, failure)
                    case .success(let record): succeed(item, record, &saves)
                    }
                }
            }
        }

        for zoneID in touchedZones {
            let seq = try StoreRows.bumpDatabaseSeq(db, databaseID)
            try db.run(
                sql: "UPDATE zones SET db_seq = ?, change_seq = ? WHERE id = ?",
                arguments: [seq, zoneSeqs[zoneID] ?? 0, zoneID])
            if !request.clientChangeToken.isEmpty {
                try db.run(
                    sql: "UPDATE zones SET client_change_token = ? WHERE id = ?",
                    arguments: [Data(request.clientChangeToken), zoneID])
            }
        }
        var notifications = NotificationWriter(db: db, key: key, now: now)
        try notifications.fire(subscriptions, databaseID: databaseID, records: changes, zones: [])
        notified = notifications.notified
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
        _ group: Group, in zone: ZoneRow, policy: Wire.SavePolicy, _ saves: inout [Wire.ModifyRecordsPerRecordSave]
    ) throws -> Bool {
        var records: [(index: Int, record: Wire.Record)] = []
        records.reserveCapacity(group.items.count)
        for entry in group.items {
            guard entry.problem == nil, case .save(let index, let record) = entry.item else { return false }
            records.append((index, record))
        }
        let existing = try StoreRows.records(db, zoneID: zone.id, names: records.map { $0.record.recordID?.recordName ?? "" })
        var prepared: [(index: Int, save: PreparedSave)] = []
        prepared.reserveCapacity(records.count)
        for (index, record) in records {
            let row = existing[record.recordID?.recordName ?? ""]
            guard case .success(let save) = try prepareSave(record, existing: row, in: zone, policy: policy) else {
                return false
            }
            prepared.append((index, save))
        }
        for (index, save) in prepared {
            saves[index].outcome = .record(try apply(save, in: zone))
        }
        return true
    }

    private func succeed(_ item: Item, _ record: Wire.Record?, _ saves: inout [Wire.ModifyRecordsPerRecordSave]) {
        if case .save(let i, _) = item, let record { saves[i].outcome = .record(record) }
    }

    /// The next change sequence of a zone.
    mutating func nextSeq(_ zoneID: Int64) throws -> Int64 {
        let current: Int64
        if let known = zoneSeqs[zoneID] {
            current = known
        } else {
            current = try db.int64(sql: "SELECT change_seq FROM zones WHERE id = ?", arguments: [zoneID]) ?? 0
        }
        zoneSeqs[zoneID] = current + 1
        return current + 1
    }

    mutating func touch(_ zoneID: Int64) {
        if !touchedZones.contains(zoneID) { touchedZones.append(zoneID) }
    }

    /// Saves or deletes one item; `.success(nil)` for a delete.
    private mutating func perform(
        _ item: Item, in zone: ZoneRow, policy: Wire.SavePolicy
    ) throws -> ItemResult<Wire.Record?> {
        switch item {
        case .save(_, let record):
            switch try save(record, in: zone, policy: policy) {
            case .success(let saved): return .success(saved)
            case .failure(let failure): return .failure(failure)
            }
        case .delete(_, let recordID):
            if let failure = try delete(recordID.recordName, in: zone) { return .failure(failure) }
            return .success(nil)
        }
    }
}
