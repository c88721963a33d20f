public import CirrusWire
import Foundation
import GRDB

extension SQLiteStorage {
    public func modifyRecords(
        _ modification: RecordModification, in database: DatabaseKey, by user: String
    ) async throws -> RecordModificationResult {
        let key = try database.validated()
        try checkItemCount(modification.itemCount)
        guard !user.isEmpty else { throw StoreError(.invalidArguments, "no user record name") }
        if modification.itemCount == 0 { return RecordModificationResult() }
        let now = clock()
        // Fields encoded here, off the writer: it then encodes only the rest of most records it stores.
        let plan = RecordModificationPlan(modification, in: key, encodingFieldsAhead: true)
        let cache = subscriptionCache
        let transaction = writer.transactionCache
        return try await writeNotifying(weight: modification.itemCount, sharesCache: true, in: key.container) { db in
            var writer = try RecordWriter(
                db: db, key: key, user: user, now: now, subscriptions: cache, transaction: transaction)
            let result = try writer.modify(plan)
            return Notified(result, writer.notified)
        }
    }

    public func fetchRecords(
        _ recordIDs: [Wire.RecordID], desiredKeys: [String]?, in database: DatabaseKey
    ) async throws -> [RecordFetchOutcome] {
        let key = try database.validated()
        try checkItemCount(recordIDs.count)
        let fetch: @Sendable (Database) throws -> [RecordFetchOutcome] = { db in
            let databaseID = try StoreRows.databaseID(db, key)
            var zones: [String: ZoneRow?] = [:]
            return try recordIDs.map { recordID in
                RecordFetchOutcome(id: recordID, result: try Self.fetch(recordID, db, databaseID, key, desiredKeys, &zones))
            }
        }
        return recordIDs.count <= Self.inPlaceReadLimit ? try await readInPlaceIfFree(fetch) : try await read(fetch)
    }

    /// One record to fetch; `zones` caches the zones looked up so far.
    private static func fetch(
        _ recordID: Wire.RecordID, _ db: Database, _ databaseID: Int64?, _ key: DatabaseKey, _ desiredKeys: [String]?,
        _ zones: inout [String: ZoneRow?]
    ) throws -> ItemResult<Wire.Record> {
        if let failure = RecordCodec.checkName(recordID.recordName, of: "record") {
            return .failure(failure)
        }
        let zoneName: String
        switch ZoneResolution.zoneName(of: recordID.zoneID, in: key) {
        case .failure(let failure):
            return .failure(failure)
        case .success(let name):
            zoneName = name
        }
        let zone: ZoneRow?
        if let cached = zones[zoneName] {
            zone = cached
        } else {
            zone = try databaseID.flatMap { try StoreRows.liveZone(db, $0, zoneName) }
            zones[zoneName] = .some(zone)
        }
        // Made only when needed: most fetched records exist.
        func missing() -> ItemFailure { RecordCodec.error(.unknownItem, "record \(recordID.recordName) does not exist") }
        guard let zone else {
            return .failure(
                zoneName == RecordCodec.defaultZoneName
                    ? missing() : RecordCodec.error(.zoneNotFound, "zone \(zoneName) does not exist"))
        }
        guard let row = try StoreRows.record(db, zoneID: zone.id, name: recordID.recordName) else {
            return .failure(missing())
        }
        return .success(try StoreRows.load(db, row, desiredKeys: desiredKeys, assetContent: true))
    }
}

/// A write's result and the notifications it wrote (per subscriber), handed out of the
/// transaction together.
struct Notified<Value: Sendable>: Sendable {
    var value: Value
    var notifications: [String: [StoredNotification]]

    init(_ value: Value, _ notifications: [String: [StoredNotification]]) {
        self.value = value
        self.notifications = notifications
    }
}
