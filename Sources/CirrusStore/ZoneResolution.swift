import CirrusWire

/// Maps zone IDs a request names onto the zones of one database.
package enum ZoneResolution {
    /// The zone name `zoneID` names inside `key`'s database (absent = the
    /// default zone); `zoneNotFound` for a zone owned by anyone else.
    package static func zoneName(of zoneID: Wire.RecordZoneID?, in key: DatabaseKey) -> ItemResult<String> {
        guard let zoneID else { return .success(RecordCodec.defaultZoneName) }
        guard zoneID.ownerName == key.owner else {
            return .failure(RecordCodec.error(.zoneNotFound, "zone \(zoneID.zoneName) does not exist"))
        }
        if let failure = RecordCodec.checkName(zoneID.zoneName, of: "zone") { return .failure(failure) }
        return .success(zoneID.zoneName)
    }

    /// The name of a zone to save; every engine checks a zone save with this before it reads.
    package static func nameToSave(_ zone: Wire.RecordZone, in key: DatabaseKey) -> ItemResult<String> {
        guard let zoneID = zone.zoneID else {
            return .failure(RecordCodec.error(.invalidArguments, "zone without a zone ID"))
        }
        return zoneName(of: zoneID, in: key)
    }

    /// Why a zone that has no row may not be created in, or deleted from, `key`'s database,
    /// or nil: only private databases have custom zones.
    package static func customZoneRefusal(_ name: String, in key: DatabaseKey) -> ItemFailure? {
        guard key.scope != .private else { return nil }
        return RecordCodec.error(.invalidArguments, "custom zone \(name): only private databases have custom zones")
    }

    /// The name of a zone to delete, when it may be deleted: never the default zone, and only
    /// in a private database; every engine checks a zone deletion with this before it reads.
    package static func nameToDelete(_ zoneID: Wire.RecordZoneID, in key: DatabaseKey) -> ItemResult<String> {
        switch zoneName(of: zoneID, in: key) {
        case .failure(let failure):
            return .failure(failure)
        case .success(let name):
            if name == RecordCodec.defaultZoneName {
                return .failure(RecordCodec.error(.invalidArguments, "the default zone cannot be deleted"))
            }
            if let refusal = customZoneRefusal(name, in: key) { return .failure(refusal) }
            return .success(name)
        }
    }

    package static func zoneID(_ name: String, in key: DatabaseKey) -> Wire.RecordZoneID {
        Wire.RecordZoneID(zoneName: name, ownerName: key.owner)
    }

    /// The creator or last modifier a saved record stores and returns: a user record ID with
    /// its zone left out, which the protocol reads as the default zone of `__defaultOwner__`
    /// (`RecordID.zone_id` absent), the same ID ``userRecordID(_:)`` spells out. Left out, it
    /// costs 34 bytes less per ID in every stored record, change and save reply, and a client
    /// decodes it without a zone ID of its own.
    package static func storedUserRecordID(_ user: String) -> Wire.RecordID {
        Wire.RecordID(recordName: user)
    }

    /// CloudKit's user record ID for a user record name.
    package static func userRecordID(_ user: String) -> Wire.RecordID {
        Wire.RecordID(
            recordName: user,
            zoneID: Wire.RecordZoneID(zoneName: RecordCodec.defaultZoneName, ownerName: "__defaultOwner__"))
    }

    static func zone(_ row: ZoneRow, in key: DatabaseKey) -> Wire.RecordZone {
        zone(named: row.name, encryptionScope: row.encryptionScope, in: key)
    }

    /// The zone `name` of `key`'s database as a client sees it.
    package static func zone(named name: String, encryptionScope: Int32, in key: DatabaseKey) -> Wire.RecordZone {
        Wire.RecordZone(
            zoneID: zoneID(name, in: key),
            capabilities: Wire.ZoneCapabilities(fetchChanges: true, atomic: true),
            encryptionScope: Wire.ZoneEncryptionScope(rawValue: encryptionScope))
    }

    /// The default zone of a database that has no row yet.
    package static func defaultZone(in key: DatabaseKey) -> Wire.RecordZone {
        Wire.RecordZone(
            zoneID: zoneID(RecordCodec.defaultZoneName, in: key),
            capabilities: Wire.ZoneCapabilities(fetchChanges: true, atomic: true))
    }
}
