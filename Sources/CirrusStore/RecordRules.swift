import CirrusWire

/// What a storage engine knows of a stored record before it decodes it: the columns the rules
/// of ``RecordRules`` read.
package protocol StoredRecordSummary {
    var recordType: String { get }
    var changeTag: String { get }
    /// The user record name of the user who created the record.
    var creator: String { get }
}

/// The per-item rules of a modify-records request that need no database: every storage engine
/// runs its items through these, so the engines refuse alike, with the same error codes and
/// messages (the storage conformance suite holds them to it).
///
/// - The public database's `Users` records: in its default zone, a record whose name is a
///   user record name (`_alice`) is that user's record. Only that user may save it, only as a
///   `Users` record, and nobody deletes it — whether it exists or not, so a refusal says
///   nothing about another user.
/// - Only its creator changes or deletes a record of the public database.
/// - A save keeps its record's type.
/// - Under `ifServerRecordUnchanged` a save carries the change tag of the record it changes
///   (`serverRecordChanged`, with the server's record, when it does not), and a save with a
///   change tag names a record that exists (`unknownItem`).
package struct RecordRules: Sendable {
    package let key: DatabaseKey
    /// The user writing.
    package let user: String

    package init(key: DatabaseKey, user: String) {
        self.key = key
        self.user = user
    }

    /// The record type of a user's record.
    package static let userRecordType = "Users"

    /// Whether `name` is a user's record of the public database.
    package func isUserRecordName(_ name: String, zoneName: String) -> Bool {
        key.scope == .public && name.hasPrefix("_") && zoneName == RecordCodec.defaultZoneName
    }

    /// Why the user may not save `name` as a `recordType` in the zone, or nil when they may
    /// (as far as the Users records go).
    package func userRecordRefusal(_ name: String, zoneName: String, recordType: String) -> ItemFailure? {
        guard isUserRecordName(name, zoneName: zoneName) else { return nil }
        guard name == user else {
            return RecordCodec.error(.permissionFailure, "only user \(name) may write the Users record \(name)")
        }
        guard recordType == Self.userRecordType else {
            return RecordCodec.error(
                .invalidArguments, "the record \(name) is a \(Self.userRecordType) record, not a \(recordType)")
        }
        return nil
    }

    /// Why the user may not delete `name` whatever is stored, or nil: the Users records.
    package func deletionRefusal(_ name: String, zoneName: String) -> ItemFailure? {
        guard isUserRecordName(name, zoneName: zoneName) else { return nil }
        return RecordCodec.error(.permissionFailure, "the Users record \(name) cannot be deleted")
    }

    /// Why the user may not change or delete the stored record `name`, or nil: another
    /// user's record of the public database.
    package func ownershipRefusal(_ name: String, existing: some StoredRecordSummary) -> ItemFailure? {
        guard key.scope == .public && existing.creator != user else { return nil }
        return RecordCodec.error(.permissionFailure, "record \(name) belongs to another user")
    }

    /// The failure of a save of `name` whose `deleteSelf` reference names `target`, a record
    /// that neither exists in the zone nor is saved by the same request.
    package static func missingDeleteSelfTarget(_ name: String, target: String) -> ItemFailure {
        RecordCodec.error(
            .referenceViolation,
            "record \(name): record \(target), the target of its deleteSelf reference, does not exist "
                + "(save a new target in the same operation)")
    }

    /// A save whose record-level checks passed.
    package struct CheckedSave {
        package var name: String
        /// The stored record the save changes, decoded; nil for a new record.
        package var serverRecord: Wire.Record?
        /// The record to store: the record ID in the zone, the fields, parent and share
        /// fields as the policy merges them; system fields not yet set.
        package var record: Wire.Record
    }

    /// Runs the record-level checks of saving `client` over `existing` (the stored row of its
    /// name in the zone, nil when there is none) under `policy`, and merges what to store.
    /// `decode` decodes `existing`; it runs only when there is one.
    ///
    /// What depends on a database (shares, assets, references) the engine checks after.
    package func checkSave<Row: StoredRecordSummary>(
        _ client: Wire.Record, existing: Row?, zoneName: String, policy: Wire.SavePolicy,
        decode: (Row) throws -> Wire.Record
    ) rethrows -> ItemResult<CheckedSave> {
        guard let clientID = client.recordID else {
            return .failure(RecordCodec.error(.invalidArguments, "record without a record ID"))
        }
        let name = clientID.recordName
        if let refusal = userRecordRefusal(name, zoneName: zoneName, recordType: client.recordType) {
            return .failure(refusal)
        }
        var serverRecord: Wire.Record?
        if let existing {
            serverRecord = try decode(existing)
            if let refusal = ownershipRefusal(name, existing: existing) { return .failure(refusal) }
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
            recordID: Wire.RecordID(recordName: name, zoneID: ZoneResolution.zoneID(zoneName, in: key)),
            recordType: client.recordType)
        record.fields = RecordCodec.fieldsToStore(client: client, server: serverRecord?.fields, policy: policy)
        if policy == .changedKeys {
            record.parent = client.parent ?? serverRecord?.parent
            record.shareFields = client.shareFields ?? serverRecord?.shareFields
        } else {
            record.parent = client.parent
            record.shareFields = client.shareFields
        }
        return .success(CheckedSave(name: name, serverRecord: serverRecord, record: record))
    }
}

