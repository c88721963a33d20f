import CirrusStore
import CirrusWire
import Synchronization

/// One long-lived operation in memory: the runner journals its events through it, and the
/// streams following it (the `Open` stream, then any `Resume`) read them back.
///
/// The runner publishes an event only after the journal committed it, so every seq up to
/// ``lastSeq`` is readable from the journal. A follower asks for the events after the last
/// seq it sent: those at or below `lastSeq` come from a small in-memory tail or from the
/// journal, later ones are waited for. One question, one answer under one lock: nothing is
/// skipped or repeated between replay and live, and a follower only ever holds the events it
/// is sending, at its client's pace.
///
/// On a node that does not run the operation (another node holds its lease, or this node lost
/// it), the run follows the journal instead (``followJournal(every:)``): with no event to send,
/// a follower reads the operation's row again as soon as the node running it signals a change
/// (``journalChanged()``) or, should that signal be lost, after an interval, and the events it
/// finds there once they are committed, until the `Complete`.
final class LongLivedRun: Sendable {
    let key: LongLivedOperationKey
    let open: Wire.Open
    /// Its saves' fields as the journal encoded them when it registered `open` here (none for
    /// a run read back from the journal): the writer reuses them rather than encode them
    /// again. They take about what the saves' fields take, and only while `open` is held too.
    let fieldEncodings: RecordFieldEncodings
    let caller: ClientIdentity
    let journal: any OperationJournal
    /// The node journaling it (fenced by its lease); nil when this run only follows.
    let node: String?
    /// Where the executor continues after a restart; nil for a fresh run.
    let checkpoint: LongLivedCheckpoint?
    /// Item errors already journaled before a restart, for the final `partialFailure`.
    let priorErrors: [Wire.ItemError]
    private let state: Mutex<State>

    /// Events kept in memory for followers that are (nearly) live.
    static let tailCapacity = 256

    private struct State {
        var lastSeq: UInt64
        var tail: [Wire.Event] = []
        var complete: Wire.Complete?
        var waiters: [UInt64: CheckedContinuation<Void, any Error>] = [:]
        var nextWaiter: UInt64 = 0
        /// Bumped by every attach: a follower of an older attachment stops.
        var attachment: UInt64 = 0
        /// The attachment of the stream following the operation now; nil when none does.
        var follower: UInt64?
        /// Set when the operation is not run here: followers poll the journal this often.
        var journalInterval: Duration?
        /// How many times another node's signal said the journal changed (``journalChanged()``).
        var signals: UInt64 = 0
        /// ``signals`` when a follower last read the operation's row: a signal after it wakes
        /// the next poll at once (none is missed between that read and the next wait).
        var signalsAtRead: UInt64 = 0
        /// The timed waits under way (``pause(for:since:)``), and whether their time ran out.
        var pauses: [UInt64: Bool] = [:]

        mutating func takeWaiters() -> [CheckedContinuation<Void, any Error>] {
            defer { waiters.removeAll() }
            return Array(waiters.values)
        }
    }

    /// What a follower gets next.
    enum Next: Sendable {
        /// Events still in memory (the tail of a running operation).
        case events([Wire.Event])
        /// Events read from the journal, in wire format as stored.
        case encoded([Wire.EncodedEvent])
        case complete(Wire.Complete)
        /// Another stream attached; this follower stops.
        case superseded
    }

    init(
        record: LongLivedOperationRecord, caller: ClientIdentity, journal: any OperationJournal,
        node: String? = nil, priorErrors: [Wire.ItemError] = []
    ) {
        self.key = record.key
        self.open = record.open
        self.fieldEncodings = record.fieldEncodings
        self.caller = caller
        self.journal = journal
        self.node = node
        self.checkpoint = LongLivedCheckpoint.decode(record.checkpoint)
        self.priorErrors = priorErrors
        self.state = Mutex(State(lastSeq: record.lastSeq, complete: record.complete))
    }

    var lastSeq: UInt64 { state.withLock { $0.lastSeq } }
    var isCompleted: Bool { state.withLock { $0.complete != nil } }

    // MARK: - The runner

