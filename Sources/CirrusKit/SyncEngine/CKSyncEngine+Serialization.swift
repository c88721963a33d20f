import CirrusModel
import Foundation

extension CKSyncEngine.State {
    /// Everything the sync engine needs to continue where it stopped (CloudKit's
    /// `CKSyncEngine.State.Serialization`): change tokens, pending changes, the zones still to
    /// fetch, and the send that was under way. Persist the value of each `.stateUpdate` event
    /// and pass the last one to `Configuration(database:stateSerialization:delegate:)` on the
    /// next launch.
    ///
    /// Apple's type is archived with `NSSecureCoding`; here it is `Codable`. Its encoding is
    /// versioned: a serialization written by a newer CirrusKit fails to decode with a
    /// `DecodingError` naming the version, rather than being half read.
    ///
    /// For example:
    /// ```swift
    /// case .stateUpdate(let update):
    ///     try JSONEncoder().encode(update.stateSerialization).write(to: stateURL, options: .atomic)
    /// …
    /// let saved = try? JSONDecoder().decode(CKSyncEngine.State.Serialization.self, from: Data(contentsOf: stateURL))
    /// ```
    public struct Serialization: Sendable, Codable, CustomStringConvertible {
        let contents: Contents

        init(_ contents: Contents) {
            self.contents = contents
        }

        public init(from decoder: any Decoder) throws {
            self.contents = try Contents(from: decoder)
        }

        public func encode(to encoder: any Encoder) throws {
            try self.contents.encode(to: encoder)
        }

        public var description: String {
            "<CKSyncEngine.State.Serialization: \(contents.pendingRecordZoneChanges.count) pending record changes, "
                + "\(contents.pendingDatabaseChanges.count) pending zone changes, \(contents.zoneTokens.count) zone tokens>"
        }
    }

    /// A send whose modify operation may have reached the server: the long-lived operation's
    /// ID and the changes it carries. On the next launch the engine resumes that operation to
    /// learn which changes the server applied, instead of sending them a second time.
    struct InFlightSend: Codable, Sendable, Equatable {
        var operationID: String
        var changes: [CKSyncEngine.PendingRecordZoneChange]
    }

    /// The state as it is serialized.
    struct Contents: Codable, Sendable {
        static let currentVersion = 1

        var databaseToken: CKServerChangeToken?
        var zoneTokens: [CKRecordZone.ID: CKServerChangeToken] = [:]
        /// Zones known to have changes not fetched yet (Apple's `zoneIDsWithUnfetchedServerChanges`).
        var zonesNeedingFetch: [CKRecordZone.ID] = []
        var pendingRecordZoneChanges: [CKSyncEngine.PendingRecordZoneChange] = []
        var pendingDatabaseChanges: [CKSyncEngine.PendingDatabaseChange] = []
        var hasPendingUntrackedChanges = false
        /// The user whose data this is (the `recordName` of their user record).
        var userRecordName: String?
        /// The engine's database subscription is saved on the server.
        var subscriptionSaved = false
        var inFlightSend: InFlightSend?

        init() {}

        private enum CodingKeys: String, CodingKey {
            case version, databaseToken, zoneTokens, zonesNeedingFetch, pendingRecordZoneChanges, pendingDatabaseChanges
            case hasPendingUntrackedChanges, userRecordName, subscriptionSaved, inFlightSend
        }

        /// One zone's token (a dictionary keyed by a struct would encode as a flat list).
        private struct ZoneToken: Codable {
            var zoneID: CKRecordZone.ID
            var token: CKServerChangeToken
        }

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            let version = try container.decode(Int.self, forKey: .version)
            guard version == Self.currentVersion else {
                throw DecodingError.dataCorruptedError(
                    forKey: .version, in: container,
                    debugDescription: "sync engine state of version \(version); this CirrusKit reads version \(Self.currentVersion)")
            }
            self.databaseToken = try container.decodeIfPresent(CKServerChangeToken.self, forKey: .databaseToken)
            let tokens = try container.decode([ZoneToken].self, forKey: .zoneTokens)
            self.zoneTokens = Dictionary(tokens.map { ($0.zoneID, $0.token) }, uniquingKeysWith: { _, last in last })
            self.zonesNeedingFetch = try container.decode([CKRecordZone.ID].self, forKey: .zonesNeedingFetch)
            self.pendingRecordZoneChanges = try container.decode([CKSyncEngine.PendingRecordZoneChange].self, forKey: .pendingRecordZoneChanges)
            self.pendingDatabaseChanges = try container.decode([CKSyncEngine.PendingDatabaseChange].self, forKey: .pendingDatabaseChanges)
            self.hasPendingUntrackedChanges = try container.decode(Bool.self, forKey: .hasPendingUntrackedChanges)
            self.userRecordName = try container.decodeIfPresent(String.self, forKey: .userRecordName)
            self.subscriptionSaved = try container.decode(Bool.self, forKey: .subscriptionSaved)
            self.inFlightSend = try container.decodeIfPresent(InFlightSend.self, forKey: .inFlightSend)
        }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(Self.currentVersion, forKey: .version)
            try container.encodeIfPresent(self.databaseToken, forKey: .databaseToken)
            let tokens = self.zoneTokens.map { ZoneToken(zoneID: $0.key, token: $0.value) }
                .sorted { ($0.zoneID.ownerName, $0.zoneID.zoneName) < ($1.zoneID.ownerName, $1.zoneID.zoneName) }
            try container.encode(tokens, forKey: .zoneTokens)
            try container.encode(self.zonesNeedingFetch, forKey: .zonesNeedingFetch)
            try container.encode(self.pendingRecordZoneChanges, forKey: .pendingRecordZoneChanges)
            try container.encode(self.pendingDatabaseChanges, forKey: .pendingDatabaseChanges)
            try container.encode(self.hasPendingUntrackedChanges, forKey: .hasPendingUntrackedChanges)
            try container.encodeIfPresent(self.userRecordName, forKey: .userRecordName)
            try container.encode(self.subscriptionSaved, forKey: .subscriptionSaved)
            try container.encodeIfPresent(self.inFlightSend, forKey: .inFlightSend)
        }
    }
}
