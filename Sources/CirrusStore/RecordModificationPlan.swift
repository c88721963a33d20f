import CirrusWire

/// The part of a modify-records request that needs no database: each item
/// checked on its own and grouped by zone. Built before the request reaches
/// the single writer, so the writer spends its time on what only it can do.
package struct RecordModificationPlan: Sendable {
    package enum Item: Sendable {
        case save(Int, Wire.Record)
        case delete(Int, Wire.RecordID)
    }

    /// An item and, when it is malformed, the error it gets without running.
    package struct GroupItem: Sendable {
        package var item: Item
        package var problem: ItemFailure?
    }

    /// The items of one zone, in request order.
    package struct Group: Sendable {
        package var zoneName: String
        package var items: [GroupItem] = []
        /// The names the group saves (items without a problem): a `deleteSelf` reference may
        /// name one of them before it is stored (CloudKit: save both in one operation).
        package var savedNames: Set<String> = []
        /// The roots the group saves for shares, by share name: a record saved with its
        /// `share` naming a share record the group also saves (CloudKit: a new share is saved
        /// with its root in one operation).
        package var shareRoots: [String: String] = [:]
    }

    package let request: RecordModification
    /// One per record to save; a failure already for an item no zone could be found for,
    /// ``unwritten`` for the others until the writer sets their outcome.
    package private(set) var saves: [RecordSaveOutcome]
    /// One per record to delete, likewise (no failure until the writer sets one).
    package private(set) var deletes: [RecordDeletion]
    /// By zone in order of first appearance. An item whose zone is known but
    /// which is malformed (or names a record a second time) stays in its group
    /// with its error, so an atomic zone fails with it.
    package private(set) var groups: [Group] = []
    /// By save index: the record's fields encoded ahead (``encodeFieldsAhead()``), or nil.
    package private(set) var encodedFields: [Wire.EncodedRecordFields?] = []

    /// - parameter encodingFieldsAhead: also encode the fields the writer will most likely
    ///   store as sent (``encodeFieldsAhead()``), for an engine that serializes records.
    package init(_ request: RecordModification, in key: DatabaseKey, encodingFieldsAhead: Bool = false) {
        self.request = request
        saves = request.recordsToSave.map { RecordSaveOutcome(id: $0.recordID, result: .failure(Self.unwritten)) }
        deletes = request.recordIDsToDelete.map { RecordDeletion(id: $0) }
        // Most requests name one zone, and many one item: nothing below allocates for what such a
        // request cannot have (a second zone, a second mention, a share).
        // The group of each zone once there are several; the last group placed is tried first.
        var groupIndex: [String: Int] = [:]
        var lastGroup = -1
        // The record names each group names so far (saves and deletes), to catch a second
        // mention; none for a request of one item.
        let catchesRepeats = request.itemCount > 1
        var seen: [Set<String>] = []
        // The shares each group saves, by group: a root names one of them, or its share is not new.
        var savedShares: [Int: Set<String>] = [:]
        // Saves, then deletes, each placed in its zone's group; no intermediate list of items.
        func place(_ item: Item, _ recordID: Wire.RecordID?) {
            guard let recordID else { fail(item, RecordCodec.error(.invalidArguments, "missing record ID")); return }
            let zoneName: String
            switch ZoneResolution.zoneName(of: recordID.zoneID, in: key) {
            case .failure(let failure): fail(item, failure); return
            case .success(let name): zoneName = name
            }
            let i: Int
            if lastGroup >= 0, groups[lastGroup].zoneName == zoneName {
                i = lastGroup
            } else if let existing = groupIndex[zoneName] {
                i = existing
            } else {
                i = groups.count
                if i == 1 { groupIndex[groups[0].zoneName] = 0 }
                if i >= 1 { groupIndex[zoneName] = i }
                var group = Group(zoneName: zoneName)
                var names = Set<String>()
                // The first zone is most often the only one: its sets never grow item by item.
                if i == 0 {
                    group.savedNames.reserveCapacity(request.recordsToSave.count)
                    if catchesRepeats { names.reserveCapacity(request.itemCount) }
                }
                groups.append(group)
                if catchesRepeats { seen.append(names) }
            }
            lastGroup = i
            var problem = RecordCodec.checkName(recordID.recordName, of: "record")
            if problem == nil, case .save(let index, let record) = item {
                problem = (request.refusals.isEmpty ? nil : request.refusals[index]) ?? RecordCodec.checkRecordToSave(record)
                    ?? RecordCodec.checkLinksStayInZone(record, zoneName: zoneName, in: key)
                    ?? ShareRules.checkPlacement(of: record, zoneName: zoneName, in: key)
            }
            if problem == nil, catchesRepeats, !seen[i].insert(recordID.recordName).inserted {
                problem = RecordCodec.error(.invalidArguments, "record \(recordID.recordName) appears twice in one request")
            }
            if problem == nil, case .save(_, let record) = item {
                groups[i].savedNames.insert(recordID.recordName)
                if record.recordType == ShareRules.shareType {
                    savedShares[i, default: []].insert(recordID.recordName)
                } else if let shareName = record.share?.recordID?.recordName {
                    groups[i].shareRoots[shareName] = recordID.recordName
                }
            }
            groups[i].items.append(GroupItem(item: item, problem: problem))
        }
        for (index, record) in request.recordsToSave.enumerated() {
            place(.save(index, record), record.recordID)
        }
        for (index, id) in request.recordIDsToDelete.enumerated() {
            place(.delete(index, id), id)
        }
        for i in groups.indices where !groups[i].shareRoots.isEmpty {
            let shares = savedShares[i] ?? []
            groups[i].shareRoots = groups[i].shareRoots.filter { shares.contains($0.key) }
        }
        if encodingFieldsAhead { encodeFieldsAhead() }
    }

    /// Encodes, here and now, the fields of every save the writer will most likely store as
    /// they were sent: a new record (no change tag) or any record under `allKeys`, with
    /// neither a problem nor assets (whose content the writer takes out of the fields; the
    /// writer relies on it, skipping its asset passes over fields it finds encoded here). The
    /// writer encodes only the rest of such a record (``Wire/Record/serializedBytes(reusing:)``);
    /// where it stores other fields after all (a record that existed, a merge), the
    /// encoding goes unused and the writer encodes the whole record as before.
    private mutating func encodeFieldsAhead() {
        let policy = request.savePolicy
        encodedFields = Array(repeating: nil, count: request.recordsToSave.count)
        for group in groups {
            for entry in group.items where entry.problem == nil {
                guard case .save(let index, let record) = entry.item, !record.fields.isEmpty,
                    policy == .allKeys || (policy != .changedKeys && record.recordChangeTag.isEmpty),
                    record.recordType != ShareRules.shareType, !record.hasAssets
                else { continue }
                // Encoded already where the fields are still the array encoded (the journal of
                // a long-lived operation encoded them to store its `Open`).
                if let shared = request.fieldEncodings[index], shared.encodes(record.fields) {
                    encodedFields[index] = shared
                } else {
                    encodedFields[index] = Wire.EncodedRecordFields(record.fields)
                }
            }
        }
    }

    /// The outcome of a save before the writer ran it. The writer replaces it for every save
    /// it gets (and it gets every save that has a zone), so no result carries it.
    package static let unwritten = ItemFailure(.batchRequestFailed, "the record was not written")

    private mutating func fail(_ item: Item, _ failure: ItemFailure) {
        switch item {
        case .save(let i, _): saves[i].result = .failure(failure)
        case .delete(let i, _): deletes[i].failure = failure
        }
    }
}
