import CirrusStore
import CirrusWire

/// Following: the streams that attach to a long-lived operation (its `Open` stream, then any
/// `Resume`), on the node that runs it or, through the journal, on any other.
extension LongLivedOperations {
    /// Attaches a follower to the caller's operation `operationID`, which then gets what comes
    /// after `lastSeq`; refused with `operationAlreadyAttached` while another stream of this
    /// node follows it. The follower calls `run.release(attachment)` when it stops
    /// (``follow(_:attachment:after:stream:)`` does).
    ///
    /// The refusal is this node's, not the cluster's, on purpose. It keeps one client from
    /// racing itself: after a network cut the client resumes while the node still holds its old
    /// stream (until the keepalive notices), and two streams would otherwise take turns at one
    /// run's memory. Across nodes nothing of that can happen: a stream on another node reads
    /// the journal, the source of truth, in seq order, so each stream gets every event once, in
    /// order, and the operation runs once (its lease) however many follow it. Refusing across
    /// nodes would take an attachment lease in the database, renewed by each node's heartbeat,
    /// and a node that died would keep its streams' attachments until those expired: a client
    /// failing over to another node — what several nodes are for — would be refused for up to
    /// a lease (8 s) plus its retry backoff, where it now resumes at once. What two streams on
    /// two nodes can do to each other is what two successive streams can on one node: the first
    /// to acknowledge the `Complete` drops the operation (the other ends with
    /// `unknownOperation` unless it had read the `Complete`), and a `Cancel` on either cancels it.
    func attach(
        operationID: String, caller: ClientIdentity, after lastSeq: UInt64
    ) async -> Result<(run: LongLivedRun, attachment: UInt64), Refusal> {
        let key = LongLivedOperationKey(owner: caller.userRecordName, operationID: operationID)
        let run: LongLivedRun
        // Taken under the lock that records the follower of an operation run elsewhere.
        var journalAttachment: UInt64?
        // An operation registered on a connection that has not sent its `Persisted` yet: its
        // client resumes it because an `Open` it repeated elsewhere was refused as a duplicate
        // (the first connection dropped). It starts now, so that connection does not drop it.
        let (running, registering, followed) = state.withLock { state -> (LongLivedRun?, Bool, Bool) in
            if state.registering[key] != nil { return (nil, true, false) }
            if state.following[key]?.isFollowed == true { return (nil, false, true) }
            if let pending = state.pending[key] { self.start(pending, in: &state) }
            return (state.runs[key].flatMap { $0.isCancelled ? nil : $0.run }, false, false)
        }
        if registering {
            return .failure(
                Refusal(.operationAlreadyAttached, "operation \(operationID) is being registered; resume it once it is"))
        }
        if followed {
            return .failure(Self.attached(operationID))
        }
        if let running {
            run = running
        } else {
            switch await listedRecord(key) {
            case .failure(let error): return .failure(error)
            case .success(let record):
                run = LongLivedRun(record: record, caller: caller, journal: journal)
                if !record.isCompleted {
                    // Another node runs it (or none does until a sweep takes it over): its
                    // followers here read the journal. One stream per node follows it.
                    run.followJournal(every: leasing.journalPollInterval)
                    journalAttachment = state.withLock { state -> UInt64? in
                        if state.following[key]?.isFollowed == true { return nil }
                        state.following[key] = run
                        return run.attach()
                    }
                    if journalAttachment == nil { return .failure(Self.attached(operationID)) }
                }
            }
        }
        guard await mayFollow(run.open, key: key, caller: caller) else {
            if let journalAttachment { run.release(journalAttachment) }
            return .failure(Self.unknown(operationID))
        }
        guard lastSeq <= run.lastSeq else {
            if let journalAttachment { run.release(journalAttachment) }
            return .failure(
                Refusal(.invalidArguments, "operation \(operationID) has \(run.lastSeq) events; the client claims \(lastSeq)"))
        }
        guard let attachment = journalAttachment ?? run.attach() else {
            return .failure(Self.attached(operationID))
        }
        return .success((run, attachment))
    }

    /// The refusal of a `Resume` while another stream (of this node) follows the operation.
    static func attached(_ operationID: String) -> Refusal {
        Refusal(
            .operationAlreadyAttached,
            "operation \(operationID) is followed by another stream; resume it once that stream has ended")
    }

    /// The refusal of an operation the caller has not (or may no longer follow): one answer
    /// for both, so it reveals nothing.
    static func unknown(_ operationID: String) -> Refusal {
        Refusal(.unknownOperation, "no long-lived operation \(operationID)")
    }

