import CirrusStore
import CirrusWire

/// A journal that passes every call to `base`: a test's journal conforms and implements only
/// the calls it changes (an append held at a gate, a page with an event left out, signals
/// never heard).
protocol ForwardingJournal: OperationJournal {
    associatedtype Base: OperationJournal
    var base: Base { get }
}

extension ForwardingJournal {
    func registerLongLivedOperation(
        _ key: LongLivedOperationKey, open: Wire.Open, at date: Wire.Timestamp, lease: LongLivedLease?
    ) async throws -> LongLivedOperationRecord {
        try await base.registerLongLivedOperation(key, open: open, at: date, lease: lease)
    }

    func appendLongLivedEvents(
        _ payloads: [Wire.Event.Payload], to key: LongLivedOperationKey, checkpoint: [UInt8]?, by node: String?
    ) async throws -> [Wire.Event] {
        try await base.appendLongLivedEvents(payloads, to: key, checkpoint: checkpoint, by: node)
    }

    func modifyRecords(
        _ modification: RecordModification, in database: DatabaseKey, by user: String,
        journaling: ModificationJournaling
    ) async throws -> (result: RecordModificationResult, events: [Wire.Event]) {
        try await base.modifyRecords(modification, in: database, by: user, journaling: journaling)
    }

    func completeLongLivedOperation(
        _ key: LongLivedOperationKey, complete: Wire.Complete, at date: Wire.Timestamp, by node: String?
    ) async throws -> Wire.Complete {
        try await base.completeLongLivedOperation(key, complete: complete, at: date, by: node)
    }

    func takeOverLongLivedOperation(
        _ key: LongLivedOperationKey, lease: LongLivedLease, at now: Wire.Timestamp
    ) async throws -> LongLivedOperationRecord? {
        try await base.takeOverLongLivedOperation(key, lease: lease, at: now)
    }

    func renewLongLivedLeases(_ keys: [LongLivedOperationKey], lease: LongLivedLease) async throws -> Set<LongLivedOperationKey> {
        try await base.renewLongLivedLeases(keys, lease: lease)
    }

    func releaseLongLivedOperation(_ key: LongLivedOperationKey, node: String) async throws -> Bool {
        try await base.releaseLongLivedOperation(key, node: node)
    }

    func unheldLongLivedOperations(at now: Wire.Timestamp, limit: Int) async throws -> [LongLivedOperationKey] {
        try await base.unheldLongLivedOperations(at: now, limit: limit)
    }

    func longLivedOperationIDs(owner: String, container: String, completedSince cutoff: Wire.Timestamp) async throws
        -> [String]
    {
        try await base.longLivedOperationIDs(owner: owner, container: container, completedSince: cutoff)
    }

    func longLivedOperation(_ key: LongLivedOperationKey) async throws -> LongLivedOperationRecord? {
        try await base.longLivedOperation(key)
    }

    func longLivedEncodedEvents(
        _ key: LongLivedOperationKey, after seq: UInt64, limit: Int
    ) async throws -> [Wire.EncodedEvent] {
        try await base.longLivedEncodedEvents(key, after: seq, limit: limit)
    }

    func acknowledgeLongLivedOperation(_ key: LongLivedOperationKey) async throws -> Bool {
        try await base.acknowledgeLongLivedOperation(key)
    }

    func removeLongLivedOperation(_ key: LongLivedOperationKey) async throws {
        try await base.removeLongLivedOperation(key)
    }

    func pruneLongLivedOperations(completedBefore cutoff: Wire.Timestamp) async throws -> Int {
        try await base.pruneLongLivedOperations(completedBefore: cutoff)
    }

    func unfinishedLongLivedOperations() async throws -> [LongLivedOperationRecord] {
        try await base.unfinishedLongLivedOperations()
    }

    func requestLongLivedCancellation(_ key: LongLivedOperationKey) async throws -> Bool {
        try await base.requestLongLivedCancellation(key)
    }

    func longLivedCancellationsRequested(among keys: [LongLivedOperationKey]) async throws -> Set<LongLivedOperationKey> {
        try await base.longLivedCancellationsRequested(among: keys)
    }

    func observeLongLivedOperations(_ observer: @escaping @Sendable (LongLivedOperationSignal) -> Void) {
        base.observeLongLivedOperations(observer)
    }
}
