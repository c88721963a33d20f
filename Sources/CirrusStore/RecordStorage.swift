public import CirrusWire

/// Records, zones and their change feeds: the part of ``RecordStorage`` a device syncs
/// through, and the part a storage engine implements first (the PostgreSQL engine, so far;
/// README → PostgreSQL). The conformance suite's record, zone and change feed tests run
/// against every engine that implements it.
public protocol RecordSyncStorage: Sendable {
    /// Saves and deletes records (CKModifyRecordsOperation).
    ///
    /// - throws: ``StoreError`` `.limitExceeded` with nothing written when the
    ///   request has more items than allowed; `.badDatabase`; `.storageFailure`.
    func modifyRecords(
        _ modification: RecordModification, in database: DatabaseKey, by user: String
    ) async throws -> RecordModificationResult

    /// Fetches records by ID (CKFetchRecordsOperation). `desiredKeys` nil = all
    /// fields, [] = system fields only. One outcome per ID in request order;
    /// a missing record fails with `unknownItem` (`zoneNotFound` when its
    /// custom zone does not exist).
    ///
    /// - throws: ``StoreError``.
    func fetchRecords(
        _ recordIDs: [Wire.RecordID], desiredKeys: [String]?, in database: DatabaseKey
    ) async throws -> [RecordFetchOutcome]

    /// Saves and deletes zones (CKModifyRecordZonesOperation).
    ///
    /// - throws: ``StoreError``.
    func modifyZones(
        saving zones: [Wire.RecordZone], deleting zoneIDs: [Wire.RecordZoneID], in database: DatabaseKey
    ) async throws -> ZoneModificationResult

    /// Fetches zones by ID (CKFetchRecordZonesOperation); `zoneNotFound` per missing one.
    ///
    /// - throws: ``StoreError``.
    func fetchZones(_ zoneIDs: [Wire.RecordZoneID], in database: DatabaseKey) async throws -> [ZoneFetchOutcome]

    /// Every zone of the database, the default zone first
    /// (fetchAllRecordZonesOperation()).
    ///
    /// - throws: ``StoreError``.
    func fetchAllZones(in database: DatabaseKey) async throws -> [Wire.RecordZone]

    /// Records changed and deleted in `zone` after change sequence `since`
    /// (0 = from the beginning) and at or before `through` (nil = the zone's
    /// current sequence), oldest first, at most `limit` changes.
    ///
    /// `floor` is the batch's ``RecordChangeBatch/prunedSeq`` of the fetch that
    /// started from the beginning, carried along: a client that started after
    /// tombstones up to `floor` were pruned never held those records, so its
    /// position stays valid while no tombstone after `max(since, floor)` is pruned.
    ///
    /// A fetch that pages through a zone passes the first batch's `headSeq` as
    /// `through` to every later batch, so a record changed meanwhile is reported
    /// once, by the next fetch, rather than twice.
    ///
    /// - throws: ``StoreError`` `.zoneNotFound`, or `.changeTokenExpired` when
    ///   tombstones after `since` were pruned or `since` is past the zone's sequence.
    func recordChanges(
        in zone: Wire.RecordZoneID, of database: DatabaseKey, since: Int64, floor: Int64, through: Int64?, limit: Int,
        desiredKeys: [String]?
    ) async throws -> RecordChangeBatch

    /// ``recordChanges(in:of:since:floor:through:limit:desiredKeys:)`` of every key, each record
    /// that needs nothing of the store (a plain ``Wire/SerializedRecord``: no asset, no share
    /// fields) left serialized as stored, for a server to send without decoding it.
    ///
    /// - throws: as ``recordChanges(in:of:since:floor:through:limit:desiredKeys:)``.
    func storedRecordChanges(
        in zone: Wire.RecordZoneID, of database: DatabaseKey, since: Int64, floor: Int64, through: Int64?, limit: Int
    ) async throws -> StoredRecordChangeBatch

    /// Zones created, changed (including their records) or deleted after
    /// database change sequence `since` (0 = from the beginning) and at or
    /// before `through` (nil = the database's current sequence); `floor` as for
    /// ``recordChanges(in:of:since:floor:through:limit:desiredKeys:)``.
    ///
    /// - throws: ``StoreError`` `.changeTokenExpired` when zone tombstones after
    ///   `since` were pruned or `since` is past the database's sequence.
    func zoneChanges(
        in database: DatabaseKey, since: Int64, floor: Int64, through: Int64?, limit: Int
    ) async throws -> ZoneChangeBatch