    /// Whether the caller may still follow `open` (the executor re-checks their access, e.g.
    /// to a share they were removed from since); a journal that cannot be read says no.
    func mayFollow(_ open: Wire.Open, key: LongLivedOperationKey, caller: ClientIdentity) async -> Bool {
        do {
            return try await executor.mayFollow(open, caller: caller) {
                var payloads: [Wire.Event.Payload] = []
                var seq: UInt64 = 0
                while true {
                    let page = try await self.journal.longLivedEvents(key, after: seq, limit: 1_000)
                    guard let last = page.last else { return payloads }
                    payloads += page.compactMap(\.payload)
                    seq = last.seq
                }
            }
        } catch {
            logger.error("could not check access to long-lived operation \(key): \(error)")
            return false
        }
    }

    /// The operation's record if the caller may see it: known, not past retention.
    func listedRecord(_ key: LongLivedOperationKey) async -> Result<LongLivedOperationRecord, Refusal> {
        let unknown = Self.unknown(key.operationID)
        let record: LongLivedOperationRecord?
        do {
            record = try await journal.longLivedOperation(key)
        } catch let error as StoreError where error.code == .unavailable {
            return .failure(Refusal(error: error.operationError))
        } catch {
            logger.error("could not read long-lived operation \(key): \(error)")
            return .failure(Refusal(.internalError, "could not read the operation"))
        }
        guard let record else { return .failure(unknown) }
        let cutoff = retentionCutoff()
        if let completed = record.completionDate, (completed.seconds, completed.nanos) < (cutoff.seconds, cutoff.nanos) {
            return .failure(unknown)
        }
        return .success(record)
    }

    func retentionCutoff() -> Wire.Timestamp {
        let now = clock()
        return Wire.Timestamp(seconds: now.seconds - retentionSeconds, nanos: now.nanos)
    }

    /// Events a follower reads from the journal at once. While it sends a full page it reads
    /// the next one, so a replay from an early seq never waits for the journal between pages; a
    /// follower holds at most two pages.
    static let replayPageSize = 512

    /// Sends what the operation journals after `lastSeq` to `stream`, at the client's pace,
    /// then its `Complete`. Returns quietly when the stream ends or another attaches.
    static func follow(_ run: LongLivedRun, attachment: UInt64, after lastSeq: UInt64, stream: OperationStream) async {
        defer { run.release(attachment) }
        var seq = lastSeq
        // The page after the one being sent, read meanwhile.
        var prefetched: Task<LongLivedRun.Next, any Error>?
        defer { prefetched?.cancel() }
        do {
            while true {
                let next: LongLivedRun.Next
                if let pending = prefetched {
                    prefetched = nil
                    next = try await withTaskCancellationHandler {
                        try await pending.value
                    } onCancel: {
                        pending.cancel()
                    }
                } else {
                    next = try await run.next(after: seq, attachment: attachment, limit: Self.replayPageSize)
                }
                switch next {
                case .events(let events):
                    guard run.isAttached(attachment) else { return }
                    let payloads = events.prefix { $0.payload != nil }.compactMap(\.payload)
                    if payloads.count == events.count, events.count == Self.replayPageSize, let last = events.last?.seq {
                        prefetched = Task {
                            try await run.next(after: last, attachment: attachment, limit: Self.replayPageSize)
                        }
                    }
                    try await stream.emit(contentsOf: payloads)
                    guard payloads.count == events.count else {
                        let broken = events[payloads.count].seq
                        stream.complete(.failure(.internalError, "journaled event \(broken) has no payload"))
                        return
                    }
                    seq = events.last?.seq ?? seq
                case .encoded(let events):
                    guard run.isAttached(attachment) else { return }
                    if events.count == Self.replayPageSize, let last = events.last?.seq {
                        prefetched = Task {
                            try await run.next(after: last, attachment: attachment, limit: Self.replayPageSize)
                        }
                    }
                    try await stream.emit(encoded: events)
                    seq = events.last?.seq ?? seq
                case .complete(let complete):
                    stream.complete(OperationCompletion(result: complete.result, error: complete.error))
                    return
                case .superseded:
                    return
                }
            }
        } catch is CancellationError {
            return
        } catch let error as StoreError where error.code == .unavailable {
            stream.complete(OperationCompletion(error: error.operationError))
        } catch {
            stream.complete(.failure(.internalError, "could not read the operation's journal"))
        }
    }
}
