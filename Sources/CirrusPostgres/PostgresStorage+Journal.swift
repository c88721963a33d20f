public import CirrusStore
public import CirrusWire
import Foundation
import Logging
import NIOCore
import PostgresNIO

/// The journal of long-lived operations, in the same database as the records it reports on,
/// shared by every node: an operation registered and journaled through one node is listed,
/// read and continued through any other. It stores wire events by design (see
/// ``OperationJournal``); its errors and ordering are the SQLite engine's
/// (``OperationJournalRules``).
///
/// An append locks its operation's row first (`FOR UPDATE`), so two nodes appending to one
/// operation take turns and its seqs stay gap-free; under that lock it checks that its node
/// still holds the operation's lease (fencing). A takeover locks the row the same way, so of
/// nodes taking one operation over at once exactly one wins, and it reads the last seq and
/// checkpoint every earlier append committed. A journaled modify runs in the group
/// commit of its database (``PostgresWriteQueue``), its records and its events in one
/// transaction: both commit, or neither.
///
/// A client's cancellation is a mark on the operation's row (`cancel_requested`, schema v12)
/// that its completion, and any node taking it over, honours. Every append, completion, drop
/// and cancellation is signalled to every node once committed (``PostgresLongLivedSignals``),
/// so a node following an operation it does not run, or running one another node's client
/// cancelled, learns of it at once.
extension PostgresStorage: OperationJournal {
    public func registerLongLivedOperation(
        _ key: LongLivedOperationKey, open: Wire.Open, at date: Wire.Timestamp, lease: LongLivedLease?
    ) async throws -> LongLivedOperationRecord {
        var encodings: [Wire.EncodedRecordFields] = []
        let bytes = Data(open.serializedBytesWritingRecords(keeping: &encodings))
        let created = OperationJournalRules.nanoseconds(date)
        let node = lease?.node
        let expiry = lease.map { OperationJournalRules.nanoseconds($0.expiry) }
        let logger = self.logger
        try await connection { connection in
            // (owner, operation_id) is unique: of two nodes registering one key at once, the
            // second finds the first's row and inserts nothing.
            let rows = try await connection.query(
                """
                INSERT INTO long_lived_operations
                    (container, owner, operation_id, open, created_ns, lease_node, lease_expiry_ns)
                VALUES (\(open.containerIdentifier), \(key.owner), \(key.operationID), \(bytes), \(created), \(node), \(expiry))
                ON CONFLICT DO NOTHING RETURNING 1
                """, logger: logger)
            var inserted = false
            for try await _ in rows.decode(Int32.self) { inserted = true }
            guard inserted else { throw OperationJournalRules.duplicate(key) }
        }
        var record = LongLivedOperationRecord(key: key, open: open, creationDate: date, lease: lease)
        record.fieldEncodings = RecordFieldEncodings(encodings)
        return record
    }

    public func appendLongLivedEvents(
        _ payloads: [Wire.Event.Payload], to key: LongLivedOperationKey, checkpoint: [UInt8]?, by node: String?
    ) async throws -> [Wire.Event] {
        let logger = self.logger
        let events = try await transaction { connection in
            try await Self.append(payloads, to: key, checkpoint: checkpoint, by: node, connection, logger)
        }
        if let last = events.last { signal(.journaled(key, lastSeq: last.seq)) }
        return events
    }

