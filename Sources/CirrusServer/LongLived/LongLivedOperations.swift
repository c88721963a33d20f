import CirrusStore
import CirrusWire
import Logging
import Synchronization

/// The server's long-lived operations (`configuration.isLongLived`): registers each durably
/// before `Persisted`, runs it on a task of its own that no connection owns, journals every
/// event, and lets any stream of the same user follow it by operation ID.
///
/// - An `Open` marked long-lived is registered, answered `Persisted`, and run detached; its
///   stream is its first follower. If the client cancels with `detach` or disconnects, the
///   run goes on journaling.
/// - `Resume` attaches a new follower: the journal after the client's last seq, then live
///   events, then `Complete`. One stream follows an operation at a time: a `Resume` while
///   another stream follows it is refused with `OPERATION_ALREADY_ATTACHED` (as `Resume` in
///   frame.proto says) and may be retried once that stream ended; the operation never runs
///   twice.
/// - A plain `Cancel` cancels it for good (a `Complete` with `operationCancelled` is journaled
///   for whoever follows, and it is no longer listed); `completion_acknowledged` after the
///   `Complete` drops it and its journal.
/// - ``resumeUnfinished()`` continues, after a restart, what was running: each executor
///   starts after its last journaled event (see ``LongLivedCheckpoint``).
///
/// Several nodes (`cirrusd` processes on one PostgreSQL database) share the journal. Each
/// running operation is held by the node that runs it through a lease (``Leasing``):
///
/// - The node registers the operation with a lease of ``Leasing/leaseDuration`` (8 s by
///   default) and renews the leases of its runs every ``Leasing/heartbeatInterval`` (2 s).
/// - Every ``Leasing/sweepInterval`` (1 s) each node looks for running operations that no node
///   holds (a lease that expired, or one released by a node that stopped) and takes them over,
///   one node per operation. It continues each exactly after its last journaled event, from the
///   checkpoint stored with that event, as after a restart. So when a node dies (SIGKILL, power
///   loss), its operations continue on another node within ``Leasing/takeoverBound``: the lease
///   plus one sweep, 9 s by default, plus however far the nodes' clocks disagree (leases are
///   written and compared in the nodes' wall-clock time). A node that stops gracefully
///   (``shutdown()``) releases its leases, so another takes over at its next sweep.
/// - The journal fences: an append, a journaled modify or a completion by a node that no longer
///   holds the operation fails in its own transaction. A node paused past its lease (a long GC
///   pause, a stopped VM) that wakes up after another took over cannot add an event or a record;
///   its run stops, and the streams following it there go on reading the journal. Clock skew or a
///   late heartbeat can therefore cost time, never a duplicated or lost event.
/// - `Resume` works on every node. Where the operation runs, the follower reads the run's
///   memory; elsewhere it reads the journal after the client's seq, then reads it again as soon
///   as the running node signals new events (``OperationJournal/observeLongLivedOperations(_:)``:
///   a PostgreSQL `NOTIFY` per append, heard by every node), and at the latest every
///   ``Leasing/journalPollInterval`` (1 s) should a signal be lost, to `Complete`.
/// - A plain `Cancel` on any node reaches the operation wherever it runs: it is marked in the
///   journal (so it outlives the nodes involved) and signalled; the running node stops the run
///   at once, or at its next heartbeat should the signal be lost, and a node that takes the
///   operation over completes it as cancelled. Either way it ends as a local cancel does: a
///   `Complete` with `operationCancelled`, then it is no longer listed.
/// - `OPERATION_ALREADY_ATTACHED` is kept per node: two streams on one node never follow the
///   same operation at once, but streams on two nodes may (each gets every event in order,
///   from the journal). Deliberately: see ``attach(operationID:caller:after:)``.
///
/// For example:
/// ```swift
/// let executor = StorageExecutor(storage: storage)
/// let longLived = LongLivedOperations(journal: storage, executor: executor)
/// try await longLived.resumeUnfinished()
/// configuration.executor = executor
/// configuration.longLivedOperations = longLived
/// ```
public final class LongLivedOperations: Sendable {
    /// Completed operations stay listed 24 hours unless configured otherwise (as CloudKit).
    public static let defaultRetentionSeconds: Int64 = 86_400

    /// Long-lived operations one user may have running at once: they hold no stream, so the
    /// connection's stream limit does not bound them.
    public static let maximumRunningPerUser = 64

