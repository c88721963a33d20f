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
    /// The node running it and until when; nil when no node holds it (registered without a
    /// lease, or released).
    public var lease: LongLivedLease?
    /// Its client cancelled it (``OperationJournal/requestLongLivedCancellation(_:)``): whichever
    /// node runs it, or takes it over, completes it as cancelled.
    public var cancelRequested: Bool
    /// For a modify of records as registered: its saves' fields as the journal encoded them to
    /// store the `Open`, for the run to reuse (``RecordModification/fieldEncodings``). Not
    /// stored: empty for a record read back from the journal.
    public var fieldEncodings = RecordFieldEncodings()

    public init(
        key: LongLivedOperationKey, open: Wire.Open, lastSeq: UInt64 = 0, creationDate: Wire.Timestamp,
        completionDate: Wire.Timestamp? = nil, complete: Wire.Complete? = nil, checkpoint: [UInt8]? = nil,
        lease: LongLivedLease? = nil, cancelRequested: Bool = false
    ) {
        self.key = key
        self.open = open
        self.lastSeq = lastSeq
        self.creationDate = creationDate
        self.completionDate = completionDate
        self.complete = complete
        self.checkpoint = checkpoint
        self.lease = lease
        self.cancelRequested = cancelRequested
    }

    public var isCompleted: Bool { complete != nil }
}

/// A node's hold on a running long-lived operation: the node that runs it, and until when
/// the hold lasts unless the node renews it (its heartbeat). Once the expiry has passed,
/// another node may take the operation over; from then on the journal refuses the first
/// node's appends (it is fenced).
public struct LongLivedLease: Sendable, Hashable, CustomStringConvertible {
    /// The ID of the node holding the operation (unique per running process).
    public var node: String
    /// When the hold ends unless renewed.
    public var expiry: Wire.Timestamp

    public init(node: String, expiry: Wire.Timestamp) {
        self.node = node
        self.expiry = expiry
    }

    public var description: String { "\(node) until \(expiry.seconds).\(expiry.nanos)" }
}

/// What a journal tells its observers (``OperationJournal/observeLongLivedOperations(_:)``)
/// about an operation that changed: on PostgreSQL every node hears what any node committed, so
/// a node that does not run an operation learns at once what to read from the journal.
///
/// A signal only says where to look; the journal stays the source of truth. One may be lost
/// (a dropped listening connection) or come twice: an observer that reads the journal again on
/// a timer as well only waits longer when one is lost.
public enum LongLivedOperationSignal: Sendable, Hashable {
    /// Events up to `lastSeq` were appended, or the operation completed or was dropped: its
    /// followers read the journal.
    case journaled(LongLivedOperationKey, lastSeq: UInt64)
    /// Its client cancelled it (``OperationJournal/requestLongLivedCancellation(_:)``): the node
    /// running it stops it and completes it as cancelled.
    case cancelRequested(LongLivedOperationKey)

    /// The operation it is about.
    public var key: LongLivedOperationKey {
        switch self {
        case .journaled(let key, _), .cancelRequested(let key): key
        }
    }
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
    /// The node appending, fenced as ``OperationJournal/appendLongLivedEvents(_:to:checkpoint:by:)``
    /// fences it; nil appends whoever holds the operation.
    public var node: String?

    public init(
        operation: LongLivedOperationKey,
        events: @escaping @Sendable (RecordModificationResult) -> [Wire.Event.Payload],
        checkpoint: @escaping @Sendable (RecordModificationResult) -> [UInt8]?,
        node: String? = nil
    ) {
        self.operation = operation
        self.events = events
        self.checkpoint = checkpoint
        self.node = node
    }
}

