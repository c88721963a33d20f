import CirrusWire
import Foundation

extension CKRecordZone.ID {
    /// The zone ID a wire message names. An empty owner means the current user.
    ///
    /// - throws: `CKError` `.invalidArguments` if the zone name is empty.
    package convenience init(wire: Wire.RecordZoneID) throws(CKError) {
        guard !wire.zoneName.isEmpty else {
            throw CKError(.invalidArguments, message: "invalid zone ID from the wire: empty zone name")
        }
        self.init(zoneName: wire.zoneName, ownerName: wire.ownerName.isEmpty ? CKCurrentUserDefaultName : wire.ownerName)
    }

    /// The zone ID as a wire message.
    package var wireZoneID: Wire.RecordZoneID {
        Wire.RecordZoneID(zoneName: zoneName, ownerName: ownerName)
    }
}

extension CKRecord.ID {
    /// The record ID a wire message names; an absent zone is the current user's default zone.
    ///
    /// - throws: `CKError` `.invalidArguments` if the record name or zone name is empty.
    package convenience init(wire: Wire.RecordID) throws(CKError) {
        guard !wire.recordName.isEmpty else {
            throw CKError(.invalidArguments, message: "invalid record ID from the wire: empty record name")
        }
        let zoneID = try wire.zoneID.map { (zone) throws(CKError) in try CKRecordZone.ID(wire: zone) } ?? .default
        self.init(recordName: wire.recordName, zoneID: zoneID)
    }

    /// Whether `wire` names this ID, as ``init(wire:)`` reads it (an absent zone is the default
    /// zone, an empty owner the current user), so that a decoder can use this object instead of
    /// a new equal one.
    package func isNamed(by wire: Wire.RecordID) -> Bool {
        guard wire.recordName == self.recordName else { return false }
        guard let zone = wire.zoneID else { return self.zoneID == CKRecordZone.ID.default }
        return zone.zoneName == self.zoneID.zoneName
            && (zone.ownerName.isEmpty ? CKCurrentUserDefaultName : zone.ownerName) == self.zoneID.ownerName
    }

    /// The record ID as a wire message (always with its zone).
    package var wireRecordID: Wire.RecordID {
        Wire.RecordID(recordName: recordName, zoneID: zoneID.wireZoneID)
    }
}

extension CKRecord.Reference {
    /// The reference a wire message describes. An unspecified or unknown action is `.none`.
    ///
    /// - throws: `CKError` `.invalidArguments` if the target is missing or invalid.
    package init(wire: Wire.Reference) throws(CKError) {
        guard let target = wire.recordID else {
            throw CKError(.invalidArguments, message: "invalid reference from the wire: no target record ID")
        }
        let action: CKRecord.ReferenceAction = wire.action == .deleteSelf ? .deleteSelf : .none
        self.init(recordID: try CKRecord.ID(wire: target), action: action)
    }

    /// The reference as a wire message (action always explicit).
    package var wireReference: Wire.Reference {
        Wire.Reference(recordID: recordID.wireRecordID, action: action == .deleteSelf ? .deleteSelf : .none)
    }
}

extension CKRecordZone {
    /// The zone a wire message describes.
    ///
    /// - throws: `CKError` `.invalidArguments` if the zone ID or share is missing or invalid.
    package convenience init(wire: Wire.RecordZone) throws(CKError) {
        guard let wireID = wire.zoneID else {
            throw CKError(.invalidArguments, message: "invalid zone from the wire: no zone ID")
        }
        var capabilities: Capabilities = []
        if let flags = wire.capabilities {
            if flags.fetchChanges { capabilities.insert(.fetchChanges) }
            if flags.atomic { capabilities.insert(.atomic) }
            if flags.sharing { capabilities.insert(.sharing) }
            if flags.zoneWideSharing { capabilities.insert(.zoneWideSharing) }
        }
        let share = try wire.share.map { (reference) throws(CKError) in try CKRecord.Reference(wire: reference) }
        self.init(
            zoneID: try ID(wire: wireID), capabilities: capabilities, share: share,
            encryptionScope: wire.encryptionScope == .perZone ? .perZone : .perRecord)
    }

    /// The zone as a wire message.
    package var wireZone: Wire.RecordZone {
        Wire.RecordZone(
            zoneID: zoneID.wireZoneID,
            capabilities: Wire.ZoneCapabilities(
                fetchChanges: capabilities.contains(.fetchChanges), atomic: capabilities.contains(.atomic),
                sharing: capabilities.contains(.sharing), zoneWideSharing: capabilities.contains(.zoneWideSharing)),
            share: share?.wireReference,
            encryptionScope: encryptionScope == .perZone ? .perZone : .perRecord)
    }
}

extension CKLocation {
    /// The location a wire message describes; an absent timestamp is 1970-01-01.
    package init(wire: Wire.Location) {
        self.init(
            coordinate: Coordinate(latitude: wire.latitude, longitude: wire.longitude), altitude: wire.altitude,
            horizontalAccuracy: wire.horizontalAccuracy, verticalAccuracy: wire.verticalAccuracy,
            course: wire.course, courseAccuracy: wire.courseAccuracy, speed: wire.speed,
            speedAccuracy: wire.speedAccuracy,
            timestamp: wire.timestamp.map(Date.init(wireTimestamp:)) ?? Date(timeIntervalSince1970: 0))
    }

    /// The location as a wire message.
    package var wireLocation: Wire.Location {
        Wire.Location(
            latitude: latitude, longitude: longitude, altitude: altitude, horizontalAccuracy: horizontalAccuracy,
            verticalAccuracy: verticalAccuracy, course: course, speed: speed, timestamp: timestamp.wireTimestamp,
            courseAccuracy: courseAccuracy, speedAccuracy: speedAccuracy)
    }
}