    /// Drops record and zone tombstones deleted before `cutoff`; change
    /// sequences older than the newest dropped tombstone then expire.
    ///
    /// - throws: ``StoreError``.
    func pruneTombstones(deletedBefore cutoff: Wire.Timestamp) async throws
}

/// The storage a Cirrus server's operation executors run against: the protocol
/// every storage engine implements (``SQLiteStorage`` is the embedded default).
///
/// Every call works inside one database (``DatabaseKey``), commits durably
/// before it returns, and reports what became of each item as a domain value
/// in request order (``ItemOutcome``, ``ItemDeletion``; a failed item carries an
/// ``ItemFailure``). A call throws ``StoreError`` only when the whole request
/// fails (too many items, bad database key, I/O). Nothing here is a protocol
/// event or error code: the server maps outcomes and failures onto the events
/// and errors a client sees, so an engine never needs to know the wire.
///
/// Records, record and zone IDs, zones, subscriptions, queries and timestamps
/// stay `Wire` values (`Wire.Record`, `Wire.RecordID`, `Wire.RecordZone`,
/// `Wire.Subscription`, `Wire.Query`, `Wire.Timestamp`): they are the content
/// a store keeps and hands back, byte for byte what clients send and fetch. A
/// domain copy of them would cost a conversion of every record twice per call
/// (400 records a request), which is what a storage engine is meant to save.
///
/// Its records, zones and change feeds are ``RecordSyncStorage``, the part an engine
/// implements first. Every engine must pass the storage conformance suite in
/// `Tests/CirrusStoreTests` for what it implements (see `StorageEngineUnderTest` there).
///
/// For example:
/// ```swift
/// let storage = try SQLiteStorage(directory: "./cirrus-data")
/// let result = try await storage.modifyRecords(
///     RecordModification(saving: [note]), in: .private(container: "c", user: "_alice"), by: "_alice")
/// ```
public protocol RecordStorage: RecordSyncStorage, RecordQueryStorage, SubscriptionStorage, UserStorage, TokenStorage, ShareStorage,
    AssetReferenceStorage
{}

/// Queries over a zone's records (CKQueryOperation), with sealed keyset cursors. Every engine
/// runs them with the same rules, shared in this module: the validation of a query, the
/// evaluation of its predicate on a record, the order of its sort keys and the cursor's
/// layout and seal.
public protocol RecordQueryStorage: Sendable {
    /// The first page of a query (CKQueryOperation) over one zone: at most
    /// `limit` matching records in the query's order, restricted to
    /// `desiredKeys` (nil = all fields, [] = system fields only), and a cursor
    /// when more follow. The cursor pins the query, zone and desired keys; it
    /// is a sealed keyset position (the store keeps nothing per cursor), so
    /// a first page reads about `limit` candidates where an index gives the
    /// query's order, however many records match.
    ///
    /// For example:
    /// ```swift
    /// let query = Wire.Query(recordType: "Note", predicate: Wire.QueryPredicate(node: .truePredicate(.init())))
    /// let page = try await storage.queryRecords(query, in: zoneID, of: key, desiredKeys: nil, limit: 100)
    /// ```
    ///
    /// - throws: ``StoreError`` `.invalidArguments` for a predicate, sort or
    ///   limit the store cannot run (the message names the node);
    ///   `.zoneNotFound`; `.badDatabase`.
    func queryRecords(
        _ query: Wire.Query, in zone: Wire.RecordZoneID, of database: DatabaseKey, desiredKeys: [String]?, limit: Int
    ) async throws -> QueryPage

    /// The next page after `cursor` (from a ``QueryPage`` of the same database).
    ///
    /// Pages follow the first page's order; no record comes twice and none
    /// that existed and matched throughout is skipped, whatever changes in
    /// between.
    ///
    /// - throws: ``StoreError`` `.invalidArguments` when the cursor is
    ///   malformed, altered, expired or from another database;
    ///   `.zoneNotFound` when its zone was deleted.
    func continueQuery(
        _ cursor: [UInt8], in database: DatabaseKey, desiredKeys: QueryContinuationKeys, limit: Int
    ) async throws -> QueryPage