    let journal: any OperationJournal
    let executor: any OperationExecutor
    /// Seconds a completed, unacknowledged operation stays listed and resumable.
    public let retentionSeconds: Int64
    let clock: @Sendable () -> Wire.Timestamp
    let logger: Logger
    /// Runs between the durable registration and `Persisted` (tests hold it to disconnect there).
    let afterRegistration: @Sendable (LongLivedOperationKey) async -> Void
    /// This node's ID and lease timings.
    public let leasing: Leasing
    let state = Mutex(State())

    struct Entry {
        let run: LongLivedRun
        var task: Task<Void, Never>?
        /// Cancelled by its client: dropped once its cancellation is journaled.
        var isCancelled = false
        /// Another node took it over: it stops without journaling anything more.
        var isLost = false
    }

    struct State {
        var runs: [LongLivedOperationKey: Entry] = [:]
        /// Operations other nodes run that streams of this node follow through the journal.
        var following: [LongLivedOperationKey: LongLivedRun] = [:]
        /// The heartbeat and the sweep (``startLeasing()``).
        var leasing: Task<Void, Never>?
        /// Registered, `Persisted` not yet sent: the registering stream starts the run once its
        /// client has `Persisted`, or drops the registration when that client is gone — unless
        /// a `Resume` claimed the operation meanwhile (``attach(operationID:caller:after:)``).
        var pending: [LongLivedOperationKey: LongLivedRun] = [:]
        /// Being registered now, with how many registrations of the key are under way: a
        /// `Resume` waits (is refused as attached and tries again) until they are pending or failed.
        var registering: [LongLivedOperationKey: Int] = [:]

        mutating func registered(_ key: LongLivedOperationKey) {
            if let count = registering[key], count > 1 { registering[key] = count - 1 } else { registering[key] = nil }
        }
        var isShuttingDown = false
    }

    /// - parameter clock: registration, completion and retention times, and lease expiries;
    ///   the wall clock unless a test injects one.
    /// - parameter leasing: this node's ID (random unless configured) and lease timings.
    public convenience init(
        journal: any OperationJournal,
        executor: any OperationExecutor,
        retentionSeconds: Int64 = LongLivedOperations.defaultRetentionSeconds,
        clock: @escaping @Sendable () -> Wire.Timestamp = SQLiteStorage.systemClock,
        leasing: Leasing = Leasing(),
        logger: Logger = Logger(label: "cirrusd.long-lived")
    ) {
        self.init(
            journal: journal, executor: executor, retentionSeconds: retentionSeconds, clock: clock, leasing: leasing,
            logger: logger, afterRegistration: { _ in })
    }

    init(
        journal: any OperationJournal,
        executor: any OperationExecutor,
        retentionSeconds: Int64,
        clock: @escaping @Sendable () -> Wire.Timestamp,
        leasing: Leasing = Leasing(),
        logger: Logger,
        afterRegistration: @escaping @Sendable (LongLivedOperationKey) async -> Void
    ) {
        self.journal = journal
        self.executor = executor
        self.retentionSeconds = retentionSeconds
        self.clock = clock
        self.leasing = leasing
        self.logger = logger
        self.afterRegistration = afterRegistration
        let registry = WeakRegistry(self)
        journal.observeLongLivedOperations { signal in registry.registry?.heard(signal) }
    }

    /// Operations running now in this process.
    public var runningCount: Int { state.withLock { $0.runs.count } }

    /// Continues every operation that was running when the server last stopped and that no
    /// other node holds (see ``Leasing``), then starts this node's heartbeat and sweep; call
    /// once, before serving. Returns how many it continued.
    ///
    /// - throws: ``StoreError`` when the registry cannot be read.
    @discardableResult
    public func resumeUnfinished() async throws -> Int {
        let records = try await journal.unfinishedLongLivedOperations()
        let now = clock()
        var continued = 0
        for record in records where OperationJournalRules.mayTakeOver(record.lease, by: leasing.nodeID, at: now) {
            if try await takeOver(record.key) { continued += 1 }
        }
        startLeasing()
        return continued
    }

