import CirrusStore
import CirrusWire
import Foundation
import Logging
import NIOCore
import PostgresNIO

/// Carries out one modify-records request in one transaction that holds its database's row
/// lock (``PostgresRows/lockDatabase(_:_:_:)``): no other writer of the database runs until
/// it commits, so the change sequences it hands out follow commit order without gaps, on
/// every node.
///
/// A request names each record once, so the items of one zone cannot change each other's
/// checks: a zone's items are all checked against one read of their rows, then written
/// together in two statements. An atomic zone with a failed item writes nothing, with no
/// savepoint to roll back — what running the items one by one in a savepoint would do.
struct PostgresRecordWriter {
    let connection: PostgresConnection
    let key: DatabaseKey
    let user: String
    let now: Wire.Timestamp
    let logger: Logger
    /// Zones whose records changed, with the last change sequence handed out, in the order
    /// first written.
    var touched: [(zoneID: Int64, changeSeq: Int64)] = []

    typealias Item = RecordModificationPlan.Item

    /// A save whose checks all passed.
    struct PreparedSave {
        var index: Int
        var existing: PostgresRecordRow?
        var serverRecord: Wire.Record?
        /// The record to store, system fields not yet set.
        var record: Wire.Record
    }

    /// What one checked item writes.
    enum Write {
        case save(PreparedSave)
        /// A deletion; `existing` nil when the record does not exist (it succeeds, writing nothing).
        case delete(index: Int, name: String, existing: PostgresRecordRow?)
    }

