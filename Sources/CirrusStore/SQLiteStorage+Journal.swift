public import CirrusWire
import Foundation
import GRDB

/// The journal of long-lived operations, in the same database as the records it reports on.
/// It stores wire events by design (see ``OperationJournal``).
extension SQLiteStorage: OperationJournal {
    public func registerLongLivedOperation(
        _ key: LongLivedOperationKey, open: Wire.Open, at date: Wire.Timestamp, lease: LongLivedLease?
    ) async throws -> LongLivedOperationRecord {
        var encodings: [Wire.EncodedRecordFields] = []
        let bytes = Data(open.serializedBytesWritingRecords(keeping: &encodings))
        try await write(weight: 1) { db in
            guard try db.int64(sql: Self.lastSeqSQL, arguments: [key.owner, key.operationID]) == nil else {
                throw OperationJournalRules.duplicate(key)
            }
            try db.run(
                sql: """
                    INSERT INTO long_lived_operations
                        (owner, operation_id, container, open, created_ns, lease_node, lease_expiry_ns)
                    VALUES (?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [
                    key.owner, key.operationID, open.containerIdentifier, bytes, Self.nanoseconds(date), lease?.node,
                    lease.map { Self.nanoseconds($0.expiry) },
                ])
        }
        var record = LongLivedOperationRecord(key: key, open: open, creationDate: date, lease: lease)
        record.fieldEncodings = RecordFieldEncodings(encodings)
        return record
    }

    public func appendLongLivedEvents(
        _ payloads: [Wire.Event.Payload], to key: LongLivedOperationKey, checkpoint: [UInt8]?, by node: String?
    ) async throws -> [Wire.Event] {
        let events = try await write(weight: max(1, payloads.count)) { db in
            try Self.append(payloads, to: key, checkpoint: checkpoint, by: node, db)
        }
        if let last = events.last { signal(.journaled(key, lastSeq: last.seq)) }
        return events
    }

    public func modifyRecords(
        _ modification: RecordModification, in database: DatabaseKey, by user: String,
        journaling: ModificationJournaling
    ) async throws -> (result: RecordModificationResult, events: [Wire.Event]) {
        let key = try database.validated()
        try checkItemCount(modification.itemCount)
        guard !user.isEmpty else { throw StoreError(.invalidArguments, "no user record name") }
        let now = clock()
        let plan = RecordModificationPlan(modification, in: key, encodingFieldsAhead: true)
        let cache = subscriptionCache
        let transaction = writer.transactionCache
        let outcome = try await writeNotifying(weight: modification.itemCount * 2, sharesCache: true, in: key.container) { db in
            var result = RecordModificationResult()
            var notified: [String: [StoredNotification]] = [:]
            if modification.itemCount > 0 {
                var writer = try RecordWriter(
                    db: db, key: key, user: user, now: now, subscriptions: cache, transaction: transaction)
                result = try writer.modify(plan)
                notified = writer.notified
            }
            let events = try Self.append(
                journaling.events(result), to: journaling.operation, checkpoint: journaling.checkpoint(result),
                by: journaling.node, db)
            return Notified(JournaledModification(result: result, events: events), notified)
        }
        if let last = outcome.events.last { signal(.journaled(journaling.operation, lastSeq: last.seq)) }
        return (outcome.result, outcome.events)
    }

    public func completeLongLivedOperation(
        _ key: LongLivedOperationKey, complete: Wire.Complete, at date: Wire.Timestamp, by node: String?
    ) async throws -> Wire.Complete {
        let stored = try await write(weight: 1) { db in
            let (lastSeq, cancelRequested) = try Self.running(key, appending: node, db)
            let complete = OperationJournalRules.completion(complete, lastSeq: lastSeq, cancelRequested: cancelRequested)
            try db.run(
                sql: """
                    UPDATE long_lived_operations SET complete = ?, completed_ns = ?
                    WHERE owner = ? AND operation_id = ?
                    """,
                arguments: [Data(complete.serializedBytes()), Self.nanoseconds(date), key.owner, key.operationID])
            return complete
        }
        signal(.journaled(key, lastSeq: stored.lastSeq))
        return stored
    }

    public func takeOverLongLivedOperation(
        _ key: LongLivedOperationKey, lease: LongLivedLease, at now: Wire.Timestamp
    ) async throws -> LongLivedOperationRecord? {
        try await write(weight: 1) { db in
            guard
                let row = try db.row(
                    sql: "SELECT * FROM long_lived_operations WHERE owner = ? AND operation_id = ?",
                    arguments: [key.owner, key.operationID])
            else {
                throw OperationJournalRules.notRunning(key)
            }
            var record = try Self.operation(row)
            guard !record.isCompleted else { throw OperationJournalRules.notRunning(key) }
            guard OperationJournalRules.mayTakeOver(record.lease, by: lease.node, at: now) else { return nil }
            try db.run(
                sql: "UPDATE long_lived_operations SET lease_node = ?, lease_expiry_ns = ? WHERE owner = ? AND operation_id = ?",
                arguments: [lease.node, Self.nanoseconds(lease.expiry), key.owner, key.operationID])
            record.lease = lease
            return record
        }
    }

    public func renewLongLivedLeases(
        _ keys: [LongLivedOperationKey], lease: LongLivedLease
    ) async throws -> Set<LongLivedOperationKey> {
        guard !keys.isEmpty else { return [] }
        let expiry = Self.nanoseconds(lease.expiry)
        return try await write(weight: 1) { db in
            var renewed: Set<LongLivedOperationKey> = []
            for key in keys {
                try db.run(
                    sql: """
                        UPDATE long_lived_operations SET lease_expiry_ns = ?
                        WHERE owner = ? AND operation_id = ? AND lease_node = ?
                        """,
                    arguments: [expiry, key.owner, key.operationID, lease.node])
                if db.changesCount > 0 { renewed.insert(key) }
            }
            return renewed
        }
    }

    @discardableResult
    public func releaseLongLivedOperation(_ key: LongLivedOperationKey, node: String) async throws -> Bool {
        try await write(weight: 1) { db in
            try db.run(
                sql: """
                    UPDATE long_lived_operations SET lease_node = NULL, lease_expiry_ns = NULL
                    WHERE owner = ? AND operation_id = ? AND lease_node = ?
                    """,
                arguments: [key.owner, key.operationID, node])
            return db.changesCount > 0
        }
    }

    public func unheldLongLivedOperations(at now: Wire.Timestamp, limit: Int) async throws -> [LongLivedOperationKey] {
        guard limit > 0 else { return [] }
        let now = Self.nanoseconds(now)
        return try await read { db in
            try db.rows(
                sql: """
                    SELECT owner, operation_id FROM long_lived_operations
                    WHERE complete IS NULL AND (lease_node IS NULL OR lease_expiry_ns IS NULL OR lease_expiry_ns < ?)
                    ORDER BY created_ns, operation_id LIMIT ?
                    """,
                arguments: [now, limit]
            ).map { LongLivedOperationKey(owner: $0[0], operationID: $0[1]) }
        }
    }

    public func longLivedOperationIDs(
        owner: String, container: String, completedSince cutoff: Wire.Timestamp
    ) async throws -> [String] {
        let cutoff = Self.nanoseconds(cutoff)
        return try await read { db in
            try String.fetchAll(
                db,
                sql: """
                    SELECT operation_id FROM long_lived_operations
                    WHERE owner = ? AND container = ? AND (completed_ns IS NULL OR completed_ns >= ?)
                    ORDER BY created_ns, operation_id
                    """,
                arguments: [owner, container, cutoff])
        }
    }

    public func longLivedOperation(_ key: LongLivedOperationKey) async throws -> LongLivedOperationRecord? {
        try await read { db in
            try db.row(
                sql: "SELECT * FROM long_lived_operations WHERE owner = ? AND operation_id = ?",
                arguments: [key.owner, key.operationID]
            ).map(Self.operation)
        }
    }

    public func longLivedEncodedEvents(
        _ key: LongLivedOperationKey, after seq: UInt64, limit: Int
    ) async throws -> [Wire.EncodedEvent] {
        guard limit > 0 else { return [] }
        let after = Int64(clamping: seq)
        return try await read { db in
            // A replay reads pages of hundreds of rows: stepped through the C API, each row's
            // bytes copied once (GRDB's `Row` would copy them into a `Data` first).
            let page = try RawStatement(
                db,
                sql: """
                    SELECT seq, event FROM long_lived_events WHERE owner = ? AND operation_id = ? AND seq > ?
                    ORDER BY seq LIMIT ?
                    """)
            page.bind(1, key.owner)
            page.bind(2, key.operationID)
            page.bind(3, after)
            page.bind(4, limit)
            var events: [Wire.EncodedEvent] = []
            events.reserveCapacity(min(limit, 1_024))
            try page.forEachRow { row in
                events.append(try OperationJournalRules.encodedEvent(seq: row.int64(0), bytes: row.bytes(1)))
            }
            return events
        }
    }

    @discardableResult
    public func acknowledgeLongLivedOperation(_ key: LongLivedOperationKey) async throws -> Bool {
        try await write(weight: 1) { db in
            try db.run(
                sql: "DELETE FROM long_lived_operations WHERE owner = ? AND operation_id = ? AND complete IS NOT NULL",
                arguments: [key.owner, key.operationID])
            guard db.changesCount > 0 else { return false }
            try Self.deleteJournal(of: key, db)
            return true
        }
    }

    public func removeLongLivedOperation(_ key: LongLivedOperationKey) async throws {
        try await write(weight: 1) { db in
            try db.run(
                sql: "DELETE FROM long_lived_operations WHERE owner = ? AND operation_id = ?",
                arguments: [key.owner, key.operationID])
            try Self.deleteJournal(of: key, db)
        }
        signal(.journaled(key, lastSeq: 0))
    }

    @discardableResult
    public func pruneLongLivedOperations(completedBefore cutoff: Wire.Timestamp) async throws -> Int {
        let cutoff = Self.nanoseconds(cutoff)
        return try await write(weight: 1) { db in
            try db.execute(
                sql: """
                    DELETE FROM long_lived_events WHERE (owner, operation_id) IN
                        (SELECT owner, operation_id FROM long_lived_operations WHERE completed_ns < ?)
                    """,
                arguments: [cutoff])
            try db.execute(sql: "DELETE FROM long_lived_operations WHERE completed_ns < ?", arguments: [cutoff])
            return db.changesCount
        }
    }

    public func unfinishedLongLivedOperations() async throws -> [LongLivedOperationRecord] {
        try await read { db in
            try Row.fetchAll(
                db, sql: "SELECT * FROM long_lived_operations WHERE complete IS NULL ORDER BY created_ns, operation_id"
            ).map(Self.operation)
        }
    }

    // MARK: - Cancellation and signals

    @discardableResult
    public func requestLongLivedCancellation(_ key: LongLivedOperationKey) async throws -> Bool {
        let marked = try await write(weight: 1) { db in
            try db.run(
                sql: """
                    UPDATE long_lived_operations SET cancel_requested = 1
                    WHERE owner = ? AND operation_id = ? AND complete IS NULL
                    """,
                arguments: [key.owner, key.operationID])
            return db.changesCount > 0
        }
        if marked { signal(.cancelRequested(key)) }
        return marked
    }

    public func longLivedCancellationsRequested(
        among keys: [LongLivedOperationKey]
    ) async throws -> Set<LongLivedOperationKey> {
        guard !keys.isEmpty else { return [] }
        return try await read { db in
            var requested: Set<LongLivedOperationKey> = []
            for key in keys {
                let marked = try Bool.fetchOne(
                    db,
                    sql: """
                        SELECT 1 FROM long_lived_operations
                        WHERE owner = ? AND operation_id = ? AND complete IS NULL AND cancel_requested = 1
                        """,
                    arguments: [key.owner, key.operationID])
                if marked != nil { requested.insert(key) }
            }
            return requested
        }
    }

    /// One process serves a SQLite directory: the signals are its own, told after each commit.
    public func observeLongLivedOperations(_ observer: @escaping @Sendable (LongLivedOperationSignal) -> Void) {
        longLivedObservers.withLock { $0.append(observer) }
    }

    private func signal(_ signal: LongLivedOperationSignal) {
        for observer in longLivedObservers.withLock({ $0 }) { observer(signal) }
    }

    // MARK: - Rows

    private static let lastSeqSQL = "SELECT last_seq FROM long_lived_operations WHERE owner = ? AND operation_id = ?"

    /// The last seq of a registered operation that has not completed, once `node` is found
    /// to hold it (``OperationJournalRules/checkHolder(_:appending:to:)``).
    ///
    /// - throws: ``StoreError`` `.unknownOperation` when it is not registered or already
    ///   completed; `.leaseLost` when another node holds it (completed or not: a node that
    ///   lost it learns so even once the node that took it over completed it).
    private static func runningLastSeq(_ key: LongLivedOperationKey, appending node: String?, _ db: Database) throws -> UInt64 {
        try running(key, appending: node, db).lastSeq
    }

    /// ``runningLastSeq(_:appending:_:)`` and whether its client cancelled it.
    private static func running(
        _ key: LongLivedOperationKey, appending node: String?, _ db: Database
    ) throws -> (lastSeq: UInt64, cancelRequested: Bool) {
        guard
            let row = try db.row(
                sql: """
                    SELECT last_seq, complete, lease_node, cancel_requested FROM long_lived_operations
                    WHERE owner = ? AND operation_id = ?
                    """,
                arguments: [key.owner, key.operationID])
        else {
            throw OperationJournalRules.notRunning(key)
        }
        try OperationJournalRules.checkHolder(row["lease_node"], appending: node, to: key)
        guard (row["complete"] as Data?) == nil else { throw OperationJournalRules.notRunning(key) }
        return (UInt64(max(0, row["last_seq"] as Int64)), (row["cancel_requested"] as Int64) != 0)
    }

    /// Appends inside the caller's transaction (fenced: `node` must hold the operation); the
    /// seqs follow the row's `last_seq`.
    private static func append(
        _ payloads: [Wire.Event.Payload], to key: LongLivedOperationKey, checkpoint: [UInt8]?, by node: String?,
        _ db: Database
    ) throws -> [Wire.Event] {
        let lastSeq = try runningLastSeq(key, appending: node, db)
        let events = OperationJournalRules.events(payloads, after: lastSeq)
        if !events.isEmpty {
            // Bound through SQLite's C API (``RawStatement``): a journaled modify appends an event per record.
            let insert = try RawStatement(
                db, sql: "INSERT INTO long_lived_events (owner, operation_id, seq, event) VALUES (?, ?, ?, ?)")
            for event in events {
                insert.bind(1, key.owner)
                insert.bind(2, key.operationID)
                insert.bind(3, Int64(event.seq))
                insert.bind(4, bytes: event.serializedBytes())
                try insert.run()
            }
        }
        let seq = events.last?.seq ?? lastSeq
        if let checkpoint {
            try db.run(
                sql: "UPDATE long_lived_operations SET last_seq = ?, checkpoint = ? WHERE owner = ? AND operation_id = ?",
                arguments: [Int64(seq), Data(checkpoint), key.owner, key.operationID])
        } else if !events.isEmpty {
            try db.run(
                sql: "UPDATE long_lived_operations SET last_seq = ? WHERE owner = ? AND operation_id = ?",
                arguments: [Int64(seq), key.owner, key.operationID])
        }
        return events
    }

    private static func deleteJournal(of key: LongLivedOperationKey, _ db: Database) throws {
        try db.run(
            sql: "DELETE FROM long_lived_events WHERE owner = ? AND operation_id = ?",
            arguments: [key.owner, key.operationID])
    }

    private static func operation(_ row: Row) throws -> LongLivedOperationRecord {
        let key = LongLivedOperationKey(owner: row["owner"], operationID: row["operation_id"])
        let completed: Int64? = row["completed_ns"]
        let complete: Data? = row["complete"]
        let checkpoint: Data? = row["checkpoint"]
        let leaseNode: String? = row["lease_node"]
        let leaseExpiry: Int64? = row["lease_expiry_ns"]
        return LongLivedOperationRecord(
            key: key,
            open: try decode(Wire.Open.self, row["open"], what: "long-lived Open"),
            lastSeq: UInt64(max(0, row["last_seq"] as Int64)),
            creationDate: timestamp(row["created_ns"]),
            completionDate: completed.map(timestamp),
            complete: try complete.map { try decode(Wire.Complete.self, $0, what: "long-lived Complete") },
            checkpoint: checkpoint.map { [UInt8]($0) },
            lease: OperationJournalRules.lease(node: leaseNode, expiryNanoseconds: leaseExpiry),
            cancelRequested: (row["cancel_requested"] as Int64) != 0
        )
    }

    private static func decode<M: WireMessage>(_ type: M.Type, _ data: Data, what: String) throws -> M {
        try OperationJournalRules.decode(type, [UInt8](data), what: what)
    }

    static func nanoseconds(_ timestamp: Wire.Timestamp) -> Int64 {
        OperationJournalRules.nanoseconds(timestamp)
    }

    static func timestamp(_ nanoseconds: Int64) -> Wire.Timestamp {
        OperationJournalRules.timestamp(nanoseconds: nanoseconds)
    }
}

/// A long-lived modify's result and the events journaling it.
private struct JournaledModification: Sendable {
    var result: RecordModificationResult
    var events: [Wire.Event]
}