    /// Continues the running operation `record` here: its executor starts after its last
    /// journaled event, with the item errors journaled so far for its final `partialFailure`.
    /// `record` is as this node took it over (it holds its lease).
    ///
    /// - throws: ``StoreError`` when its journal cannot be read.
    func continueRun(_ record: LongLivedOperationRecord) async throws {
        if record.cancelRequested {
            // Its client cancelled it (on any node) before it finished: it completes as cancelled.
            let run = LongLivedRun(
                record: record, caller: ClientIdentity(userRecordName: record.key.owner), journal: journal,
                node: leasing.nodeID)
            logger.info("completing cancelled long-lived operation \(record.key) after seq \(record.lastSeq)")
            state.withLock { state in self.start(run, in: &state, cancelled: true) }
            return
        }
        var errors: [Wire.ItemError] = []
        var seq: UInt64 = 0
        while seq < record.lastSeq {
            let page = try await journal.longLivedEvents(record.key, after: seq, limit: 1_000)
            guard let last = page.last else { break }
            errors += page.compactMap { $0.payload.flatMap(LongLivedCheckpoint.itemError) }
            seq = last.seq
        }
        let run = LongLivedRun(
            record: record, caller: ClientIdentity(userRecordName: record.key.owner), journal: journal,
            node: leasing.nodeID, priorErrors: errors)
        logger.info("continuing long-lived operation \(record.key) after seq \(record.lastSeq)")
        start(run)
    }

    /// Stops every run where it stands, without completing it, and releases their leases: the
    /// next start, or another node's sweep, continues them.
    public func shutdown() async {
        await shutdown(releasingLeases: true)
    }

    /// ``shutdown()``; without `releasingLeases` the leases stay until they expire, as when
    /// the process dies (tests use it to play a node's death).
    func shutdown(releasingLeases: Bool) async {
        let leasingTask = state.withLock { state in
            state.isShuttingDown = true
            return state.leasing
        }
        // First the heartbeat and the sweep: a takeover under way adds its run before the
        // runs are collected.
        leasingTask?.cancel()
        await leasingTask?.value
        let (tasks, keys) = state.withLock { state in
            let running = state.runs.filter { !$0.value.isCancelled && !$0.value.isLost }
            return (state.runs.values.compactMap(\.task), Array(running.keys) + Array(state.pending.keys))
        }
        for task in tasks { task.cancel() }
        for task in tasks { await task.value }
        guard releasingLeases else { return }
        for key in keys {
            do {
                try await journal.releaseLongLivedOperation(key, node: leasing.nodeID)
            } catch {
                logger.warning("could not release long-lived operation \(key): \(error)")
            }
        }
    }

    // MARK: - Registration and running

    /// Why a stream cannot have the operation it asked for.
    struct Refusal: Error {
        let error: Wire.OperationError

        init(error: Wire.OperationError) { self.error = error }

        init(_ code: Wire.ErrorCode, _ message: String) {
            self.error = Wire.OperationError(code: code, message: message)
        }
    }

    /// Registers `open` durably (its `Persisted` may then be sent).
    func register(_ open: Wire.Open, caller: ClientIdentity) async -> Result<LongLivedRun, Refusal> {
        guard !open.operationID.isEmpty else {
            return .failure(Refusal(.invalidArguments, "a long-lived operation needs an ID"))
        }
        let key = LongLivedOperationKey(owner: caller.userRecordName, operationID: open.operationID)
        let running = state.withLock { $0.runs.keys.count { $0.owner == caller.userRecordName } }
        guard running < Self.maximumRunningPerUser else {
            return .failure(
                Refusal(.requestRateLimited, "\(running) long-lived operations are running; at most \(Self.maximumRunningPerUser)"))
        }
        state.withLock { $0.registering[key, default: 0] += 1 }
        do {
            let record: LongLivedOperationRecord
            do {
                record = try await journal.registerLongLivedOperation(key, open: open, at: clock(), lease: newLease())
            } catch {
                state.withLock { $0.registered(key) }
                throw error
            }
            let run = LongLivedRun(record: record, caller: caller, journal: journal, node: leasing.nodeID)
            state.withLock { state in
                state.registered(key)
                state.pending[key] = run
            }
            await afterRegistration(key)
            return .success(run)
        } catch let error as StoreError {
            return .failure(Refusal(error: error.operationError))
        } catch {
            return .failure(Refusal(.internalError, "could not register the operation"))
        }
    }

    /// Its client went away before it heard `Persisted`: the operation never existed — unless
    /// the client claimed it meanwhile on another connection (its `Open` there was refused as a
    /// duplicate, so it resumed), which started it.
    func abandon(_ run: LongLivedRun) async {
        let unclaimed = state.withLock { state -> Bool in
            guard state.pending[run.key] === run else { return false }
            state.pending[run.key] = nil
            return true
        }
        guard unclaimed else { return }
        do {
            try await journal.removeLongLivedOperation(run.key)
        } catch {
            logger.error("could not drop abandoned operation \(run.key): \(error)")
        }
    }