    /// Carries out a planned request; the zones it wrote are in ``touched`` for
    /// ``PostgresStorage`` to move along the database change feed.
    mutating func modify(_ plan: RecordModificationPlan) async throws -> RecordModificationResult {
        let request = plan.request
        var saves = plan.saves
        var deletes = plan.deletes
        func fail(_ item: Item, _ failure: ItemFailure) {
            switch item {
            case .save(let i, _): saves[i].result = .failure(failure)
            case .delete(let i, _): deletes[i].failure = failure
            }
        }

        for group in plan.groups {
            guard let zone = try await PostgresRows.liveZone(connection, key, group.zoneName, logger) else {
                for entry in group.items {
                    fail(entry.item, RecordCodec.error(.zoneNotFound, "zone \(group.zoneName) does not exist"))
                }
                continue
            }
            let names = group.items.compactMap { $0.problem == nil ? Self.recordName(of: $0.item) : nil }
            let existing = try await PostgresRows.records(connection, key, zoneID: zone.id, names: names, logger)
            var writes: [Write] = []
            var failures: [(Item, ItemFailure)] = []
            for entry in group.items {
                if let problem = entry.problem ?? Self.sharingRefusal(request) {
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
            if request.isAtomic && !failures.isEmpty {
                let failure = RecordCodec.error(.batchRequestFailed, "another item of zone \(zone.name) failed")
                for write in writes {
                    switch write {
                    case .save(let prepared): saves[prepared.index].result = .failure(failure)
                    case .delete(let index, _, _): deletes[index].failure = failure
                    }
                }
            } else {
                for (index, record) in try await apply(writes, in: zone) { saves[index].result = .success(record) }
            }
            for (item, failure) in failures { fail(item, failure) }
        }
        return RecordModificationResult(saves: saves, deletes: deletes)
    }

    private static func recordName(of item: Item) -> String? {
        switch item {
        case .save(_, let record): record.recordID?.recordName
        case .delete(_, let recordID): recordID.recordName
        }
    }

    // MARK: - Checks

    /// The record type of a user's record (the public database's `Users` records).
    static let userRecordType = "Users"

    /// Whether `name` is a user's record of the public database: in its default zone, a
    /// record named like a user (`_alice`).
    private func isUserRecordName(_ name: String, in zone: PostgresZoneRow) -> Bool {
        key.scope == .public && name.hasPrefix("_") && zone.name == RecordCodec.defaultZoneName
    }

    /// Runs every check of a save (reads nothing: `existing` is the stored row of its name).
    func check(
        _ client: Wire.Record, index: Int, existing: PostgresRecordRow?, in zone: PostgresZoneRow,
        policy: Wire.SavePolicy
    ) throws -> ItemResult<PreparedSave> {
        guard let clientID = client.recordID else {
            return .failure(RecordCodec.error(.invalidArguments, "record without a record ID"))
        }
        let name = clientID.recordName
        if isUserRecordName(name, in: zone) {
            guard name == user else {
                return .failure(RecordCodec.error(.permissionFailure, "only user \(name) may write the Users record \(name)"))
            }
            guard client.recordType == Self.userRecordType else {
                return .failure(RecordCodec.error(
                    .invalidArguments, "the record \(name) is a \(Self.userRecordType) record, not a \(client.recordType)"))
            }
        }
        var serverRecord: Wire.Record?
        if let existing {
            serverRecord = try existing.record()
            if key.scope == .public && existing.creator != user {
                return .failure(RecordCodec.error(.permissionFailure, "record \(name) belongs to another user"))
            }
            if existing.recordType != client.recordType {
                return .failure(RecordCodec.error(
                    .invalidArguments, "record \(name) is a \(existing.recordType), not a \(client.recordType)"))
            }
        }
        switch policy {
        case .changedKeys, .allKeys:
            break
        case .unspecified, .ifServerRecordUnchanged, .unrecognized:
            if let existing, existing.changeTag != client.recordChangeTag {
                var failure = RecordCodec.error(.serverRecordChanged, "record \(name) was changed on the server")
                failure.serverRecord = serverRecord
                failure.clientRecord = client
                return .failure(failure)
            }
            if existing == nil && !client.recordChangeTag.isEmpty {
                return .failure(RecordCodec.error(.unknownItem, "record \(name) to update does not exist"))
            }
        }
        var record = Wire.Record(
            recordID: Wire.RecordID(recordName: name, zoneID: ZoneResolution.zoneID(zone.name, in: key)),
            recordType: client.recordType)
        record.fields = RecordCodec.fieldsToStore(client: client, server: serverRecord?.fields, policy: policy)
        if policy == .changedKeys {
            record.parent = client.parent ?? serverRecord?.parent
            record.shareFields = client.shareFields ?? serverRecord?.shareFields
        } else {
            record.parent = client.parent
            record.shareFields = client.shareFields
        }
        if let refusal = Self.capabilityRefusal(of: record, client: client, in: zone) { return .failure(refusal) }
        return .success(PreparedSave(index: index, existing: existing, serverRecord: serverRecord, record: record))
    }

    /// Why a deletion fails, or nil. Deleting a record that does not exist succeeds.
    func checkDelete(_ name: String, existing: PostgresRecordRow?, in zone: PostgresZoneRow) -> ItemFailure? {
        if isUserRecordName(name, in: zone) {
            return RecordCodec.error(.permissionFailure, "the Users record \(name) cannot be deleted")
        }
        if let existing, key.scope == .public && existing.creator != user {
            return RecordCodec.error(.permissionFailure, "record \(name) belongs to another user")
        }
        return nil
    }

    /// What this engine does not store yet, refused whole so nothing is kept half
    /// (README → PostgreSQL): shares, assets and `deleteSelf` references.
    static func capabilityRefusal(of record: Wire.Record, client: Wire.Record, in zone: PostgresZoneRow) -> ItemFailure? {
        let name = record.recordID?.recordName ?? ""
        if record.recordType == ShareRules.shareType || client.share != nil {
            return RecordCodec.error(
                .serverRejectedRequest, "record \(name): the PostgreSQL storage engine does not keep shares yet")
        }
        for field in record.fields {
            switch field.value?.kind {
            case .assetValue, .assetList:
                return RecordCodec.error(
                    .serverRejectedRequest,
                    "record \(name): the PostgreSQL storage engine does not keep assets yet (field \(field.key))")
            default:
                continue
            }
        }
        if !RecordCodec.deleteSelfTargets(of: record, zoneName: zone.name).isEmpty {
            return RecordCodec.error(
                .serverRejectedRequest,
                "record \(name): the PostgreSQL storage engine does not keep deleteSelf references yet")
        }
        return nil
    }

    /// A participant's write through a shared database, refused item by item (this engine
    /// keeps no shares yet).
    static func sharingRefusal(_ request: RecordModification) -> ItemFailure? {
        guard request.sharedScope != nil else { return nil }
        return RecordCodec.error(
            .serverRejectedRequest, "the PostgreSQL storage engine does not keep shares yet; no shared database")
    }
}