    /// ``modifyRecords(_:in:by:)`` and the events `journaling` reports its result with, in one
    /// transaction of the database's group commit: a failure of either (the operation is not
    /// running, the server refused a statement, the commit failed) leaves neither.
    public func modifyRecords(
        _ modification: RecordModification, in database: DatabaseKey, by user: String,
        journaling: ModificationJournaling
    ) async throws -> (result: RecordModificationResult, events: [Wire.Event]) {
        let key = try database.validated()
        let itemCount = modification.recordsToSave.count + modification.recordIDsToDelete.count
        try checkItemCount(itemCount)
        guard !user.isEmpty else { throw StoreError(.invalidArguments, "no user record name") }
        let logger = self.logger
        guard itemCount > 0 else {
            // Nothing to write into the database: only the events, without its lock.
            let result = RecordModificationResult()
            let events = try await transaction { connection in
                try await Self.append(
                    journaling.events(result), to: journaling.operation, checkpoint: journaling.checkpoint(result),
                    by: journaling.node, connection, logger)
            }
            if let last = events.last { signal(.journaled(journaling.operation, lastSeq: last.seq)) }
            return (result, events)
        }
        let now = clock()
        let plan = RecordModificationPlan(modification, in: key)
        let cache = subscriptionCache
        let journaled = try await write(in: key, weight: itemCount * 2) { connection in
            let writer = PostgresRecordWriter(
                connection: connection, key: key, user: user, now: now, logger: logger, subscriptionCache: cache)
            let outcome = try await writer.modify(plan)
            let events = try await Self.append(
                journaling.events(outcome.result), to: journaling.operation,
                checkpoint: journaling.checkpoint(outcome.result), by: journaling.node, connection, logger)
            return JournaledModification(outcome: outcome, events: events)
        }
        // What the records fired, as a modify outside the journal announces it: after the commit.
        notifications.announce(in: key.container, journaled.outcome.notified)
        if let last = journaled.events.last { signal(.journaled(journaling.operation, lastSeq: last.seq)) }
        return (journaled.outcome.result, journaled.events)
    }

    public func completeLongLivedOperation(
        _ key: LongLivedOperationKey, complete: Wire.Complete, at date: Wire.Timestamp, by node: String?
    ) async throws -> Wire.Complete {
        let completed = OperationJournalRules.nanoseconds(date)
        let logger = self.logger
        let stored = try await transaction { connection in
            let running = try await Self.lockRunning(key, appending: node, connection, logger)
            let complete = OperationJournalRules.completion(
                complete, lastSeq: running.lastSeq, cancelRequested: running.cancelRequested)
            try await connection.query(
                """
                UPDATE long_lived_operations SET complete = \(Data(complete.serializedBytes())), completed_ns = \(completed)
                WHERE owner = \(key.owner) AND operation_id = \(key.operationID)
                """, logger: logger)
            return complete
        }
        signal(.journaled(key, lastSeq: stored.lastSeq))
        return stored
    }

    public func takeOverLongLivedOperation(
        _ key: LongLivedOperationKey, lease: LongLivedLease, at now: Wire.Timestamp
    ) async throws -> LongLivedOperationRecord? {
        let expiry = OperationJournalRules.nanoseconds(lease.expiry)
        let logger = self.logger
        return try await transaction { connection in
            // Locked until the commit: a node taking it over at the same moment waits here and
            // then reads the lease this one wrote; an append of the earlier holder waits too and
            // then finds it no longer holds the operation.
            let rows = try await connection.query(
                """
                SELECT \(unescaped: Self.operationColumns) FROM long_lived_operations
                WHERE owner = \(key.owner) AND operation_id = \(key.operationID) FOR UPDATE
                """, logger: logger)
            var found: LongLivedOperationRecord?
            for try await columns in rows.decode(OperationColumns.self) { found = try Self.operation(columns) }
            guard var record = found, !record.isCompleted else { throw OperationJournalRules.notRunning(key) }
            guard OperationJournalRules.mayTakeOver(record.lease, by: lease.node, at: now) else { return nil }
            try await connection.query(
                """
                UPDATE long_lived_operations SET lease_node = \(lease.node), lease_expiry_ns = \(expiry)
                WHERE owner = \(key.owner) AND operation_id = \(key.operationID)
                """, logger: logger)
            record.lease = lease
            return record
        }
    }

    public func renewLongLivedLeases(
        _ keys: [LongLivedOperationKey], lease: LongLivedLease
    ) async throws -> Set<LongLivedOperationKey> {
        guard !keys.isEmpty else { return [] }
        let owners = keys.map(\.owner)
        let ids = keys.map(\.operationID)
        let expiry = OperationJournalRules.nanoseconds(lease.expiry)
        let logger = self.logger
        return try await connection { connection in
            let rows = try await connection.query(
                """
                UPDATE long_lived_operations o SET lease_expiry_ns = \(expiry)
                FROM unnest(\(owners)::text[], \(ids)::text[]) AS k (owner, operation_id)
                WHERE o.owner = k.owner AND o.operation_id = k.operation_id AND o.lease_node = \(lease.node)
                RETURNING o.owner, o.operation_id
                """, logger: logger)
            var renewed: Set<LongLivedOperationKey> = []
            for try await (owner, id) in rows.decode((String, String).self) {
                renewed.insert(LongLivedOperationKey(owner: owner, operationID: id))
            }
            return renewed
        }
    }