    /// Deletes what only query cursors created before `cutoff` needed (the
    /// record versions kept for them; expired cursors are refused anyway);
    /// returns how many rows went.
    ///
    /// - throws: ``StoreError``.
    @discardableResult
    func pruneQueryCursors(createdBefore cutoff: Wire.Timestamp) async throws -> Int
}

extension RecordSyncStorage {
    /// Every record decoded: for stores that keep no serialized records.
    public func storedRecordChanges(
        in zone: Wire.RecordZoneID, of database: DatabaseKey, since: Int64, floor: Int64, through: Int64?, limit: Int
    ) async throws -> StoredRecordChangeBatch {
        try await self.recordChanges(
            in: zone, of: database, since: since, floor: floor, through: through, limit: limit, desiredKeys: nil
        ).mapChanged(StoredRecord.decoded)
    }

    /// ``recordChanges(in:of:since:floor:through:limit:desiredKeys:)`` with no floor, up to the
    /// zone's current sequence.
    public func recordChanges(
        in zone: Wire.RecordZoneID, of database: DatabaseKey, since: Int64, limit: Int, desiredKeys: [String]?
    ) async throws -> RecordChangeBatch {
        try await recordChanges(
            in: zone, of: database, since: since, floor: 0, through: nil, limit: limit, desiredKeys: desiredKeys)
    }

    /// ``zoneChanges(in:since:floor:through:limit:)`` with no floor, up to the database's current sequence.
    public func zoneChanges(in database: DatabaseKey, since: Int64, limit: Int) async throws -> ZoneChangeBatch {
        try await zoneChanges(in: database, since: since, floor: 0, through: nil, limit: limit)
    }
}

/// The request of a CKModifyRecordsOperation, as the store needs it.
public struct RecordModification: Sendable, Hashable {
    public var recordsToSave: [Wire.Record]
    public var recordIDsToDelete: [Wire.RecordID]
    public var savePolicy: Wire.SavePolicy
    /// All or nothing per zone (CloudKit's default is true).
    public var isAtomic: Bool
    /// Remembered with every zone this request wrote to; empty = none.
    public var clientChangeToken: [UInt8]
    /// Saves the server refused before they reached the store (an asset it could not take),
    /// by index in `recordsToSave`: each fails with its failure, and fails its atomic zone.
    public var refusals: [Int: ItemFailure] = [:]
    /// Set for a participant's write through their shared database: the shares (by record
    /// name) they may change, by zone name. Each save must then be of a record in one of its
    /// zone's shares — an existing record as stored, a new one by its parent chain — and each
    /// deletion of an existing record in one; any other fails with `permissionFailure`,
    /// checked in the write's transaction.
    public var sharedScope: [String: Set<String>]? = nil
    /// The saves' fields as already encoded elsewhere (the journal of a long-lived operation
    /// encodes them to store its `Open`), by index in `recordsToSave`: the store reuses one
    /// only for a record whose fields are still the very array it encoded, and encodes the
    /// others itself.
    public var fieldEncodings = RecordFieldEncodings()

    public init(
        saving recordsToSave: [Wire.Record] = [],
        deleting recordIDsToDelete: [Wire.RecordID] = [],
        savePolicy: Wire.SavePolicy = .ifServerRecordUnchanged,
        isAtomic: Bool = true,
        clientChangeToken: [UInt8] = []
    ) {
        self.recordsToSave = recordsToSave
        self.recordIDsToDelete = recordIDsToDelete
        self.savePolicy = savePolicy
        self.isAtomic = isAtomic
        self.clientChangeToken = clientChangeToken
    }

    var itemCount: Int { recordsToSave.count + recordIDsToDelete.count }

    /// The upload handle the server puts in an asset to save whose content its asset file
    /// store holds (it resolved and checked the client's handle, or wrote the inline content
    /// to a file), with the asset's SHA-256 and size: the empty string, which no handle the
    /// server issues is. Any other upload handle reaching the store is refused
    /// (`assetFileNotFound`).
    public static let fileContentHandle = ""
}

