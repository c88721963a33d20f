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
    /// Records of one zone without asset contents are read in one statement, which sees one
    /// snapshot by itself: one round trip instead of three (a transaction's `BEGIN` and
    /// `COMMIT`). Several zones, or records whose assets' contents are read too, are read in a
    /// read-only transaction.
    ///
    /// - throws: ``StoreError``.
    public func fetchRecords(
        _ recordIDs: [Wire.RecordID], desiredKeys: [String]?, in database: DatabaseKey
    ) async throws -> [RecordFetchOutcome] {
        let key = try database.validated()
        try checkItemCount(recordIDs.count)
        let logger = self.logger
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
        let fetch = RecordFetch(
            key: key, recordIDs: recordIDs, resolved: resolved, namesByZone: namesByZone, desiredKeys: desiredKeys)
        if namesByZone.count <= 1,
            let outcomes = try await connection({ try await fetch.read($0, logger, fillingAssets: false) })
        {
            return outcomes
        }
        return try await snapshot { connection in
            guard let outcomes = try await fetch.read(connection, logger, fillingAssets: true) else {
                throw StoreError(.storageFailure, "a fetch filling asset contents returned nothing")
            }
            return outcomes
        }
    }
}

/// The reads of one ``PostgresStorage/fetchRecords(_:desiredKeys:in:)``, its IDs resolved to zones.
private struct RecordFetch: Sendable {
    var key: DatabaseKey
    var recordIDs: [Wire.RecordID]
    var resolved: [ItemResult<String>]
    var namesByZone: [String: [String]]
    var desiredKeys: [String]?

    /// One outcome per ID; with `fillingAssets` false, nil when a fetched record has assets
    /// (their contents must be read in the same snapshot).
    func read(
        _ connection: PostgresConnection, _ logger: Logger, fillingAssets: Bool
    ) async throws -> [RecordFetchOutcome]? {
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
        guard records.contains(where: { !RecordCodec.assetChecksums(in: $0).isEmpty }) else { return outcomes }
        guard fillingAssets else { return nil }
        try await PostgresAssetRows.fill(&records, connection, logger)
        var next = records.makeIterator()
        for i in outcomes.indices where outcomes[i].value != nil {
            if let record = next.next() { outcomes[i].result = .success(record) }
        }
        return outcomes
    }
}