    @discardableResult
    public func releaseLongLivedOperation(_ key: LongLivedOperationKey, node: String) async throws -> Bool {
        let logger = self.logger
        return try await connection { connection in
            let rows = try await connection.query(
                """
                UPDATE long_lived_operations SET lease_node = NULL, lease_expiry_ns = NULL
                WHERE owner = \(key.owner) AND operation_id = \(key.operationID) AND lease_node = \(node)
                RETURNING 1
                """, logger: logger)
            var released = false
            for try await _ in rows.decode(Int32.self) { released = true }
            return released
        }
    }

    public func unheldLongLivedOperations(at now: Wire.Timestamp, limit: Int) async throws -> [LongLivedOperationKey] {
        guard limit > 0 else { return [] }
        let now = OperationJournalRules.nanoseconds(now)
        let limit = Int64(limit)
        let logger = self.logger
        return try await connection { connection in
            // OperationJournalRules.mayTakeOver for a node that holds none of them.
            let rows = try await connection.query(
                """
                SELECT owner, operation_id FROM long_lived_operations
                WHERE complete IS NULL AND (lease_node IS NULL OR lease_expiry_ns IS NULL OR lease_expiry_ns < \(now))
                ORDER BY created_ns, operation_id LIMIT \(limit)
                """, logger: logger)
            var keys: [LongLivedOperationKey] = []
            for try await (owner, id) in rows.decode((String, String).self) {
                keys.append(LongLivedOperationKey(owner: owner, operationID: id))
            }
            return keys
        }
    }

    public func longLivedOperationIDs(
        owner: String, container: String, completedSince cutoff: Wire.Timestamp
    ) async throws -> [String] {
        let cutoff = OperationJournalRules.nanoseconds(cutoff)
        let logger = self.logger
        return try await connection { connection in
            let rows = try await connection.query(
                """
                SELECT operation_id FROM long_lived_operations
                WHERE container = \(container) AND owner = \(owner) AND (completed_ns IS NULL OR completed_ns >= \(cutoff))
                ORDER BY created_ns, operation_id
                """, logger: logger)
            var ids: [String] = []
            for try await id in rows.decode(String.self) { ids.append(id) }
            return ids
        }
    }

    public func longLivedOperation(_ key: LongLivedOperationKey) async throws -> LongLivedOperationRecord? {
        let logger = self.logger
        return try await connection { connection in
            let rows = try await connection.query(
                """
                SELECT \(unescaped: Self.operationColumns) FROM long_lived_operations
                WHERE owner = \(key.owner) AND operation_id = \(key.operationID)
                """, logger: logger)
            for try await columns in rows.decode(OperationColumns.self) { return try Self.operation(columns) }
            return nil
        }
    }

    public func longLivedEncodedEvents(
        _ key: LongLivedOperationKey, after seq: UInt64, limit: Int
    ) async throws -> [Wire.EncodedEvent] {
        guard limit > 0 else { return [] }
        let after = Int64(clamping: seq)
        let limit = Int64(limit)
        let logger = self.logger
        return try await connection { connection in
            let rows = try await connection.query(
                """
                SELECT e.seq, e.event FROM long_lived_operations o
                JOIN long_lived_events e USING (container, owner, operation_id)
                WHERE o.owner = \(key.owner) AND o.operation_id = \(key.operationID) AND e.seq > \(after)
                ORDER BY e.seq LIMIT \(limit)
                """, logger: logger)
            var events: [Wire.EncodedEvent] = []
            for try await (seq, bytes) in rows.decode((Int64, Data).self) {
                events.append(try OperationJournalRules.encodedEvent(seq: seq, bytes: [UInt8](bytes)))
            }
            return events
        }
    }

    @discardableResult
    public func acknowledgeLongLivedOperation(_ key: LongLivedOperationKey) async throws -> Bool {
        let logger = self.logger
        // The operation's events go with its row (ON DELETE CASCADE).
        return try await connection { connection in
            let rows = try await connection.query(
                """
                DELETE FROM long_lived_operations
                WHERE owner = \(key.owner) AND operation_id = \(key.operationID) AND complete IS NOT NULL
                RETURNING 1
                """, logger: logger)
            var deleted = false
            for try await _ in rows.decode(Int32.self) { deleted = true }
            return deleted
        }
    }