/// The durable registry and journal of long-lived operations.
///
/// An operation is registered (its `Open` stored) before the server answers `Persisted`;
/// every event is appended with the next seq (1, 2, 3 …) and, where it reports a data change,
/// in the same transaction as that change; its `Complete` ends it. A completed operation stays
/// listed until the client acknowledges it or it is pruned past retention.
///
/// Several nodes may share one journal (PostgreSQL). Each running operation is held by one
/// node through a ``LongLivedLease``: the node registers it with its lease, renews the lease
/// while it runs it (``renewLongLivedLeases(_:lease:)``), and releases it when it stops
/// without finishing (``releaseLongLivedOperation(_:node:)``). Once a lease has expired (or
/// was released), any node may take the operation over (``takeOverLongLivedOperation(_:lease:at:)``);
/// of nodes trying at once exactly one wins. Appends and the completion name their node and
/// fail with ``StoreError`` `.leaseLost` when another node holds the operation now, checked in
/// the append's own transaction: a node paused past its lease cannot add to a journal that
/// another node continues. The rules are ``OperationJournalRules``'.
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
    ///
    /// - parameter lease: the node that runs it and until when; nil registers it unheld, for
    ///   any node to take over.
    func registerLongLivedOperation(
        _ key: LongLivedOperationKey, open: Wire.Open, at date: Wire.Timestamp, lease: LongLivedLease?
    ) async throws -> LongLivedOperationRecord

    /// Appends `payloads` with the next seqs (and replaces the checkpoint when one is given),
    /// in one transaction; returns the events as journaled.
    ///
    /// - parameter node: the node appending: the append fails unless it holds the operation
    ///   (whether or not its lease has expired, as long as no other node took it over). Nil
    ///   appends whoever holds it (one process, tools).
    /// - throws: ``StoreError`` `.unknownOperation` when the operation is not registered or
    ///   already completed; `.leaseLost` when `node` does not hold it.
    func appendLongLivedEvents(
        _ payloads: [Wire.Event.Payload], to key: LongLivedOperationKey, checkpoint: [UInt8]?, by node: String?
    ) async throws -> [Wire.Event]

    /// ``RecordStorage/modifyRecords(_:in:by:)`` whose result is journaled as events in the
    /// same transaction.
    ///
    /// - throws: as `modifyRecords`, and `.unknownOperation` and `.leaseLost` as
    ///   ``appendLongLivedEvents(_:to:checkpoint:by:)`` (for `journaling.node`).
    func modifyRecords(
        _ modification: RecordModification, in database: DatabaseKey, by user: String,
        journaling: ModificationJournaling
    ) async throws -> (result: RecordModificationResult, events: [Wire.Event])

    /// Journals the operation's `Complete` (its `last_seq` is set to the journal's) and marks
    /// it completed; returns the `Complete` as stored: the cancelled one
    /// (``OperationJournalRules/cancelled(lastSeq:)``) when its client cancelled it
    /// (``requestLongLivedCancellation(_:)``).
    ///
    /// - parameter node: the node completing it, fenced as an append is; nil: whoever holds it.
    /// - throws: ``StoreError`` `.unknownOperation`; `.leaseLost` when `node` does not hold it.
    func completeLongLivedOperation(
        _ key: LongLivedOperationKey, complete: Wire.Complete, at date: Wire.Timestamp, by node: String?
    ) async throws -> Wire.Complete

    /// Makes `lease.node` hold the running operation `key` until `lease.expiry`, when no node
    /// holds it, its lease expired before `now`, or `lease.node` holds it already. In one
    /// transaction that reads the operation as it then stands, so of nodes trying at once
    /// exactly one wins, and the winner continues after the last event any earlier holder
    /// journaled (later appends of that holder fail). Returns the operation as taken over
    /// (with its new lease), or nil when another node's lease holds at `now`.
    ///
    /// - throws: ``StoreError`` `.unknownOperation` when it is not registered or already completed.
    func takeOverLongLivedOperation(
        _ key: LongLivedOperationKey, lease: LongLivedLease, at now: Wire.Timestamp
    ) async throws -> LongLivedOperationRecord?

    /// The heartbeat: moves the expiry of every operation of `keys` that `lease.node` still
    /// holds to `lease.expiry`, in one transaction; returns those (the others were taken over,
    /// or are gone).
    ///
    /// - throws: ``StoreError``.
    func renewLongLivedLeases(_ keys: [LongLivedOperationKey], lease: LongLivedLease) async throws -> Set<LongLivedOperationKey>

    /// Lets go of `key` when `node` holds it (it stops without finishing it): another node
    /// may take it over at once. Returns whether `node` held it.
    ///
    /// - throws: ``StoreError``.
    @discardableResult
    func releaseLongLivedOperation(_ key: LongLivedOperationKey, node: String) async throws -> Bool

    /// The running operations no node holds at `now` (never held, released, or their lease
    /// expired before `now`), oldest first, at most `limit`: what a node may take over.
    ///
    /// - throws: ``StoreError``.
    func unheldLongLivedOperations(at now: Wire.Timestamp, limit: Int) async throws -> [LongLivedOperationKey]

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

    /// Marks the running operation `key` as cancelled by its client, durably, and signals it
    /// (``LongLivedOperationSignal/cancelRequested(_:)``) to every node's observers once that
    /// is committed. From then on its completion is the cancelled one
    /// (``OperationJournalRules/cancelled(lastSeq:)``) whatever its node completes it with, and
    /// a node that takes it over finds the mark (``LongLivedOperationRecord/cancelRequested``).
    /// Returns false (and marks nothing) when it is unknown or already completed.
    ///
    /// - throws: ``StoreError``.
    @discardableResult
    func requestLongLivedCancellation(_ key: LongLivedOperationKey) async throws -> Bool

    /// Those of `keys` whose client cancelled them (``requestLongLivedCancellation(_:)``) and
    /// that have not completed: a node's heartbeat asks, so a cancellation whose signal was
    /// lost reaches the running node within a heartbeat.
    ///
    /// - throws: ``StoreError``.
    func longLivedCancellationsRequested(among keys: [LongLivedOperationKey]) async throws -> Set<LongLivedOperationKey>

    /// Calls `observer` with every ``LongLivedOperationSignal`` committed from now on: on
    /// PostgreSQL those of every node (through `LISTEN`), on SQLite those of this process. It
    /// must return quickly (it runs on the engine's listening task).
    func observeLongLivedOperations(_ observer: @escaping @Sendable (LongLivedOperationSignal) -> Void)
}

extension OperationJournal {
    /// Registers a new running operation that no node holds yet.
    ///
    /// - throws: as ``registerLongLivedOperation(_:open:at:lease:)``.
    public func registerLongLivedOperation(
        _ key: LongLivedOperationKey, open: Wire.Open, at date: Wire.Timestamp
    ) async throws -> LongLivedOperationRecord {
        try await registerLongLivedOperation(key, open: open, at: date, lease: nil)
    }

    /// Appends whoever holds the operation (one process, tools).
    ///
    /// - throws: as ``appendLongLivedEvents(_:to:checkpoint:by:)``.
    public func appendLongLivedEvents(
        _ payloads: [Wire.Event.Payload], to key: LongLivedOperationKey, checkpoint: [UInt8]?
    ) async throws -> [Wire.Event] {
        try await appendLongLivedEvents(payloads, to: key, checkpoint: checkpoint, by: nil)
    }

    /// Completes whoever holds the operation.
    ///
    /// - throws: as ``completeLongLivedOperation(_:complete:at:by:)``.
    public func completeLongLivedOperation(
        _ key: LongLivedOperationKey, complete: Wire.Complete, at date: Wire.Timestamp
    ) async throws -> Wire.Complete {
        try await completeLongLivedOperation(key, complete: complete, at: date, by: nil)
    }

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