    /// Runs `run` on a task of its own, to its `Complete`.
    func start(_ run: LongLivedRun) {
        state.withLock { state in self.start(run, in: &state) }
    }

    /// Starts `run` unless it runs already (a `Resume` claimed it before its `Persisted` went out).
    /// A run `cancelled` by its client before it started here only journals its cancelled `Complete`.
    func start(_ run: LongLivedRun, in state: inout State, cancelled: Bool = false) {
        if state.pending[run.key] === run { state.pending[run.key] = nil }
        guard state.runs[run.key] == nil else { return }
        state.runs[run.key] = Entry(run: run, isCancelled: cancelled)
        // The run's task is cancelled when its client cancels it (or the node stops): its end is
        // journaled on a task of its own, which that cancellation does not cut short (a
        // PostgreSQL journal leases no connection to a cancelled task).
        if cancelled {
            let completion = OperationCompletion(error: OperationJournalRules.cancelled(lastSeq: run.lastSeq).error)
            state.runs[run.key]?.task = Task {
                await Task { await self.finish(run, completion) }.value
            }
            return
        }
        // Created under the lock so `finish` (which removes the entry) cannot come first.
        state.runs[run.key]?.task = Task {
            let fields = OperationLogContext.fields(of: run.open, user: run.caller.userRecordName)
            await OperationLogContext.withFields(fields) {
                let completion = await self.executor.run(run.open, caller: run.caller, stream: OperationStream(run: run))
                await Task { await self.finish(run, completion) }.value
            }
        }
    }

    private func finish(_ run: LongLivedRun, _ completion: OperationCompletion) async {
        let (shuttingDown, cancelled, lost) = state.withLock { state in
            (state.isShuttingDown, state.runs[run.key]?.isCancelled ?? false, state.runs[run.key]?.isLost ?? false)
        }
        if lost {
            moved(run)
            return
        }
        if shuttingDown && !cancelled {
            // Not finished: it continues from its journal on the next start.
            state.withLock { _ = $0.runs.removeValue(forKey: run.key) }
            return
        }
        var complete = Wire.Complete(lastSeq: run.lastSeq, error: completion.error, result: completion.result)
        if cancelled {
            complete = OperationJournalRules.cancelled(lastSeq: run.lastSeq)
        }
        do {
            complete = try await journal.completeLongLivedOperation(
                run.key, complete: complete, at: clock(), by: leasing.nodeID)
            // The journal completes an operation its client cancelled on another node (whose
            // signal has not reached this one yet) as cancelled, whatever it finished with.
            let cancelledElsewhere = complete.error?.code == .operationCancelled && completion.error?.code != .operationCancelled
            if cancelled || cancelledElsewhere {
                try await journal.removeLongLivedOperation(run.key)
            }
        } catch let error as StoreError where error.code == .leaseLost || error.code == .unknownOperation {
            // Another node continues it (and completes it), or it is gone: this run's end is
            // not the operation's, and its followers here read what is from the journal.
            logger.warning("long-lived operation \(run.key) was taken over by another node: \(error)")
            moved(run)
            return
        } catch {
            logger.error("could not journal the completion of \(run.key): \(error)")
        }
        run.finish(complete)
        state.withLock { _ = $0.runs.removeValue(forKey: run.key) }
    }

    // MARK: - Cancel and acknowledge

    /// Cancels the operation for good, on whichever node runs it: its run stops, a `Complete`
    /// with `operationCancelled` is journaled for any follower, and it is no longer listed.
    ///
    /// The cancellation is marked in the journal first (``OperationJournal/requestLongLivedCancellation(_:)``),
    /// so it outlives this node and the node running the operation: that node hears its signal
    /// (``heard(_:)``) or finds it at its next heartbeat and stops the run; a node that takes
    /// the operation over completes it as cancelled without running it. An operation that
    /// completed already is dropped (the client does not want it any more).
    func cancel(_ key: LongLivedOperationKey) async {
        let marked: Bool
        do {
            marked = try await journal.requestLongLivedCancellation(key)
        } catch {
            // The run here (if it runs here) still stops; another node's cannot be reached.
            logger.error("could not mark long-lived operation \(key) as cancelled: \(error)")
            stopCancelled(key)
            return
        }
        let runsHere = stopCancelled(key)
        if !marked && !runsHere {
            // Completed (or gone): the client does not want it any more.
            await acknowledge(key)
        }
    }