    public func removeLongLivedOperation(_ key: LongLivedOperationKey) async throws {
        let logger = self.logger
        try await connection { connection in
            _ = try await connection.query(
                "DELETE FROM long_lived_operations WHERE owner = \(key.owner) AND operation_id = \(key.operationID)",
                logger: logger)
        }
        signal(.journaled(key, lastSeq: 0))
    }

    @discardableResult
    public func requestLongLivedCancellation(_ key: LongLivedOperationKey) async throws -> Bool {
        let logger = self.logger
        let marked = try await connection { connection in
            let rows = try await connection.query(
                """
                UPDATE long_lived_operations SET cancel_requested = true
                WHERE owner = \(key.owner) AND operation_id = \(key.operationID) AND complete IS NULL
                RETURNING 1
                """, logger: logger)
            var marked = false
            for try await _ in rows.decode(Int32.self) { marked = true }
            return marked
        }
        // Heard by every node: the one running it stops it.
        if marked { signal(.cancelRequested(key)) }
        return marked
    }

    public func longLivedCancellationsRequested(
        among keys: [LongLivedOperationKey]
    ) async throws -> Set<LongLivedOperationKey> {
        guard !keys.isEmpty else { return [] }
        let owners = keys.map(\.owner)
        let ids = keys.map(\.operationID)
        let logger = self.logger
        return try await connection { connection in
            let rows = try await connection.query(
                """
                SELECT o.owner, o.operation_id FROM long_lived_operations o
                JOIN unnest(\(owners)::text[], \(ids)::text[]) AS k (owner, operation_id)
                    ON o.owner = k.owner AND o.operation_id = k.operation_id
                WHERE o.complete IS NULL AND o.cancel_requested
                """, logger: logger)
            var requested: Set<LongLivedOperationKey> = []
            for try await (owner, id) in rows.decode((String, String).self) {
                requested.insert(LongLivedOperationKey(owner: owner, operationID: id))
            }
            return requested
        }
    }

    /// Every node's signals, heard through this node's listening connection (``PostgresLongLivedSignals``).
    public func observeLongLivedOperations(_ observer: @escaping @Sendable (LongLivedOperationSignal) -> Void) {
        longLivedSignals.observe(observer)
    }

    @discardableResult
    public func pruneLongLivedOperations(completedBefore cutoff: Wire.Timestamp) async throws -> Int {
        let cutoff = OperationJournalRules.nanoseconds(cutoff)
        let logger = self.logger
        return try await connection { connection in
            let rows = try await connection.query(
                """
                WITH pruned AS (DELETE FROM long_lived_operations WHERE completed_ns < \(cutoff) RETURNING 1)
                SELECT count(*) FROM pruned
                """, logger: logger)
            var count: Int64 = 0
            for try await value in rows.decode(Int64.self) { count = value }
            return Int(count)
        }
    }

    public func unfinishedLongLivedOperations() async throws -> [LongLivedOperationRecord] {
        let logger = self.logger
        return try await connection { connection in
            let rows = try await connection.query(
                """
                SELECT \(unescaped: Self.operationColumns) FROM long_lived_operations
                WHERE complete IS NULL ORDER BY created_ns, operation_id
                """, logger: logger)
            var operations: [LongLivedOperationRecord] = []
            for try await columns in rows.decode(OperationColumns.self) { operations.append(try Self.operation(columns)) }
            return operations
        }
    }

    // MARK: - Rows

    private static let operationColumns =
        "owner, operation_id, open, last_seq, created_ns, completed_ns, checkpoint, complete, lease_node, lease_expiry_ns, cancel_requested"
    private typealias OperationColumns = (String, String, Data, Int64, Int64, Int64?, Data?, Data?, String?, Int64?, Bool)

    /// Queues `signal` for every node's listener, once what it reports is committed
    /// (``PostgresLongLivedSignals``: sent by a task of its own, so the caller does not wait).
    private func signal(_ signal: LongLivedOperationSignal) {
        longLivedSignals.send(signal)
    }

