import CirrusWire
import Foundation
import GRDB

extension RecordWriter {
    /// A save whose checks all passed: what ``apply(_:in:)`` writes, without
    /// reading anything that could make it fail.
    struct PreparedSave {
        var existing: RecordRow?
        var serverRecord: Wire.Record?
        /// The record to store, system fields not yet set.
        var record: Wire.Record
        var assets: [RecordCodec.AssetContent]
        var checksums: Set<[UInt8]>
        /// Set when the record is a share: its row and participants.
        var share: SQLitePreparedShare? = nil
        /// The client's fields, encoded before the writer (``RecordModificationPlan/encodeFieldsAhead()``);
        /// used only if `record` still has those very fields.
        var encodedFields: Wire.EncodedRecordFields? = nil
        /// `existing` is nil because the record was taken to be new, not because no row was
        /// found (``mayAssumeNew(_:)``): the insert proves it, or ``apply(_:in:)`` throws
        /// ``NameTaken`` having written nothing of the record.
        var assumedNew = false
    }

    /// What ``apply(_:in:)`` throws when a save taken to be new finds its name taken: nothing
    /// of the record was written, and the save runs again with the stored row.
    struct NameTaken: Error {}

    /// Whether a save may skip reading its stored row, taken to be new: the client sends no
    /// change tag (it holds no saved version: a record it created), the record is no share
    /// (whose save writes other rows), and the write is the owner's own (a participant's
    /// checks read the row). Checked against the row only if the insert finds the name taken,
    /// or a check fails: the save then runs again as if read first, so the outcome is always
    /// the one reading first gives.
    func mayAssumeNew(_ client: Wire.Record) -> Bool {
        sharedScope == nil && client.recordChangeTag.isEmpty && client.recordType != ShareRules.shareType
    }

    /// Saves one record under `policy`; the record as stored, or its error.
    ///
    /// - parameter existing: the stored rows of the zone's records this save may name, read
    ///   ahead for a whole group (a name missing there has no row); nil to read its own.
    mutating func save(
        _ client: Wire.Record, in zone: ZoneRow, policy: Wire.SavePolicy, encodedFields: Wire.EncodedRecordFields? = nil,
        existing rows: [String: RecordRow]? = nil
    ) throws -> ItemResult<Wire.Record> {
        guard let name = client.recordID?.recordName else {
            return .failure(RecordCodec.error(.invalidArguments, "record without a record ID"))
        }
        let existing: RecordRow?
        if mayAssumeNew(client) {
            // Taken to be new, without reading its row (most saves of a record without a change
            // tag create it): kept only when every check passes and the insert succeeds.
            if case .success(var prepared) = try prepareSave(
                client, existing: nil, in: zone, policy: policy, encodedFields: encodedFields)
            {
                prepared.assumedNew = true
                do {
                    return .success(try apply(consume prepared, in: zone))
                } catch is NameTaken {}
            }
            existing = try StoreRows.record(db, zoneID: zone.id, name: name)
        } else {
            existing = try rows.map { $0[name] } ?? StoreRows.record(db, zoneID: zone.id, name: name)
        }
        if let refusal = try sharedScopeRefusal(client, existing: existing, in: zone) { return .failure(refusal) }
        switch try prepareSave(client, existing: existing, in: zone, policy: policy, encodedFields: encodedFields) {
        case .failure(let failure): return .failure(failure)
        case .success(let prepared): return .success(try apply(consume prepared, in: zone))
        }
    }