    /// Journals `payloads` (with `checkpoint`, in one transaction), then publishes them.
    @discardableResult
    func journal(_ payloads: [Wire.Event.Payload], checkpoint: LongLivedCheckpoint?) async throws -> [Wire.Event] {
        let events = try await journal.appendLongLivedEvents(payloads, to: key, checkpoint: checkpoint?.encoded(), by: node)
        publish(events)
        return events
    }

    /// Journals one modify-records chunk: its writes and its events commit together.
    func modifyRecords(
        _ modification: RecordModification, in database: DatabaseKey,
        events: @escaping @Sendable (RecordModificationResult) -> [Wire.Event.Payload],
        checkpoint: LongLivedCheckpoint
    ) async throws -> [Wire.Event] {
        let bytes = checkpoint.encoded()
        let journaling = ModificationJournaling(operation: key, events: events, checkpoint: { _ in bytes }, node: node)
        let (_, journaled) = try await journal.modifyRecords(
            modification, in: database, by: caller.userRecordName, journaling: journaling)
        publish(journaled)
        return journaled
    }

    /// Makes committed events visible to followers.
    func publish(_ events: [Wire.Event]) {
        guard let last = events.last else { return }
        let waiters = state.withLock { state in
            state.lastSeq = last.seq
            // The tail is gap-free: events that do not follow it (only a journal shared with
            // another node could number them so) start it again.
            if let end = state.tail.last?.seq, events.first?.seq != end + 1 { state.tail.removeAll() }
            state.tail.append(contentsOf: events)
            if state.tail.count > 2 * Self.tailCapacity {
                state.tail.removeFirst(state.tail.count - Self.tailCapacity)
            }
            return state.takeWaiters()
        }
        for waiter in waiters { waiter.resume() }
    }

    /// The operation ended with `complete` (already journaled, or it could not be).
    func finish(_ complete: Wire.Complete) {
        let waiters = state.withLock { state in
            state.complete = complete
            return state.takeWaiters()
        }
        for waiter in waiters { waiter.resume() }
    }

    /// The operation is not (or no longer) run here: followers read what comes next from the
    /// journal, looking again every `interval` while nothing new is there.
    func followJournal(every interval: Duration) {
        let waiters = state.withLock { state in
            state.journalInterval = interval
            return state.takeWaiters()
        }
        for waiter in waiters { waiter.resume() }
    }

    var followsJournal: Bool { state.withLock { $0.journalInterval != nil } }