/// The arguments of a change feed read (records of a zone, zones of a database) that every
/// engine checks alike before it reads anything.
package enum ChangeFeedArguments {
    /// - throws: ``StoreError`` `.invalidArguments` for a negative `since`, a limit below 1
    ///   or `through` before `since`.
    package static func check(since: Int64, through: Int64?, limit: Int) throws(StoreError) {
        guard since >= 0, limit > 0, (through ?? since) >= since else {
            throw StoreError(.invalidArguments, "change sequence \(since) or limit \(limit) out of range")
        }
    }

    /// The name of the zone whose record changes are read.
    ///
    /// - throws: ``StoreError`` `.zoneNotFound` for a zone ID that names no zone of `key`.
    package static func zoneName(of zone: Wire.RecordZoneID, in key: DatabaseKey) throws(StoreError) -> String {
        switch ZoneResolution.zoneName(of: zone, in: key) {
        case .failure(let failure): throw StoreError(.zoneNotFound, failure.message)
        case .success(let resolved): return resolved
        }
    }

    /// The record changes of a zone that has no row: the default zone exists before anything
    /// was written to it, and has no changes.
    ///
    /// - throws: ``StoreError`` `.zoneNotFound` for any other zone; `.changeTokenExpired` for
    ///   a sequence after 0.
    package static func changesOfAbsentZone<Changed>(
        _ name: String, since: Int64
    ) throws(StoreError) -> ChangeBatch<Changed> {
        guard name == RecordCodec.defaultZoneName else {
            throw StoreError(.zoneNotFound, "zone \(name) does not exist")
        }
        guard since == 0 else {
            throw StoreError(.changeTokenExpired, "change sequence \(since) of zone \(name) expired")
        }
        return ChangeBatch(
            changed: [], deleted: [], lastSeq: 0, moreComing: false, clientChangeToken: [], zoneIncarnation: 0)
    }

    /// The last change sequence a record-changes read of a live zone reports: changes after
    /// it belong to a later fetch, so a record changed while a fetch pages moves past it and
    /// is reported once, by the next fetch, at its newest state.
    ///
    /// - throws: ``StoreError`` `.changeTokenExpired` when `since` is past the zone's
    ///   sequence, or tombstones after it (and after `floor`, what the caller already has)
    ///   were pruned.
    package static func head(
        since: Int64, floor: Int64, through: Int64?, zoneName: String, changeSeq: Int64, prunedSeq: Int64
    ) throws(StoreError) -> Int64 {
        guard since <= changeSeq, since == 0 || max(since, floor) >= prunedSeq else {
            throw StoreError(.changeTokenExpired, "change sequence \(since) of zone \(zoneName) expired")
        }
        return min(through ?? changeSeq, changeSeq)
    }

    /// Merges a page of changed records and one of tombstones, each read in sequence order
    /// with up to `limit + 1` rows, into at most `limit` changes in sequence order, handing
    /// each to `changed` or `deleted`. Returns the sequence the page ends at (`head` when no
    /// more are coming) and whether more are.
    package static func merge<Record, Tombstone>(
        _ records: [Record], seq recordSeq: (Record) -> Int64, _ tombstones: [Tombstone],
        seq tombstoneSeq: (Tombstone) -> Int64, since: Int64, head: Int64, limit: Int,
        changed: (Record) throws -> Void, deleted: (Tombstone) throws -> Void
    ) rethrows -> (lastSeq: Int64, moreComing: Bool) {
        var r = 0
        var t = 0
        var lastSeq = since
        while r + t < limit && (r < records.count || t < tombstones.count) {
            if r < records.count, t == tombstones.count || recordSeq(records[r]) < tombstoneSeq(tombstones[t]) {
                try changed(records[r])
                lastSeq = recordSeq(records[r])
                r += 1
            } else {
                try deleted(tombstones[t])
                lastSeq = tombstoneSeq(tombstones[t])
                t += 1
            }
        }
        let moreComing = r < records.count || t < tombstones.count
        return (moreComing ? lastSeq : head, moreComing)
    }
}