/// Saved records' fields encoded ahead of time (``Wire/EncodedRecordFields``), by index in a
/// request's `recordsToSave`, carried beside a value for a store to reuse. A cache, not part of
/// the value it travels with: any two are equal, and hash alike.
public struct RecordFieldEncodings: Sendable, Hashable {
    public var encodings: [Wire.EncodedRecordFields]

    public init(_ encodings: [Wire.EncodedRecordFields] = []) {
        self.encodings = encodings
    }

    /// The encoding of save `index`, if there is one.
    public subscript(index: Int) -> Wire.EncodedRecordFields? {
        encodings.indices.contains(index) ? encodings[index] : nil
    }

    /// Those of saves `range`, numbered from 0 (what a chunk of the request takes along).
    public func slice(_ range: Range<Int>) -> RecordFieldEncodings {
        let clamped = range.clamped(to: encodings.indices)
        return RecordFieldEncodings(Array(encodings[clamped]))
    }

    public static func == (lhs: Self, rhs: Self) -> Bool { true }
    public func hash(into hasher: inout Hasher) {}
}

/// What a ``RecordStorage/modifyRecords(_:in:by:)`` call did, in request order.
public struct RecordModificationResult: Sendable, Hashable {
    /// One per record to save: the record as the server now has it, or its failure.
    public var saves: [RecordSaveOutcome]
    /// One per record ID to delete: `failure` nil = deleted (or never existed).
    public var deletes: [RecordDeletion]
    /// Records deleted because they referenced a deleted record with
    /// `deleteSelf` (transitively), in deletion order, each once.
    public var cascadedDeletions: [Wire.RecordID]

    public init(
        saves: [RecordSaveOutcome] = [],
        deletes: [RecordDeletion] = [],
        cascadedDeletions: [Wire.RecordID] = []
    ) {
        self.saves = saves
        self.deletes = deletes
        self.cascadedDeletions = cascadedDeletions
    }

    /// True when some item failed (the operation then completes with partialFailure).
    public var hasFailures: Bool {
        saves.contains { $0.failure != nil } || deletes.contains { $0.failure != nil }
    }
}

/// What a ``RecordStorage/modifyZones(saving:deleting:in:)`` call did, in request order.
public struct ZoneModificationResult: Sendable, Hashable {
    /// One per zone to save: the zone as stored (an existing zone as it was), or its failure.
    public var saves: [ZoneSaveOutcome]
    /// One per zone ID to delete: `failure` nil = deleted.
    public var deletes: [ZoneDeletion]

    public init(saves: [ZoneSaveOutcome] = [], deletes: [ZoneDeletion] = []) {
        self.saves = saves
        self.deletes = deletes
    }
}

/// A deleted record as the change feed reports it.
public struct RecordTombstone: Sendable, Hashable {
    public var recordID: Wire.RecordID
    public var recordType: String
    /// The zone change sequence of the deletion.
    public var seq: Int64
    /// The record names of the shares the record was in when it was deleted (empty when none):
    /// a participant's change feed lists the deletion only when they reach one of them.
    public var sharedBy: [String]

    public init(recordID: Wire.RecordID, recordType: String, seq: Int64, sharedBy: [String] = []) {
        self.recordID = recordID
        self.recordType = recordType
        self.seq = seq
        self.sharedBy = sharedBy
    }
}

/// One batch of a zone's change feed: ``RecordChangeBatch`` (its records decoded) or
/// ``StoredRecordChangeBatch`` (each record as stored where it needs no decoding).
public struct ChangeBatch<Changed: Sendable & Hashable>: Sendable, Hashable {
    /// Records saved after `since`, each at its latest version, oldest change first.
    public var changed: [Changed]
    /// Records deleted after `since`, oldest first.
    public var deleted: [RecordTombstone]
    /// Everything up to this sequence is in this batch or an earlier one.
    public var lastSeq: Int64
    /// More changes follow `lastSeq`.
    public var moreComing: Bool
    /// The last client change token saved with the zone; empty = none.
    public var clientChangeToken: [UInt8]
    /// Identifies this incarnation of the zone: a zone deleted and created
    /// again gets a new one, so tokens of the old zone can be told apart.
    public var zoneIncarnation: Int64
    /// The zone's change sequence when the batch was read (≥ `lastSeq`).
    public var headSeq: Int64
    /// Tombstones up to this sequence had been pruned when the batch was read.
    public var prunedSeq: Int64