    /// Another node journaled events for the operation, completed it or dropped it (its
    /// signal, ``LongLivedOperationSignal/journaled(_:lastSeq:)``): followers waiting for the
    /// journal's next poll read it now.
    func journalChanged() {
        let waiters = state.withLock { state in
            state.signals &+= 1
            return state.takeWaiters()
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Whether a stream follows the operation now.
    var isFollowed: Bool { state.withLock { $0.follower != nil } }

    // MARK: - Followers

    /// Starts a new attachment, or nil while another stream follows the operation (until that
    /// follower calls ``release(_:)``: its stream ended or its connection closed).
    func attach() -> UInt64? {
        state.withLock { state -> UInt64? in
            guard state.follower == nil else { return nil }
            state.attachment += 1
            state.follower = state.attachment
            return state.attachment
        }
    }

    /// The follower of `attachment` stopped following; another stream may attach.
    func release(_ attachment: UInt64) {
        state.withLock { state in
            if state.follower == attachment {
                state.follower = nil
            }
        }
    }

    func isAttached(_ attachment: UInt64) -> Bool {
        state.withLock { $0.attachment == attachment }
    }

    private enum Step {
        case answer(Next)
        case read(upTo: UInt64)
        case wait
        /// Read the journal after `Duration`, or at once when a signal came since `UInt64`.
        case poll(Duration, signals: UInt64)
    }

    /// The events after `seq` (at most `limit`), waiting for the runner when there are none yet;
    /// the `Complete` once every event was had.
    ///
    /// - throws: `CancellationError` when the follower's task is cancelled; the journal's error.
    func next(after seq: UInt64, attachment: UInt64, limit: Int) async throws -> Next {
        while true {
            let step = state.withLock { state -> Step in
                guard state.attachment == attachment else { return .answer(.superseded) }
                if seq < state.lastSeq {
                    // The tail holds what this node published; events other nodes journaled
                    // after it (the run follows the journal) are read from the journal.
                    if let first = state.tail.first?.seq, first <= seq + 1, let last = state.tail.last?.seq, last > seq {
                        let start = Int(seq + 1 - first)
                        return .answer(.events(Array(state.tail[start..<min(state.tail.count, start + limit)])))
                    }
                    return .read(upTo: state.lastSeq)
                }
                if let complete = state.complete { return .answer(.complete(complete)) }
                if let interval = state.journalInterval { return .poll(interval, signals: state.signalsAtRead) }
                return .wait
            }
            switch step {
            case .answer(let next):
                return next
            case .read(let last):
                let count = Int(clamping: min(UInt64(limit), last - seq))
                let events = try await journal.longLivedEncodedEvents(key, after: seq, limit: count)
                guard events.first?.seq == seq + 1 else {
                    throw StoreError(.corruptData, "the journal of \(key) has no event \(seq + 1)")
                }
                return .encoded(events)
            case .wait:
                try await wait(after: seq, attachment: attachment)
            case .poll(let interval, let signals):
                try await pause(for: interval, since: signals)
                state.withLock { $0.signalsAtRead = $0.signals }
                try await refresh(after: seq)
            }
        }
    }

    /// Reads the operation's row again: its last seq, and its `Complete` once it has one. An
    /// operation gone from the journal (cancelled, or acknowledged elsewhere) ends the follower
    /// with `unknownOperation` after what it was sent.
    private func refresh(after seq: UInt64) async throws {
        let record = try await journal.longLivedOperation(key)
        let waiters = state.withLock { state -> [CheckedContinuation<Void, any Error>] in
            guard let record else {
                if state.complete == nil {
                    state.complete = Wire.Complete(
                        lastSeq: max(seq, state.lastSeq),
                        error: Wire.OperationError(
                            code: .unknownOperation, message: "operation \(key.operationID) no longer exists"))
                }
                return state.takeWaiters()
            }
            guard record.lastSeq > state.lastSeq || (record.complete != nil && state.complete == nil) else { return [] }
            state.lastSeq = max(state.lastSeq, record.lastSeq)
            if let complete = record.complete, state.complete == nil { state.complete = complete }
            return state.takeWaiters()
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Waits `interval`, or less when a signal comes (``journalChanged()``) or came since `signals`.
    ///
    /// - throws: `CancellationError` when the follower's task is cancelled.
    private func pause(for interval: Duration, since signals: UInt64) async throws {
        let id = state.withLock { state in
            state.nextWaiter += 1
            state.pauses[state.nextWaiter] = false
            return state.nextWaiter
        }
        let timer = Task {
            try await Task.sleep(for: interval)
            let waiter = self.state.withLock { state -> CheckedContinuation<Void, any Error>? in
                guard state.pauses[id] != nil else { return nil }
                state.pauses[id] = true
                return state.waiters.removeValue(forKey: id)
            }
            waiter?.resume()
        }
        defer {
            timer.cancel()
            state.withLock { $0.pauses[id] = nil }
        }
        try await suspend(as: id) { $0.signals != signals || $0.pauses[id] == true }
    }

    private func wait(after seq: UInt64, attachment: UInt64) async throws {
        let id = state.withLock { state in
            state.nextWaiter += 1
            return state.nextWaiter
        }
        try await suspend(as: id) {
            $0.lastSeq > seq || $0.complete != nil || $0.attachment != attachment || $0.journalInterval != nil
        }
    }

    /// Waits as waiter `id` (resumed by whoever takes the waiters) unless `isReady` holds when
    /// the wait starts.
    ///
    /// - throws: `CancellationError` when the waiting task is cancelled.
    private func suspend(as id: UInt64, unless isReady: (State) -> Bool) async throws {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let ready = state.withLock { state -> Bool in
                    if Task.isCancelled || isReady(state) { return true }
                    state.waiters[id] = continuation
                    return false
                }
                if ready { continuation.resume() }
            }
        } onCancel: {
            let waiter = state.withLock { $0.waiters.removeValue(forKey: id) }
            waiter?.resume(throwing: CancellationError())
        }
        try Task.checkCancellation()
    }
}