    /// Runs every check of a save (reads only, nothing written); `existing` is
    /// the stored row of the record's name, if any.
    func prepareSave(
        _ client: Wire.Record, existing: RecordRow?, in zone: ZoneRow, policy: Wire.SavePolicy,
        encodedFields: Wire.EncodedRecordFields? = nil
    ) throws -> ItemResult<PreparedSave> {
        let checked: RecordRules.CheckedSave
        switch try rules.checkSave(client, existing: existing, zoneName: zone.name, policy: policy, decode: { try $0.record() }) {
        case .failure(let failure): return .failure(failure)
        case .success(let save): checked = save
        }
        let name = checked.name
        let serverRecord = checked.serverRecord
        var record = checked.record
        var preparedShare: SQLitePreparedShare?
        if record.recordType == ShareRules.shareType {
            switch try prepareShare(&record, in: zone) {
            case .failure(let failure): return .failure(failure)
            case .success(let share): preparedShare = share
            }
        } else {
            switch try shareReference(for: client, server: serverRecord, in: zone) {
            case .failure(let failure): return .failure(failure)
            // Set only when it changes: setting a part of a record held twice (`checked` holds
            // it too) copies the record, and most records have no share to set.
            case .success(let share):
                if record.share != share { record.share = share }
            }
        }
        // Fields the plan encoded are fields it found without assets (``RecordModificationPlan``
        // encodes no other); still the record's own, they have no content to take out and no
        // checksum to look up.
        let withoutAssets = encodedFields?.encodes(record.fields) == true
        var assets: [RecordCodec.AssetContent] = []
        if !withoutAssets {
            switch RecordCodec.extractAssets(&record) {
            case .failure(let failure): return .failure(failure)
            case .success(let contents): assets = contents
            }
        }
        for target in RecordCodec.deleteSelfTargets(of: record, zoneName: zone.name) where !savedInZone.contains(target.name) {
            guard try StoreRows.recordExists(db, zoneID: zone.id, name: target.name) else {
                return .failure(RecordRules.missingDeleteSelfTarget(name, target: target.name))
            }
        }
        let checksums = withoutAssets ? [] : RecordCodec.assetChecksums(in: record)
        for checksum in RecordCodec.checksumsToFind(checksums, arriving: assets) {
            guard try db.int64(sql: "SELECT size FROM assets WHERE sha256 = ?", arguments: [Data(checksum)]) != nil else {
                return .failure(RecordCodec.unknownAsset(in: name))
            }
        }
        return .success(PreparedSave(
            existing: existing, serverRecord: serverRecord, record: record, assets: assets, checksums: checksums,
            share: preparedShare, encodedFields: encodedFields))
    }