    /// Locks the row of a registered operation that has not completed until the transaction
    /// ends, and checks that `node` holds it (``OperationJournalRules/checkHolder(_:appending:to:)``);
    /// returns its container, last seq and whether its client cancelled it.
    ///
    /// - throws: ``StoreError`` `.unknownOperation` when it is not registered or already
    ///   completed; `.leaseLost` when another node holds it (completed or not).
    private static func lockRunning(
        _ key: LongLivedOperationKey, appending node: String?, _ connection: PostgresConnection, _ logger: Logger
    ) async throws -> (container: String, lastSeq: UInt64, cancelRequested: Bool) {
        let rows = try await connection.query(
            """
            SELECT container, last_seq, complete IS NULL, lease_node, cancel_requested FROM long_lived_operations
            WHERE owner = \(key.owner) AND operation_id = \(key.operationID) FOR UPDATE
            """, logger: logger)
        var found: (container: String, lastSeq: UInt64, running: Bool, holder: String?, cancelRequested: Bool)?
        for try await (container, lastSeq, running, holder, cancelRequested) in rows.decode(
            (String, Int64, Bool, String?, Bool).self)
        {
            found = (container, UInt64(max(0, lastSeq)), running, holder, cancelRequested)
        }
        guard let found else { throw OperationJournalRules.notRunning(key) }
        try OperationJournalRules.checkHolder(found.holder, appending: node, to: key)
        guard found.running else { throw OperationJournalRules.notRunning(key) }
        return (found.container, found.lastSeq, found.cancelRequested)
    }

    /// Appends inside the caller's transaction (fenced: `node` must hold the operation); the
    /// seqs follow the row's `last_seq`.
    private static func append(
        _ payloads: [Wire.Event.Payload], to key: LongLivedOperationKey, checkpoint: [UInt8]?, by node: String?,
        _ connection: PostgresConnection, _ logger: Logger
    ) async throws -> [Wire.Event] {
        let (container, lastSeq, _) = try await lockRunning(key, appending: node, connection, logger)
        let events = OperationJournalRules.events(payloads, after: lastSeq)
        guard !events.isEmpty || checkpoint != nil else { return [] }
        let seqs = events.map { Int64($0.seq) }
        let bytes = events.map { ByteBuffer(bytes: $0.serializedBytes()) }
        let seq = Int64(events.last?.seq ?? lastSeq)
        let checkpoint = checkpoint.map { Data($0) }
        // One statement: the events, then the row's last seq and (when given) checkpoint.
        try await connection.query(
            """
            WITH appended AS (
                INSERT INTO long_lived_events (container, owner, operation_id, seq, event)
                SELECT \(container), \(key.owner), \(key.operationID), seq, event
                FROM unnest(\(seqs)::bigint[], \(bytes)::bytea[]) AS appended (seq, event)
            )
            UPDATE long_lived_operations SET last_seq = \(seq), checkpoint = coalesce(\(checkpoint), checkpoint)
            WHERE container = \(container) AND owner = \(key.owner) AND operation_id = \(key.operationID)
            """, logger: logger)
        return events
    }

    private static func operation(_ columns: OperationColumns) throws(StoreError) -> LongLivedOperationRecord {
        let (owner, operationID, open, lastSeq, created, completed, checkpoint, complete, leaseNode, leaseExpiry, cancelled) =
            columns
        return LongLivedOperationRecord(
            key: LongLivedOperationKey(owner: owner, operationID: operationID),
            open: try OperationJournalRules.decode(Wire.Open.self, [UInt8](open), what: "long-lived Open"),
            lastSeq: UInt64(max(0, lastSeq)),
            creationDate: OperationJournalRules.timestamp(nanoseconds: created),
            completionDate: completed.map { OperationJournalRules.timestamp(nanoseconds: $0) },
            complete: try complete.map { (bytes) throws(StoreError) in
                try OperationJournalRules.decode(Wire.Complete.self, [UInt8](bytes), what: "long-lived Complete")
            },
            checkpoint: checkpoint.map { [UInt8]($0) },
            lease: OperationJournalRules.lease(node: leaseNode, expiryNanoseconds: leaseExpiry),
            cancelRequested: cancelled
        )
    }
}

/// A long-lived modify's result and the events journaling it.
private struct JournaledModification: Sendable {
    var outcome: PostgresRecordWriter.Outcome
    var events: [Wire.Event]
}
