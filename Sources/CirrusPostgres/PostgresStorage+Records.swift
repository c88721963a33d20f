public import CirrusStore
public import CirrusWire
import Foundation
import Logging
import PostgresNIO

extension PostgresStorage {
    /// Saves and deletes records (CKModifyRecordsOperation) in one transaction, as
    /// ``RecordStorage`` describes: the save policies, change tags, atomic zones and per-item
    /// failures are the SQLite engine's. Each zone written moves to the database's next change
    /// sequence. Concurrent requests into one database share the transaction (group commit);
    /// each returns after it committed. What the changes fire is stored in the same transaction,
    /// and announced to the observers after the commit (``observeNotifications(_:)``). Shares
    /// (`cloudkit.share` records) are kept with their participants, as ``ShareStorage``
    /// describes; a participant's write through their shared database (``RecordModification/sharedScope``)
    /// is checked in the transaction. Assets are kept as on SQLite: a save naming content the
    /// server does not know fails with `assetFileNotFound`.
    ///
    /// - throws: ``StoreError`` `.limitExceeded` with nothing written when the request has
    ///   more items than allowed; `.invalidArguments` without a user; `.badDatabase`;
    ///   `.storageFailure`.
    public func modifyRecords(
        _ modification: RecordModification, in database: DatabaseKey, by user: String
    ) async throws -> RecordModificationResult {
        let key = try database.validated()
        try checkItemCount(modification.recordsToSave.count + modification.recordIDsToDelete.count)
        guard !user.isEmpty else { throw StoreError(.invalidArguments, "no user record name") }
        if modification.recordsToSave.isEmpty && modification.recordIDsToDelete.isEmpty {
            return RecordModificationResult()
        }
        let now = clock()
        let plan = RecordModificationPlan(modification, in: key)
        let weight = modification.recordsToSave.count + modification.recordIDsToDelete.count
        let request = PostgresRecordWriter.Request(plan: plan, user: user, now: now, subscriptionCache: subscriptionCache)
        let outcome: PostgresRecordWriter.Outcome
        do {
            outcome = try await writes.modify(request, in: key, weight: weight)
        } catch {
            throw Self.storeError(error)
        }
        notifications.announce(in: key.container, outcome.notified)
        return outcome.result
    }

    /// Fetches records by ID (CKFetchRecordsOperation), read in one snapshot. `desiredKeys`
    /// nil = all fields, [] = system fields only. One outcome per ID in request order; a
    /// missing record fails with `unknownItem` (`zoneNotFound` when its custom zone does not
    /// exist).
    ///
    /// - throws: ``StoreError``.
    public func fetchRecords(
        _ recordIDs: [Wire.RecordID], desiredKeys: [String]?, in database: DatabaseKey
    ) async throws -> [RecordFetchOutcome] {
        let key = try database.validated()
        try checkItemCount(recordIDs.count)
        let logger = self.logger
        return try await snapshot { connection in
            // Each ID's zone, then every record of a zone in one read.
            var resolved: [ItemResult<String>] = []
            var namesByZone: [String: [String]] = [:]
            for recordID in recordIDs {
                let zone: ItemResult<String> =
                    if let failure = RecordCodec.checkName(recordID.recordName, of: "record") {
                        .failure(failure)
                    } else {
                        ZoneResolution.zoneName(of: recordID.zoneID, in: key)
                    }
                resolved.append(zone)
                if case .success(let name) = zone { namesByZone[name, default: []].append(recordID.recordName) }
            }
            var zones: [String: PostgresZoneRow] = [:]
            var rows: [String: [String: PostgresRecordRow]] = [:]
            for (zoneName, names) in namesByZone {
                guard
                    let (zone, records, _, _) = try await PostgresRows.liveZoneAndRecords(
                        connection, key, zoneName, names: names, logger)
                else { continue }
                zones[zoneName] = zone
                rows[zoneName] = records
            }
            var outcomes = try zip(recordIDs, resolved).map { recordID, zone in
                let result: ItemResult<Wire.Record>
                switch zone {
                case .failure(let failure):
                    result = .failure(failure)
                case .success(let zoneName):
                    if let row = rows[zoneName]?[recordID.recordName] {
                        result = .success(RecordCodec.restrict(try row.record(), to: desiredKeys))
                    } else if zones[zoneName] == nil && zoneName != RecordCodec.defaultZoneName {
                        result = .failure(RecordCodec.error(.zoneNotFound, "zone \(zoneName) does not exist"))
                    } else {
                        result = .failure(RecordCodec.error(.unknownItem, "record \(recordID.recordName) does not exist"))
                    }
                }
                return RecordFetchOutcome(id: recordID, result: result)
            }
            // The inline asset contents of every fetched record, in one read.
            var records = outcomes.compactMap(\.value)
            if !records.isEmpty {
                try await PostgresAssetRows.fill(&records, connection, logger)
                var next = records.makeIterator()
                for i in outcomes.indices where outcomes[i].value != nil {
                    if let record = next.next() { outcomes[i].result = .success(record) }
                }
            }
            return outcomes
        }
    }
}