    /// Writes a prepared save; the record as stored. Throws only when SQLite does.
    ///
    /// The record is moved out of `prepared`: the one ``prepareSave`` made (``RecordRules``
    /// builds a new one) is then held once, and setting its system fields does not copy it.
    mutating func apply(_ prepared: consuming PreparedSave, in zone: ZoneRow) throws -> Wire.Record {
        let existing = prepared.existing
        var record = Self.movedOut
        swap(&record, &prepared.record)
        let name = record.recordName
        let seq = try nextSeq(zone.id)
        record.recordChangeTag = RecordChangeTag.make(zoneID: zone.id, seq: seq)
        record.creationDate = prepared.serverRecord?.creationDate ?? now
        record.modificationDate = now
        let creator = existing?.creator ?? user
        record.creatorUserRecordID = ZoneResolution.storedUserRecordID(creator)
        record.lastModifiedUserRecordID = ZoneResolution.storedUserRecordID(user)

        record.serialize(reusing: prepared.encodedFields, into: &recordStatements.row.bytes)
        let system = StoreRows.systemColumns(of: record)
        let rowID: Int64
        let indexed = try transaction.indexed(db, zoneID: zone.id, recordType: record.recordType)
        // The rows of every saved record are bound through SQLite's C API (``RawStatement``).
        if let existing {
            rowID = existing.id
            let update = try RawStatement(
                db,
                sql: """
                    UPDATE records SET change_tag = ?, change_seq = ?, data = ?, modified_ns = ?, modifier = ?,
                        sys_indexed = ?
                    WHERE id = ?
                    """,
                reusing: &recordStatements.update)
            recordStatements.row.texts.removeAll()
            recordStatements.row.texts.append(1, record.recordChangeTag)
            recordStatements.row.texts.append(5, system.modifier)
            update.bind(2, seq)
            update.bind(4, system.modified)
            update.bind(6, indexed.system ? 1 : 0)
            update.bind(7, rowID)
            try update.withBorrowedBindings(recordStatements.row.texts, blob: recordStatements.row.bytes, at: 3) { try update.run() }
            // A type whose zone indexes nothing has no rows to delete (its type cannot change).
            if indexed.writesRows { try StoreRows.deleteIndex(db, recordID: rowID) }
            try db.run(sql: "DELETE FROM cascade_references WHERE source_id = ?", arguments: [rowID])
            try db.run(sql: "DELETE FROM asset_references WHERE record_id = ?", arguments: [rowID])
        } else {
            // A record saved again supersedes its tombstone (schema v5 dropped
            // the trigger that did this: a trigger costs every insert a statement journal).
            if try transaction.mayHoldTombstones(db, zoneID: zone.id) {
                let dropTombstone = try RawStatement(db, sql: "DELETE FROM tombstones WHERE zone_id = ? AND name = ?")
                dropTombstone.bind(1, zone.id)
                dropTombstone.bind(2, name)
                try dropTombstone.run()
            }
            let insert = try RawStatement(
                db,
                sql: """
                    INSERT INTO records (zone_id, name, record_type, change_tag, change_seq, creator, data,
                        created_ns, modified_ns, modifier, sys_indexed)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """,
                reusing: &recordStatements.insert)
            recordStatements.row.texts.removeAll()
            recordStatements.row.texts.append(2, name)
            recordStatements.row.texts.append(3, record.recordType)
            recordStatements.row.texts.append(4, record.recordChangeTag)
            recordStatements.row.texts.append(6, creator)
            recordStatements.row.texts.append(10, system.modifier)
            insert.bind(1, zone.id)
            insert.bind(5, seq)
            insert.bind(8, system.created)
            insert.bind(9, system.modified)
            // The record's own columns (type, dates, creator) go into their indexes only where a
            // query has read the zone and type (``FieldIndexing/system``).
            insert.bind(11, indexed.system ? 1 : 0)
            let assumedNew = prepared.assumedNew
            let inserted = try insert.withBorrowedBindings(recordStatements.row.texts, blob: recordStatements.row.bytes, at: 7) {
                // Nothing of the record written yet (its tombstone, if any, went with the name:
                // a live record has none), and a failed insert writes nothing.
                if assumedNew { return try insert.runUnlessUniqueViolated() }
                try insert.run()
                return true
            }
            guard inserted else { throw NameTaken() }
            rowID = insert.lastInsertedRowID
        }
        try StoreRows.insertIndex(db, recordID: rowID, zoneID: zone.id, record: record, indexed: indexed)
        for target in RecordCodec.deleteSelfTargets(of: record, zoneName: zone.name) {
            try db.run(
                sql: "INSERT INTO cascade_references (source_id, database_id, target_zone, target_name) VALUES (?, ?, ?, ?)",
                arguments: [rowID, databaseID, target.zone, target.name])
        }
        for checksum in prepared.checksums {
            try db.run(
                sql: "INSERT INTO asset_references (record_id, sha256) VALUES (?, ?)", arguments: [rowID, Data(checksum)])
        }
        for asset in prepared.assets {
            // Content kept as a file of the asset store has an empty blob here: the row
            // says the server has it (and its size), the file holds the bytes.
            try db.run(
                sql: "INSERT OR IGNORE INTO assets (sha256, size, content) VALUES (?, ?, ?)",
                arguments: [Data(asset.sha256), Int64(clamping: asset.size), Data(asset.content ?? [])])
        }
        if let share = prepared.share {
            try applyShare(share, name: name, in: zone)
            forgetSharesRead(of: zone.id)
        }
        touch(zone.id)
        if try !subscriptions.isEmpty || isShared(zone.id) {
            changes.append(RecordChange(
                zoneName: zone.name, recordType: record.recordType, recordName: name,
                old: prepared.serverRecord, new: record))
        }
        return record
    }