    public init(
        changed: [Changed], deleted: [RecordTombstone], lastSeq: Int64, moreComing: Bool,
        clientChangeToken: [UInt8], zoneIncarnation: Int64, headSeq: Int64? = nil, prunedSeq: Int64 = 0
    ) {
        self.headSeq = headSeq ?? lastSeq
        self.prunedSeq = prunedSeq
        self.changed = changed
        self.deleted = deleted
        self.lastSeq = lastSeq
        self.moreComing = moreComing
        self.clientChangeToken = clientChangeToken
        self.zoneIncarnation = zoneIncarnation
    }

    /// The same batch with each changed record transformed.
    public func mapChanged<T>(_ transform: (Changed) throws -> T) rethrows -> ChangeBatch<T> {
        ChangeBatch<T>(
            changed: try self.changed.map(transform), deleted: self.deleted, lastSeq: self.lastSeq,
            moreComing: self.moreComing, clientChangeToken: self.clientChangeToken, zoneIncarnation: self.zoneIncarnation,
            headSeq: self.headSeq, prunedSeq: self.prunedSeq)
    }
}

/// A batch of a zone's change feed with its records decoded.
public typealias RecordChangeBatch = ChangeBatch<Wire.Record>

/// A batch of a zone's change feed with each record as the store keeps it where it needs no
/// decoding (``RecordSyncStorage/storedRecordChanges(in:of:since:floor:through:limit:)``).
public typealias StoredRecordChangeBatch = ChangeBatch<StoredRecord>

/// A record read by a change feed: as stored (a plain ``Wire/SerializedRecord``, for the server to
/// send as it is) or decoded (one with assets, whose content the store filled in, or share fields;
/// a store that keeps no serialized records returns them all decoded).
public enum StoredRecord: Sendable, Hashable {
    case decoded(Wire.Record)
    case serialized(Wire.SerializedRecord)

    /// The record, decoded.
    ///
    /// - throws: ``StoreError`` `.corruptData` when stored bytes do not decode.
    public func decoded() throws(StoreError) -> Wire.Record {
        switch self {
        case .decoded(let record):
            return record
        case .serialized(let serialized):
            do {
                return try serialized.decoded()
            } catch {
                throw StoreError(.corruptData, "a stored record does not decode: \(error)")
            }
        }
    }
}

/// One entry of a database's zone change feed.
public struct ZoneFeedEntry: Sendable, Hashable {
    public var zoneID: Wire.RecordZoneID
    /// True: the zone was deleted; false: created or changed (the zone or its records).
    public var wasDeleted: Bool

    public init(zoneID: Wire.RecordZoneID, wasDeleted: Bool) {
        self.zoneID = zoneID
        self.wasDeleted = wasDeleted
    }
}

/// One batch of a database's zone change feed.
public struct ZoneChangeBatch: Sendable, Hashable {
    /// Every change in feed order: a zone deleted and created again with the same name
    /// appears as deleted, then changed.
    public var entries: [ZoneFeedEntry]
    /// Zones created or changed (zone or records) after `since`.
    public var changed: [Wire.RecordZoneID] { entries.filter { !$0.wasDeleted }.map(\.zoneID) }
    /// Zones deleted after `since`.
    public var deleted: [Wire.RecordZoneID] { entries.filter(\.wasDeleted).map(\.zoneID) }
    public var lastSeq: Int64
    public var moreComing: Bool
    /// The database's change sequence when the batch was read (≥ `lastSeq`).
    public var headSeq: Int64
    /// Zone tombstones up to this sequence had been pruned when the batch was read.
    public var prunedSeq: Int64

    public init(
        entries: [ZoneFeedEntry], lastSeq: Int64, moreComing: Bool, headSeq: Int64? = nil, prunedSeq: Int64 = 0
    ) {
        self.headSeq = headSeq ?? lastSeq
        self.prunedSeq = prunedSeq
        self.entries = entries
        self.lastSeq = lastSeq
        self.moreComing = moreComing
    }
}
