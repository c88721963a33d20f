import CirrusStore
import CirrusWire
import NIOCore

/// Routes the operations of the server's connections, in async code: an `Open` goes to the
/// long-lived registry (a question it answers, or an operation that runs detached and is
/// followed) or to the ``OperationExecutor``; a `Resume` attaches to a long-lived operation.
/// Each runs on a task of its own, which the ``ConnectionHandler`` keeps so it can cancel it,
/// and reaches the connection only through its ``OperationStream``.
///
/// It also carries out what a `Cancel` asks of a long-lived operation (cancel it, or forget
/// it once the client acknowledged its completion).
struct OperationRouter: Sendable {
    let executor: any OperationExecutor
    let longLivedOperations: LongLivedOperations?
    let metrics: ServerMetrics?

    init(configuration: ServerConfiguration) {
        self.executor = configuration.executor
        self.longLivedOperations = configuration.longLivedOperations
        self.metrics = configuration.metrics
    }

    /// Starts the operation `open` of `caller` on `stream`; its logs carry `fields`. A small
    /// save (``runsOnConnectionLoop(_:)``) runs on `loop`, the connection's event loop, with
    /// reads in place forbidden (``ReadPlacement``); any other operation on the cooperative pool.
    func start(
        _ open: Wire.Open, caller: ClientIdentity, stream: OperationStream, fields: OperationLogFields,
        loop: @autoclosure () -> EventLoopTaskExecutor
    ) -> Task<Void, Never> {
        // The task's task-local values (its log fields, and on a loop that it must not read in
        // place) are bound here, synchronously, and the task takes them with it when it is
        // created: bound inside it, each `withValue` would be an async call whose operation
        // closure hops to the generic executor and back (two `swift_task_switch` each, with
        // the task's status records read under their lock every time). `run` is nonsending,
        // like the functions it calls down to the storage: the task's code stays on its
        // executor without a switch at each call and return. A single save's task switches six
        // times (eighteen before `run` and its callees were nonsending, ten before these values
        // were bound here).
        OperationLogContext.$current.withValue(fields) {
            if Self.runsOnConnectionLoop(open) {
                return ReadPlacement.$mayReadInPlace.withValue(false) {
                    Task(executorPreference: loop()) { await self.run(open, caller: caller, stream: stream) }
                }
            }
            return Task { await self.run(open, caller: caller, stream: stream) }
        }
    }

    /// Items a save may carry and still run on the connection's event loop.
    static let connectionLoopItemLimit = 16

    /// Whether `open` runs on its connection's event loop (see ``EventLoopTaskExecutor``): a
    /// modify of up to ``connectionLoopItemLimit`` records and deletions without assets, not
    /// long-lived, in the private or public database. What it does on the loop is the checks
    /// and encoding of a few records; its transaction runs on the storage's writer thread,
    /// which it waits for suspended, so no storage call blocks the loop. On the pool it would
    /// cost two thread hand-offs more (loop to pool to start, pool to loop to write its events)
    /// than its own work.
    ///
    /// Everything else stays on the pool: reads (a fetch reads SQLite in place on a pool
    /// thread, which must not happen on a loop), larger batches, assets (the asset store's file
    /// writes; an actor's methods run on the task's preferred executor), queries, change feeds,
    /// the shared database's access checks, long-lived bookkeeping.
    static func runsOnConnectionLoop(_ open: Wire.Open) -> Bool {
        guard open.configuration?.isLongLived != true else { return false }
        switch open.databaseScope {
        case .private, .public: break
        default: return false
        }
        guard case .modifyRecords(let request) = open.request,
            request.recordsToSave.count + request.recordIDsToDelete.count <= Self.connectionLoopItemLimit
        else { return false }
        return !request.recordsToSave.contains { $0.hasAssets }
    }

    /// Attaches `stream` to the long-lived operation named in `resume` (of `registry`, this
    /// server's), after the client's `last_seq`: `Persisted`, the journal after it, live events,
    /// `Complete`.
    func resume(
        _ resume: Wire.Resume, caller: ClientIdentity, stream: OperationStream, registry: LongLivedOperations
    ) -> Task<Void, Never> {
        Task {
            switch await registry.attach(operationID: resume.operationID, caller: caller, after: resume.lastSeq) {
            case .failure(let refusal):
                stream.complete(OperationCompletion(error: refusal.error))
            case .success(let (run, attachment)):
                guard await stream.persisted(key: run.key, release: { run.release(attachment) }, then: {}) else {
                    run.release(attachment)
                    return
                }
                await LongLivedOperations.follow(run, attachment: attachment, after: resume.lastSeq, stream: stream)
            }
        }
    }

    /// The client cancelled the long-lived operation `key` (a plain `Cancel`).
    func cancel(_ key: LongLivedOperationKey) {
        guard let registry = self.longLivedOperations else { return }
        Task { await registry.cancel(key) }
    }

    /// The client has the `Complete` of the long-lived operation `key`: it may be forgotten.
    func acknowledge(_ key: LongLivedOperationKey) {
        guard let registry = self.longLivedOperations else { return }
        Task { await registry.acknowledge(key) }
    }

    nonisolated(nonsending) private func run(_ open: Wire.Open, caller: ClientIdentity, stream: OperationStream) async {
        if let registry = self.longLivedOperations, LongLivedOperations.answers(open) {
            stream.complete(await registry.answer(open, caller: caller))
        } else if let registry = self.longLivedOperations, open.configuration?.isLongLived == true,
            registry.canRunDetached(open)
        {
            await self.runDetached(open, caller: caller, stream: stream, registry: registry)
        } else {
            let started = ContinuousClock.now
            let completion = await self.executor.run(open, caller: caller, stream: stream)
            self.metrics?.operationFinished(open.request, duration: .now - started)
            stream.complete(completion)
        }
    }

    /// Registers a long-lived operation, says `Persisted` once it is durable, then follows it.
    private func runDetached(
        _ open: Wire.Open, caller: ClientIdentity, stream: OperationStream, registry: LongLivedOperations
    ) async {
        switch await registry.register(open, caller: caller) {
        case .failure(let refusal):
            stream.complete(OperationCompletion(error: refusal.error))
        case .success(let run):
            // Persisted only once durable; a client gone by then never had the operation.
            guard let attachment = run.attach() else {
                // A run just registered has no follower yet.
                stream.complete(.failure(.internalError, "operation \(run.key.operationID) attached before it ran"))
                return
            }
            let release: @Sendable () -> Void = { run.release(attachment) }
            guard await stream.persisted(key: run.key, release: release, then: { registry.start(run) }) else {
                run.release(attachment)
                await registry.abandon(run)
                return
            }
            await LongLivedOperations.follow(run, attachment: attachment, after: 0, stream: stream)
        }
    }
}
