public import CirrusWire

/// Names one long-lived operation: its ID is the client's, so it is only unique per user.
/// Another user's operation with the same ID is a different operation.
public struct LongLivedOperationKey: Hashable, Sendable, CustomStringConvertible {
    /// The user record name of the caller that opened it (e.g. "_alice").
    public var owner: String
    /// The `Open.operation_id`.
    public var operationID: String

    public init(owner: String, operationID: String) {
        self.owner = owner
        self.operationID = operationID
    }

    public var description: String { "\(owner)/\(operationID)" }
}

/// A long-lived operation as the registry keeps it.
public struct LongLivedOperationRecord: Sendable, Hashable {
    public var key: LongLivedOperationKey
    /// The original `Open`, request included.
    public var open: Wire.Open
    /// The seq of the last journaled event; 0 = none yet.
    public var lastSeq: UInt64
    public var creationDate: Wire.Timestamp
    /// Set once the operation finished: its `Complete` is journaled.
    public var completionDate: Wire.Timestamp?
    /// The final `Complete` (its `last_seq` equals ``lastSeq``), once finished.
    public var complete: Wire.Complete?
    /// What the executor saved with its last journal append to continue after a restart.
    public var checkpoint: [UInt8]?

    public init(
        key: LongLivedOperationKey, open: Wire.Open, lastSeq: UInt64 = 0, creationDate: Wire.Timestamp,
        completionDate: Wire.Timestamp? = nil, complete: Wire.Complete? = nil, checkpoint: [UInt8]? = nil
    ) {
        self.key = key
        self.open = open
        self.lastSeq = lastSeq
        self.creationDate = creationDate
        self.completionDate = completionDate
        self.complete = complete
        self.checkpoint = checkpoint
    }

    public var isCompleted: Bool { complete != nil }
}

/// Turns the result of one journaled modify-records chunk into its events, inside the write
/// transaction that saved the records, so the records and the events reporting them commit
/// together. The server supplies `events` (the mapping from domain outcomes to wire events is
/// its own); the store only calls it.
public struct ModificationJournaling: Sendable {
    public var operation: LongLivedOperationKey
    /// The events reporting `result`, in order.
    public var events: @Sendable (RecordModificationResult) -> [Wire.Event.Payload]
    /// Stored with the events (replacing the previous checkpoint); nil keeps the previous one.
    public var checkpoint: @Sendable (RecordModificationResult) -> [UInt8]?

    public init(
        operation: LongLivedOperationKey,
        events: @escaping @Sendable (RecordModificationResult) -> [Wire.Event.Payload],
        checkpoint: @escaping @Sendable (RecordModificationResult) -> [UInt8]?
    ) {
        self.operation = operation
        self.events = events
        self.checkpoint = checkpoint
    }
}

/// The durable registry and journal of long-lived operations.
///
/// An operation is registered (its `Open` stored) before the server answers `Persisted`;
/// every event is appended with the next seq (1, 2, 3 …) and, where it reports a data change,
/// in the same transaction as that change; its `Complete` ends it. A completed operation stays
/// listed until the client acknowledges it or it is pruned past retention.
///
/// Unlike ``RecordStorage``, the journal keeps wire values (`Wire.Open`, `Wire.Event`,
/// `Wire.Complete`) by design: it is the stream a client is sent, stored to be replayed byte
/// for byte after a reconnect or a restart. The executors build those events from the domain
/// outcomes (see ``ModificationJournaling``); the journal only stores and numbers them.
///
/// For example:
/// ```swift
/// let key = LongLivedOperationKey(owner: "_alice", operationID: open.operationID)
/// _ = try await storage.registerLongLivedOperation(key, open: open, at: now)
/// let events = try await storage.appendLongLivedEvents([payload], to: key, checkpoint: nil)
/// _ = try await storage.completeLongLivedOperation(key, complete: Wire.Complete(lastSeq: 1), at: now)
/// ```
public protocol OperationJournal: Sendable {
    /// Registers a new running operation; durable when this returns.
    ///
    /// - throws: ``StoreError`` `.duplicateOperation` when the owner already has an operation
    ///   with this ID.
    func registerLongLivedOperation(
        _ key: LongLivedOperationKey, open: Wire.Open, at date: Wire.Timestamp
    ) async throws -> LongLivedOperationRecord