    /// What ``apply(_:in:)`` leaves in a save it took the record out of: one value shared by
    /// all, so taking a record out allocates nothing.
    private static let movedOut = Wire.Record()

    /// Deletes one record and, transitively, every record holding a deleteSelf
    /// reference to a deleted one. Deleting a record that does not exist succeeds.
    mutating func delete(_ name: String, in zone: ZoneRow) throws -> ItemFailure? {
        if let refusal = rules.deletionRefusal(name, zoneName: zone.name) { return refusal }
        let existing = try StoreRows.record(db, zoneID: zone.id, name: name)
        if sharedScope != nil {
            // A participant deletes records of their shares only; one that does not exist is
            // refused alike.
            guard let existing else { return ShareRules.notInScope(name) }
            if let refusal = try sharedScopeRefusal(existing.record(), existing: existing, in: zone) { return refusal }
        }
        guard let existing else { return nil }
        if let refusal = rules.ownershipRefusal(name, existing: existing) { return refusal }
        try deleteRow(existing, zoneID: zone.id, zoneName: zone.name, name: name)
        if existing.recordType == ShareRules.shareType {
            try forgetShare(name, in: zone)
        } else {
            try deleteShare(ofRoot: existing, named: name, in: zone)
        }
        var pending: [(zone: String, name: String)] = [(zone.name, name)]
        while let target = pending.popLast() {
            let sources = try db.rows(
                sql: """
                    SELECT r.id, r.name, r.record_type, r.zone_id, z.name AS zone_name
                    FROM cascade_references c
                    JOIN records r ON r.id = c.source_id
                    JOIN zones z ON z.id = r.zone_id
                    WHERE c.database_id = ? AND c.target_zone = ? AND c.target_name = ?
                    """,
                arguments: [databaseID, target.zone, target.name])
            for source in sources {
                let sourceName: String = source["name"]
                let zoneName: String = source["zone_name"]
                let zoneID: Int64 = source["zone_id"]
                // Already deleted through another path (a cycle) when the row is gone.
                guard let row = try StoreRows.record(db, zoneID: zoneID, name: sourceName) else {
                    continue
                }
                try deleteRow(row, zoneID: zoneID, zoneName: zoneName, name: sourceName)
                cascaded.append(Wire.RecordID(recordName: sourceName, zoneID: ZoneResolution.zoneID(zoneName, in: key)))
                pending.append((zoneName, sourceName))
            }
        }
        return nil
    }

    mutating func deleteRow(_ row: RecordRow, zoneID: Int64, zoneName: String, name: String) throws {
        let seq = try nextSeq(zoneID)
        let sharedBy = try sharesHolding(row, named: name, zoneID: zoneID)
        try db.run(
            sql: """
                INSERT OR REPLACE INTO tombstones (zone_id, name, record_type, seq, deleted_at, shared_by)
                VALUES (?, ?, ?, ?, ?, ?)
                """,
            arguments: [zoneID, name, row.recordType, seq, RecordCodec.seconds(now),
                        sharedBy.isEmpty ? nil : sharedBy.joined(separator: "\n")])
        transaction.tombstoneWritten(in: zoneID)
        try db.run(sql: "DELETE FROM records WHERE id = ?", arguments: [row.id])
        touch(zoneID)
        if try !subscriptions.isEmpty || isShared(zoneID) {
            let old = subscriptions.needsPreviousState(of: row.recordType) ? try row.record() : nil
            changes.append(RecordChange(
                zoneName: zoneName, recordType: row.recordType, recordName: name, old: old, new: nil))
        }
    }
}
