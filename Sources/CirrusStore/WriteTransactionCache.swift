import GRDB
import Synchronization

/// What the record writes of one group-commit transaction share: the row IDs of the
/// databases and live zones they looked up, every zone's change sequence as they left it,
/// and the zones whose sequences moved, written once before the transaction commits
/// instead of once per write.
///
/// ``WriteCoalescer`` owns it and keeps it true:
/// - it starts empty with every transaction;
/// - a job that does not share it (zones, subscriptions, journal bookkeeping, pruning)
///   gets the pending zone updates written, and the cache emptied, before it runs, so it
///   reads and changes the tables as if no job had cached anything;
/// - a job that fails in its savepoint (the per-job fallback) leaves the cache as it was
///   before the job; a transaction that fails leaves it empty;
/// - ``flush(_:)`` runs inside the transaction, after the last job, before the commit.
///
/// Used on the writer queue only; the lock makes it `Sendable`, it is never contended.
final class WriteTransactionCache: Sendable {
    struct State: Sendable {
        struct ZoneKey: Hashable, Sendable {
            var databaseID: Int64
            var name: String
        }

        var databases: [DatabaseKey: Int64] = [:]
        var zones: [ZoneKey: ZoneRow] = [:]
        /// A zone's `change_seq` as this transaction's writes left it (the last one handed out).
        var zoneSeqs: [Int64: Int64] = [:]
        /// Zones whose records changed (zone ID → database ID), in the order first touched.
        var touched: [(zone: Int64, database: Int64)] = []
        /// What saves index, by zone and record type (``FieldIndexing``). Only index builds
        /// change it, and they do not share the cache.
        var indexed: [IndexedKey: FieldIndexing.Indexed] = [:]
        /// By zone looked up: whether it may hold tombstones. A zone without any (and given
        /// none since) has no tombstone for a saved record to supersede.
        var mayHoldTombstones: [Int64: Bool] = [:]
        /// By database: its `subscriptions_generation` as this transaction reads it.
        var subscriptionGenerations: [Int64: Int64] = [:]
        /// By zone looked up: whether it has a share (a write there may fire the subscriptions
        /// of its participants' shared databases).
        var sharedZones: [Int64: Bool] = [:]

        struct IndexedKey: Hashable, Sendable {
            var zoneID: Int64
            var recordType: String
        }
    }

    private let state = Mutex(State())

    /// The buffers a record write fills for each row it stores (``RecordWriter/RecordStatements``):
    /// one set, lent to each request in turn, so that a request of one record does not grow
    /// new ones from empty (eight allocations per single save). Not part of ``State``: they
    /// hold nothing between requests, only room.
    struct RowBuffers: Sendable {
        var texts = BorrowedTexts()
        var bytes: [UInt8] = []
    }

    private let rowBuffers = Mutex(RowBuffers())

    /// Room beyond which a returned buffer is dropped rather than kept (a request that stored a
    /// record of megabytes does not hold that much for every later one).
    static let rowBufferRetainedBytes = 64 << 10

    /// The row buffers, taken out: the next borrower gets empty ones until they come back.
    func borrowRowBuffers() -> RowBuffers {
        rowBuffers.withLock { buffers in
            var taken = RowBuffers()
            swap(&taken, &buffers)
            return taken
        }
    }

    /// Gives back the buffers of ``borrowRowBuffers()``, emptied, keeping their room unless it
    /// is larger than ``rowBufferRetainedBytes``.
    func returnRowBuffers(_ returned: consuming RowBuffers) {
        var buffers = returned
        buffers.texts.removeAll()
        buffers.bytes.removeAll(keepingCapacity: true)
        if buffers.bytes.capacity > Self.rowBufferRetainedBytes { buffers.bytes = [] }
        if buffers.texts.capacity > Self.rowBufferRetainedBytes { buffers.texts = BorrowedTexts() }
        rowBuffers.withLock { $0 = buffers }
    }

    /// What the cache holds now, to go back to when a job rolls back.
    var snapshot: State { state.withLock { $0 } }

    func restore(_ snapshot: State) {
        state.withLock { $0 = snapshot }
    }

    /// Forgets everything (a transaction starts or rolled back).
    func reset() {
        state.withLock { $0 = State() }
    }

    /// The row ID of the database `key`, creating the database with its default zone.
    func ensureDatabase(_ db: Database, _ key: DatabaseKey) throws -> Int64 {
        if let id = state.withLock({ $0.databases[key] }) { return id }
        let id = try StoreRows.ensureDatabase(db, key)
        state.withLock { $0.databases[key] = id }
        return id
    }

    /// The live zone `name` of database `databaseID`, nil when there is none. Its `id` and
    /// `name` hold for the transaction; take sequences from ``nextSeq(_:_:)``.
    func liveZone(_ db: Database, _ databaseID: Int64, _ name: String) throws -> ZoneRow? {
        let key = State.ZoneKey(databaseID: databaseID, name: name)
        if let zone = state.withLock({ $0.zones[key] }) { return zone }
        guard let zone = try StoreRows.liveZone(db, databaseID, name) else { return nil }
        state.withLock { $0.zones[key] = zone }
        return zone
    }

