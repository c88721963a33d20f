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

    package static func zoneID(_ name: String, in key: DatabaseKey) -> Wire.RecordZoneID {
        Wire.RecordZoneID(zoneName: name, ownerName: key.owner)
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
