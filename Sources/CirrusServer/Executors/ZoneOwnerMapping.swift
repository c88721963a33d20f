import CirrusWire

/// Maps zone owner names between what clients send and what the store keeps.
///
/// Clients name their own zones with CloudKit's `__defaultOwner__` (`CKCurrentUserDefaultName`);
/// the store keys every zone by the real owner of its database (`_alice`; `""` in the public
/// database). Inbound IDs are resolved to the real owner; outbound IDs that name the caller's
/// own database go back as `__defaultOwner__`, so the IDs a client gets back equal the ones it
/// sent (its dictionaries of per-item results and errors are keyed by them).
struct ZoneOwnerMapping: Sendable {
    static let currentUser = "__defaultOwner__"

    /// The owner the store uses for this database.
    let databaseOwner: String
    /// Gives outbound assets whose content is a file a download handle for the caller; nil =
    /// assets go out as the store has them.
    var downloads: AssetDownloadIssuer? = nil
    /// The caller's user record name: a share they see names their own participant as
    /// `current_user_participant`.
    var caller: String = ""
    /// What goes before the path of a share's URL (`https://host:port`).
    var shareURLBase: String = ""

    /// Which way a value crosses: from a client to the store, or back.
    private enum Direction {
        case inbound, outbound
    }

    /// The owner `owner` becomes going `direction`; nil when it stays as it is.
    private func owner(_ owner: String, _ direction: Direction) -> String? {
        switch direction {
        case .inbound:
            // The caller's own zones: `__defaultOwner__` or no owner.
            guard owner == Self.currentUser || owner.isEmpty, owner != self.databaseOwner else { return nil }
            return self.databaseOwner
        case .outbound:
            return owner == self.databaseOwner ? Self.currentUser : nil
        }
    }

    // MARK: Inbound

    func inbound(_ zoneID: Wire.RecordZoneID) -> Wire.RecordZoneID {
        var zoneID = zoneID
        self.map(&zoneID, .inbound)
        return zoneID
    }

    func inbound(_ recordID: Wire.RecordID) -> Wire.RecordID {
        var recordID = recordID
        self.map(&recordID, .inbound)
        return recordID
    }

    func inbound(_ record: Wire.Record) -> Wire.Record {
        var record = record
        self.map(&record, .inbound)
        return record
    }

    func inbound(_ zone: Wire.RecordZone) -> Wire.RecordZone {
        var zone = zone
        zone.zoneID = zone.zoneID.map(self.inbound)
        return zone
    }

    // MARK: Outbound

    func outbound(_ zoneID: Wire.RecordZoneID) -> Wire.RecordZoneID {
        var zoneID = zoneID
        self.map(&zoneID, .outbound)
        return zoneID
    }

    func outbound(_ recordID: Wire.RecordID) -> Wire.RecordID {
        var recordID = recordID
        self.map(&recordID, .outbound)
        return recordID
    }

    func outbound(_ record: Wire.Record) -> Wire.Record {
        var mapped = record
        self.mapOutbound(&mapped)
        return mapped
    }

    /// What ``outbound(_:)-(Wire.Record)`` returns, made in place: a record no one else holds
    /// (one moved out of a result) is not copied.
    func mapOutbound(_ record: inout Wire.Record) {
        self.map(&record, .outbound)
        // Compared, not bound: binding copies the (absent, as a rule) share fields.
        if record.shareFields != nil, var share = record.shareFields {
            if share.url.hasPrefix("/") { share.url = self.shareURLBase + share.url }
            share.currentUserParticipant = share.participants.first { participant in
                !self.caller.isEmpty && participant.userIdentity?.userRecordID?.recordName == self.caller
            }
            record.shareFields = share
        }
        if let downloads, record.hasAssets { record = downloads.addingHandles(to: record) }
    }

    /// How records kept serialized are mapped outbound (make it once per batch): their IDs as
    /// ``outbound(_:)-(Wire.Record)`` maps a decoded record's (a plain record has no asset to give
    /// a download handle, no share fields). Nil when they must be decoded and mapped: in the
    /// public database (owner `""`) an absent owner would be filled in.
    var serializedRecordRenaming: Wire.SerializedRecord.OwnerRenaming? {
        guard !self.databaseOwner.isEmpty else { return nil }
        return Wire.SerializedRecord.OwnerRenaming(owner: self.databaseOwner, replacement: Self.currentUser)
    }

    func outbound(_ zone: Wire.RecordZone) -> Wire.RecordZone {
        var zone = zone
        zone.zoneID = zone.zoneID.map(self.outbound)
        if var share = zone.share {
            share.recordID = share.recordID.map(self.outbound)
            zone.share = share
        }
        return zone
    }

    // MARK: Mapping every ID inside a value

    // In place, and each part only when it changes: a record is stored out of line (copy on
    // write), so a record whose IDs already name the right owner is not copied, and one that
    // is copied once, not once per part.

    private func map(_ zoneID: inout Wire.RecordZoneID, _ direction: Direction) {
        if let owner = self.owner(zoneID.ownerName, direction) {
            zoneID.ownerName = owner
        }
    }

    private func map(_ recordID: inout Wire.RecordID, _ direction: Direction) {
        if recordID.zoneID == nil {
            recordID.zoneID = Wire.RecordZoneID(zoneName: "_defaultZone")
        }
        if let owner = recordID.zoneID.flatMap({ self.owner($0.ownerName, direction) }) {
            recordID.zoneID?.ownerName = owner
        }
    }

    private func map(_ recordID: inout Wire.RecordID?, _ direction: Direction) {
        guard var mapped = recordID else { return }
        self.map(&mapped, direction)
        recordID = mapped
    }

    private func map(_ reference: inout Wire.Reference?, _ direction: Direction) {
        guard var mapped = reference else { return }
        self.map(&mapped, direction)
        reference = mapped
    }

    private func needsMapping(_ recordID: Wire.RecordID?, _ direction: Direction) -> Bool {
        guard let recordID else { return false }
        guard let zoneID = recordID.zoneID else { return true }
        return self.owner(zoneID.ownerName, direction) != nil
    }

    private func map(_ reference: inout Wire.Reference, _ direction: Direction) {
        if self.needsMapping(reference.recordID, direction) {
            self.map(&reference.recordID, direction)
        }
    }

    private func map(_ record: inout Wire.Record, _ direction: Direction) {
        if self.needsMapping(record.recordID, direction) {
            self.map(&record.recordID, direction)
        }
        // Most records have neither: not read at all then (see `Wire.Record.hasParentOrShare`).
        if record.hasParentOrShare {
            if self.needsMapping(record.parent?.recordID, direction) {
                self.map(&record.parent, direction)
            }
            if self.needsMapping(record.share?.recordID, direction) {
                self.map(&record.share, direction)
            }
        }
        // Only the references: a record without any keeps its fields' storage (and is not
        // walked field by field, each field copied to be looked at).
        guard record.hasReferences else { return }
        for index in record.fields.indices {
            switch record.fields[index].value?.kind {
            case .referenceValue(var reference):
                guard self.needsMapping(reference.recordID, direction) else { continue }
                self.map(&reference, direction)
                record.fields[index].value?.kind = .referenceValue(reference)
            case .referenceList(var list):
                guard list.values.contains(where: { self.needsMapping($0.recordID, direction) }) else { continue }
                for item in list.values.indices {
                    self.map(&list.values[item], direction)
                }
                record.fields[index].value?.kind = .referenceList(list)
            default:
                break
            }
        }
    }
}