    /// What saves of `recordType` records to zone `zoneID` index (``FieldIndexing``).
    func indexed(_ db: Database, zoneID: Int64, recordType: String) throws -> FieldIndexing.Indexed {
        let key = State.IndexedKey(zoneID: zoneID, recordType: recordType)
        if let indexed = state.withLock({ $0.indexed[key] }) { return indexed }
        let indexed = try FieldIndexing.indexed(db, zoneID: zoneID, recordType: recordType)
        state.withLock { $0.indexed[key] = indexed }
        return indexed
    }

    /// Whether zone `zoneID` may hold tombstones: a save of a new record there deletes the
    /// tombstone of its name only then. Looked up once per zone and transaction, either way;
    /// a zone that had none keeps that answer until ``tombstoneWritten(in:)``. Most zones
    /// never had a record deleted, and their saves then skip one statement each.
    func mayHoldTombstones(_ db: Database, zoneID: Int64) throws -> Bool {
        if let known = state.withLock({ $0.mayHoldTombstones[zoneID] }) { return known }
        let holds = try db.int64(sql: "SELECT 1 FROM tombstones WHERE zone_id = ? LIMIT 1", integer: zoneID) != nil
        state.withLock { $0.mayHoldTombstones[zoneID] = holds }
        return holds
    }

    /// The `subscriptions_generation` of database `databaseID` (``SubscriptionCache``), read
    /// once per transaction instead of once per write. Writes that change subscriptions do not
    /// share this cache (it is emptied before they run), except a record write's `firesOnce`
    /// subscription that fired and was deleted: ``subscriptionsChanged(in:)`` forgets it then.
    func subscriptionGeneration(_ db: Database, databaseID: Int64) throws -> Int64 {
        if let known = state.withLock({ $0.subscriptionGenerations[databaseID] }) { return known }
        let generation = try SubscriptionCache.generation(db, databaseID: databaseID)
        state.withLock { $0.subscriptionGenerations[databaseID] = generation }
        return generation
    }

    /// Records that a write changed the subscriptions of database `databaseID` (it deleted a
    /// `firesOnce` subscription that fired): the next write reads its generation again.
    func subscriptionsChanged(in databaseID: Int64) {
        state.withLock { _ = $0.subscriptionGenerations.removeValue(forKey: databaseID) }
    }

    /// Whether zone `zoneID` has a share: read once per zone and transaction, instead of once
    /// per write, until ``sharesChanged(in:)`` (a write saved or deleted one of its shares).
    func isShared(_ db: Database, zoneID: Int64) throws -> Bool {
        if let known = state.withLock({ $0.sharedZones[zoneID] }) { return known }
        let read = try RawStatement(db, sql: "SELECT 1 FROM shares WHERE zone_id = ? LIMIT 1")
        read.bind(1, zoneID)
        let shared = try read.int64() != nil
        state.withLock { $0.sharedZones[zoneID] = shared }
        return shared
    }

    /// Records that a write saved or deleted a share of zone `zoneID` (nil: of any zone, as
    /// when a savepoint that may have done so rolled back): the next write reads it again.
    func sharesChanged(in zoneID: Int64?) {
        state.withLock { state in
            if let zoneID { state.sharedZones[zoneID] = nil } else { state.sharedZones.removeAll() }
        }
    }

    /// Records that a write gave zone `zoneID` a tombstone.
    func tombstoneWritten(in zoneID: Int64) {
        state.withLock { $0.mayHoldTombstones[zoneID] = true }
    }

    /// The next change sequence of zone `zoneID`.
    func nextSeq(_ db: Database, _ zoneID: Int64) throws -> Int64 {
        let known = state.withLock { $0.zoneSeqs[zoneID] }
        let current = try known ?? (db.int64(sql: "SELECT change_seq FROM zones WHERE id = ?", integer: zoneID) ?? 0)
        state.withLock { $0.zoneSeqs[zoneID] = current + 1 }
        return current + 1
    }

    /// Records that a write changed records of zone `zoneID`: ``flush(_:)`` moves the zone
    /// to the database's next change sequence and stores its own.
    func touch(_ zoneID: Int64, of databaseID: Int64) {
        state.withLock { state in
            if !state.touched.contains(where: { $0.zone == zoneID }) { state.touched.append((zoneID, databaseID)) }
        }
    }

    /// Writes what the transaction's jobs left pending (each touched zone's change sequence,
    /// and the database change sequence it moved to), then forgets everything.
    func flush(_ db: Database) throws {
        let pending = state.withLock { state -> State in
            let pending = state
            state = State()
            return pending
        }
        for (zoneID, databaseID) in pending.touched {
            // A touched zone always handed out a sequence (``nextSeq(_:_:)``).
            guard let changeSeq = pending.zoneSeqs[zoneID] else { continue }
            let seq = try StoreRows.bumpDatabaseSeq(db, databaseID)
            let update = try RawStatement(db, sql: "UPDATE zones SET db_seq = ?, change_seq = ? WHERE id = ?")
            update.bind(1, seq)
            update.bind(2, changeSeq)
            update.bind(3, zoneID)
            try update.run()
        }
    }
}
