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

    // MARK: Inbound

    func inbound(_ zoneID: Wire.RecordZoneID) -> Wire.RecordZoneID {
        var zoneID = zoneID
        if zoneID.ownerName == Self.currentUser || zoneID.ownerName.isEmpty {
            zoneID.ownerName = self.databaseOwner
        }
        return zoneID
    }

    func inbound(_ recordID: Wire.RecordID) -> Wire.RecordID {
        self.map(recordID, zone: self.inbound)
    }

    func inbound(_ record: Wire.Record) -> Wire.Record {
        self.map(record, zone: self.inbound)
    }

    func inbound(_ zone: Wire.RecordZone) -> Wire.RecordZone {
        var zone = zone
        zone.zoneID = zone.zoneID.map(self.inbound)
        return zone
    }

    // MARK: Outbound

    func outbound(_ zoneID: Wire.RecordZoneID) -> Wire.RecordZoneID {
        var zoneID = zoneID
        if zoneID.ownerName == self.databaseOwner {
            zoneID.ownerName = Self.currentUser
        }
        return zoneID
    }

    func outbound(_ recordID: Wire.RecordID) -> Wire.RecordID {
        self.map(recordID, zone: self.outbound)
    }

    func outbound(_ record: Wire.Record) -> Wire.Record {
        var mapped = self.map(record, zone: self.outbound)
        if var share = mapped.shareFields {
            if share.url.hasPrefix("/") { share.url = self.shareURLBase + share.url }
            share.currentUserParticipant = share.participants.first { participant in
                !self.caller.isEmpty && participant.userIdentity?.userRecordID?.recordName == self.caller
            }
            mapped.shareFields = share
        }
        guard let downloads else { return mapped }
        return downloads.addingHandles(to: mapped)
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

    private func map(_ recordID: Wire.RecordID, zone: (Wire.RecordZoneID) -> Wire.RecordZoneID) -> Wire.RecordID {
        var recordID = recordID
        recordID.zoneID = zone(recordID.zoneID ?? Wire.RecordZoneID(zoneName: "_defaultZone"))
        return recordID
    }

    private func map(_ reference: Wire.Reference, zone: (Wire.RecordZoneID) -> Wire.RecordZoneID) -> Wire.Reference {
        var reference = reference
        reference.recordID = reference.recordID.map { self.map($0, zone: zone) }
        return reference
    }

    private func map(_ record: Wire.Record, zone: (Wire.RecordZoneID) -> Wire.RecordZoneID) -> Wire.Record {
        var record = record
        record.recordID = record.recordID.map { self.map($0, zone: zone) }
        record.parent = record.parent.map { self.map($0, zone: zone) }
        record.share = record.share.map { self.map($0, zone: zone) }
        // In place, and only the references: a record without any keeps its fields' storage.
        for index in record.fields.indices {
            switch record.fields[index].value?.kind {
            case .referenceValue(let reference):
                record.fields[index].value?.kind = .referenceValue(self.map(reference, zone: zone))
            case .referenceList(var list):
                list.values = list.values.map { self.map($0, zone: zone) }
                record.fields[index].value?.kind = .referenceList(list)
            default:
                break
            }
        }
        return record
    }
}