    /// Stops the run of `key` here, if it runs here, as cancelled by its client (its `finish`
    /// journals the cancelled `Complete` and drops it). Returns whether it runs here.
    @discardableResult
    func stopCancelled(_ key: LongLivedOperationKey) -> Bool {
        let found = state.withLock { state -> (Bool, Task<Void, Never>?) in
            guard let entry = state.runs[key], !entry.isLost else { return (false, nil) }
            state.runs[key]?.isCancelled = true
            return (true, entry.task)
        }
        found.1?.cancel()
        return found.0
    }

    /// What the journal signals (on PostgreSQL, what any node committed): new events of an
    /// operation this node follows through the journal wake its follower; a cancellation of an
    /// operation this node runs stops it.
    func heard(_ signal: LongLivedOperationSignal) {
        switch signal {
        case .journaled(let key, _):
            let run = state.withLock { $0.following[key] }
            run?.journalChanged()
        case .cancelRequested(let key):
            stopCancelled(key)
        }
    }

    /// The client has the `Complete`: drop the operation and its journal.
    func acknowledge(_ key: LongLivedOperationKey) async {
        do {
            try await journal.acknowledgeLongLivedOperation(key)
        } catch {
            logger.error("could not drop acknowledged operation \(key): \(error)")
        }
    }

    // MARK: - Container methods

    /// Whether `open` may run detached as a long-lived operation. A notification watch never
    /// does: it lives exactly as long as its stream (a client resumes it with its last token).
    /// Nor does a kind the executor does not run: it is refused on its stream, unregistered.
    /// The user identity kinds and the notification marks change no records and keep no
    /// position to continue from: they run attached, and a client that lost them asks again.
    func canRunDetached(_ open: Wire.Open) -> Bool {
        guard let request = open.request, executor.runs(request) else { return false }
        switch request {
        case .watchNotifications, .fetchUserRecordID, .accountStatus, .applicationPermission, .discoverUserIdentities,
            .discoverAllUserIdentities, .fetchWebAuthToken, .markNotificationsRead, .modifyBadge,
            .uploadAsset, .downloadAsset:
            // Asset transfers are never long-lived: each resumes by its upload ID or offset.
            return false
        default:
            return true
        }
    }

    /// Whether `open` is a container method this registry answers.

    static func answers(_ open: Wire.Open) -> Bool {
        switch open.request {
        case .fetchLongLivedOperationIDs, .fetchLongLivedOperation: true
        default: false
        }
    }

    /// `fetchAllLongLivedOperationIDs` and `fetchLongLivedOperation(withID:)`.
    func answer(_ open: Wire.Open, caller: ClientIdentity) async -> OperationCompletion {
        switch open.request {
        case .fetchLongLivedOperationIDs:
            do {
                let ids = try await journal.longLivedOperationIDs(
                    owner: caller.userRecordName, container: open.containerIdentifier, completedSince: retentionCutoff())
                return .success(.fetchLongLivedOperationIDs(Wire.FetchLongLivedOperationIDsResult(operationIDs: ids)))
            } catch let error as StoreError where error.code == .unavailable {
                return OperationCompletion(error: error.operationError)
            } catch {
                logger.error("could not list long-lived operations: \(error)")
                return .failure(.internalError, "could not list the operations")
            }
        case .fetchLongLivedOperation(let request):
            let key = LongLivedOperationKey(owner: caller.userRecordName, operationID: request.operationID)
            switch await listedRecord(key) {
            case .failure(let refusal):
                return OperationCompletion(error: refusal.error)
            case .success(let record):
                guard record.open.containerIdentifier == open.containerIdentifier,
                    await mayFollow(record.open, key: key, caller: caller)
                else {
                    return OperationCompletion(error: Self.unknown(request.operationID).error)
                }
                let info = Wire.LongLivedOperationInfo(
                    operationID: record.key.operationID,
                    open: record.open,
                    status: record.isCompleted ? .completed : .running,
                    lastSeq: record.lastSeq,
                    creationDate: record.creationDate,
                    completionDate: record.completionDate
                )
                return .success(.fetchLongLivedOperation(info))
            }
        default:
            return .failure(.serverRejectedRequest, "not a long-lived operation request")
        }
    }
}
