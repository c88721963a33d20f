public import CirrusWire

/// What every engine's ``OperationJournal`` shares: its errors, how appended events are
/// numbered, how a stored row becomes an event, an `Open` or a `Complete` again, and how its
/// times are kept (nanoseconds since 1970, so a date reads back exactly as it was given).
///
/// For example:
/// ```swift
/// let events = OperationJournalRules.events(payloads, after: lastSeq)
/// // … store each event's serialized bytes under its seq, then the new last seq …
/// ```
public enum OperationJournalRules {
    /// The error of registering `key` again.
    public static func duplicate(_ key: LongLivedOperationKey) -> StoreError {
        StoreError(.duplicateOperation, "operation \(key.operationID) is already registered")
    }

    /// The error of appending to, or completing, an operation that is not registered or
    /// already completed.
    public static func notRunning(_ key: LongLivedOperationKey) -> StoreError {
        StoreError(.unknownOperation, "operation \(key.operationID) is not running")
    }

    /// The error of appending to, or completing, an operation that another node holds now.
    public static func leaseLost(_ key: LongLivedOperationKey, node: String) -> StoreError {
        StoreError(.leaseLost, "operation \(key.operationID) is no longer held by node \(node)")
    }

    /// Checks that `node` may append to (or complete) an operation held by `holder` (the
    /// stored lease's node; nil when none holds it): the holder may, whether or not its
    /// lease expired, as long as no other node took the operation over; a nil `node` (one
    /// process, tools) appends whoever holds it. Called inside the append's transaction.
    ///
    /// - throws: ``StoreError`` `.leaseLost` when `node` is not the holder.
    public static func checkHolder(_ holder: String?, appending node: String?, to key: LongLivedOperationKey) throws(StoreError) {
        guard let node, holder != node else { return }
        throw leaseLost(key, node: node)
    }

    /// Whether `node` may take over an operation whose stored lease is `lease` at `now`: when
    /// none holds it, it holds it already (a node restarted with the same ID), or the lease
    /// expired before `now`. Both engines decide a takeover with it, on the operation's row
    /// read under the takeover's lock; their lists of operations to take over
    /// (``OperationJournal/unheldLongLivedOperations(at:limit:)``) state it in SQL.
    public static func mayTakeOver(_ lease: LongLivedLease?, by node: String, at now: Wire.Timestamp) -> Bool {
        guard let lease else { return true }
        return lease.node == node || nanoseconds(lease.expiry) < nanoseconds(now)
    }

    /// The `Complete` of an operation its client cancelled, after its last event `lastSeq`: what
    /// a cancel on the node running it journals, and what the journal stores instead of any
    /// other completion once a cancellation was requested.
    public static func cancelled(lastSeq: UInt64) -> Wire.Complete {
        Wire.Complete(
            lastSeq: lastSeq, error: Wire.OperationError(code: .operationCancelled, message: "the operation was cancelled"))
    }

    /// The `Complete` to store for an operation completed with `complete`: the cancelled one when
    /// `cancelRequested`, and in either case with `last_seq` set to the journal's `lastSeq`.
    public static func completion(_ complete: Wire.Complete, lastSeq: UInt64, cancelRequested: Bool) -> Wire.Complete {
        guard !cancelRequested else { return cancelled(lastSeq: lastSeq) }
        var complete = complete
        complete.lastSeq = lastSeq
        return complete
    }

    /// A stored lease (its node and expiry columns) as a lease; nil when either is absent.
    public static func lease(node: String?, expiryNanoseconds: Int64?) -> LongLivedLease? {
        guard let node, let expiryNanoseconds else { return nil }
        return LongLivedLease(node: node, expiry: timestamp(nanoseconds: expiryNanoseconds))
    }

    /// `payloads` as the events the journal stores after its last seq `lastSeq`: seqs
    /// `lastSeq + 1`, `lastSeq + 2` … in order, with no gap.
    public static func events(_ payloads: [Wire.Event.Payload], after lastSeq: UInt64) -> [Wire.Event] {
        payloads.enumerated().map { offset, payload in
            Wire.Event(seq: lastSeq + UInt64(offset) + 1, payload: payload)
        }
    }

    /// A stored event row (its seq column and its bytes) as an encoded event.
    ///
    /// - throws: ``StoreError`` `.corruptData` when the bytes are not an `Event` with that seq.
    public static func encodedEvent(seq: Int64, bytes: [UInt8]) throws(StoreError) -> Wire.EncodedEvent {
        do {
            return try Wire.EncodedEvent(seq: UInt64(clamping: seq), bytes: bytes)
        } catch {
            throw StoreError(.corruptData, "stored journaled event \(seq) is not an event: \(error)")
        }
    }

    /// A stored `Open` or `Complete`.
    ///
    /// - throws: ``StoreError`` `.corruptData` when `bytes` do not decode.
    public static func decode<M: WireMessage>(_ type: M.Type, _ bytes: [UInt8], what: String) throws(StoreError) -> M {
        do {
            return try M(serializedBytes: bytes)
        } catch {
            throw StoreError(.corruptData, "stored \(what) does not decode: \(error)")
        }
    }

    /// `timestamp` in nanoseconds since 1970, clamped to what 64 bits hold.
    public static func nanoseconds(_ timestamp: Wire.Timestamp) -> Int64 {
        let (seconds, overflow) = timestamp.seconds.multipliedReportingOverflow(by: 1_000_000_000)
        if overflow { return timestamp.seconds < 0 ? .min : .max }
        return seconds.addingReportingOverflow(Int64(timestamp.nanos)).partialValue
    }

    /// The timestamp `nanoseconds` since 1970 names (the inverse of ``nanoseconds(_:)``).
    public static func timestamp(nanoseconds: Int64) -> Wire.Timestamp {
        var seconds = nanoseconds / 1_000_000_000
        var nanos = nanoseconds % 1_000_000_000
        if nanos < 0 {
            nanos += 1_000_000_000
            seconds -= 1
        }
        return Wire.Timestamp(seconds: seconds, nanos: Int32(nanos))
    }
}