    /// Appends `payloads` with the next seqs (and replaces the checkpoint when one is given),
    /// in one transaction; returns the events as journaled.
    ///
    /// - throws: ``StoreError`` `.unknownOperation` when the operation is not registered or
    ///   already completed.
    func appendLongLivedEvents(
        _ payloads: [Wire.Event.Payload], to key: LongLivedOperationKey, checkpoint: [UInt8]?
    ) async throws -> [Wire.Event]

    /// ``RecordStorage/modifyRecords(_:in:by:)`` whose result is journaled as events in the
    /// same transaction.
    ///
    /// - throws: as `modifyRecords`, and `.unknownOperation` as ``appendLongLivedEvents(_:to:checkpoint:)``.
    func modifyRecords(
        _ modification: RecordModification, in database: DatabaseKey, by user: String,
        journaling: ModificationJournaling
    ) async throws -> (result: RecordModificationResult, events: [Wire.Event])

    /// Journals the operation's `Complete` (its `last_seq` is set to the journal's) and marks
    /// it completed; returns the `Complete` as stored.
    ///
    /// - throws: ``StoreError`` `.unknownOperation`.
    func completeLongLivedOperation(
        _ key: LongLivedOperationKey, complete: Wire.Complete, at date: Wire.Timestamp
    ) async throws -> Wire.Complete

    /// The IDs of `owner`'s operations in `container` that are running, or completed at or
    /// after `cutoff`, oldest first.
    ///
    /// - throws: ``StoreError``.
    func longLivedOperationIDs(
        owner: String, container: String, completedSince cutoff: Wire.Timestamp
    ) async throws -> [String]

    /// One operation, or nil when `key` names none.
    ///
    /// - throws: ``StoreError``.
    func longLivedOperation(_ key: LongLivedOperationKey) async throws -> LongLivedOperationRecord?

    /// Journaled events with seq > `seq`, in order, at most `limit`, in wire format as stored
    /// (a replay sends them as they are; ``longLivedEvents(_:after:limit:)`` decodes them).
    ///
    /// - throws: ``StoreError``; `.corruptData` when a stored event is not an `Event` with its
    ///   row's seq.
    func longLivedEncodedEvents(
        _ key: LongLivedOperationKey, after seq: UInt64, limit: Int
    ) async throws -> [Wire.EncodedEvent]

    /// Drops a completed operation and its journal (the client has its `Complete`); returns
    /// false (and keeps it) when it is unknown or still running.
    ///
    /// - throws: ``StoreError``.
    @discardableResult
    func acknowledgeLongLivedOperation(_ key: LongLivedOperationKey) async throws -> Bool

    /// Drops an operation and its journal whatever its state (cancelled, or never persisted).
    ///
    /// - throws: ``StoreError``.
    func removeLongLivedOperation(_ key: LongLivedOperationKey) async throws

    /// Drops operations completed before `cutoff`, with their journals; returns how many.
    ///
    /// - throws: ``StoreError``.
    @discardableResult
    func pruneLongLivedOperations(completedBefore cutoff: Wire.Timestamp) async throws -> Int

    /// Every operation still running (to continue after a restart), oldest first.
    ///
    /// - throws: ``StoreError``.
    func unfinishedLongLivedOperations() async throws -> [LongLivedOperationRecord]
}

extension OperationJournal {
    /// Journaled events with seq > `seq`, in order, at most `limit`, decoded.
    ///
    /// - throws: ``StoreError``; `.corruptData` when a stored event does not decode.
    public func longLivedEvents(_ key: LongLivedOperationKey, after seq: UInt64, limit: Int) async throws -> [Wire.Event] {
        try await self.longLivedEncodedEvents(key, after: seq, limit: limit).map { encoded in
            do {
                return try encoded.decoded()
            } catch {
                throw StoreError(.corruptData, "stored journaled event \(encoded.seq) does not decode: \(error)")
            }
        }
    }
}
