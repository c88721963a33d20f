import CirrusStore
import CirrusWire

extension LongLivedOperations {
    /// How a node holds the long-lived operations it runs, when several nodes share one
    /// journal (see ``LongLivedOperations``).
    ///
    /// For example, a node with a fixed ID, which takes back at once what it held when it
    /// restarts after a crash:
    /// ```swift
    /// let leasing = LongLivedOperations.Leasing(nodeID: "cirrusd-1")
    /// let longLived = LongLivedOperations(journal: storage, executor: executor, leasing: leasing)
    /// ```
    public struct Leasing: Sendable, Hashable {
        /// This node's ID in the journal: unique among the running nodes. Random per process
        /// unless configured; a node restarted with the same ID continues what it held without
        /// waiting for its leases to expire.
        public var nodeID: String
        /// How long a lease holds without a heartbeat: after it, another node may take the
        /// operation over.
        public var leaseDuration: Duration
        /// How often the node renews the leases of its runs; well below ``leaseDuration``, so
        /// a late heartbeat or two cost nothing.
        public var heartbeatInterval: Duration
        /// How often the node looks for operations no node holds, to take them over.
        public var sweepInterval: Duration
        /// How often a stream following an operation another node runs looks in the journal
        /// for new events when no signal came (``OperationJournal/observeLongLivedOperations(_:)``:
        /// the running node signals each append, so this only bounds how late a lost signal
        /// makes them).
        public var journalPollInterval: Duration

        public init(
            nodeID: String = Leasing.randomNodeID(),
            leaseDuration: Duration = .seconds(8),
            heartbeatInterval: Duration = .seconds(2),
            sweepInterval: Duration = .seconds(1),
            journalPollInterval: Duration = .seconds(1)
        ) {
            self.nodeID = nodeID
            self.leaseDuration = leaseDuration
            self.heartbeatInterval = heartbeatInterval
            self.sweepInterval = sweepInterval
            self.journalPollInterval = journalPollInterval
        }

        /// The longest an operation of a node that died waits for another node to continue
        /// it: its lease (renewed at most a heartbeat before the death, so it ends within a
        /// lease of it) plus one sweep; 9 s by default. The nodes' clocks must agree within a
        /// small fraction of it: what they disagree by adds to it (or, for a node ahead, takes
        /// from it; the journal's fencing keeps an early takeover safe).
        public var takeoverBound: Duration { leaseDuration + sweepInterval }

        /// A new random node ID ("node-" and 16 hex digits).
        public static func randomNodeID() -> String {
            let bits = UInt64.random(in: .min ... .max)
            let hex = String(bits, radix: 16)
            return "node-" + String(repeating: "0", count: 16 - hex.count) + hex
        }
    }

    /// Running operations one sweep takes over at most.
    static let sweepLimit = 64

    /// A lease of this node from now for ``Leasing/leaseDuration``.
    func newLease() -> LongLivedLease {
        let now = OperationJournalRules.nanoseconds(clock())
        let (seconds, attoseconds) = leasing.leaseDuration.components
        let (scaled, tooLong) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        let length = tooLong ? Int64.max : scaled.addingReportingOverflow(attoseconds / 1_000_000_000).partialValue
        let expiry = now.addingReportingOverflow(length)
        return LongLivedLease(
            node: leasing.nodeID,
            expiry: OperationJournalRules.timestamp(nanoseconds: expiry.overflow ? .max : expiry.partialValue))
    }

    /// Starts the heartbeat and the sweep, unless they run already or the node is stopping.
    /// They stop with ``shutdown()`` (or once nothing else keeps the registry).
    func startLeasing() {
        let (heartbeat, sweep) = (leasing.heartbeatInterval, leasing.sweepInterval)
        let registry = WeakRegistry(self)
        state.withLock { state in
            guard state.leasing == nil, !state.isShuttingDown else { return }
            state.leasing = Task {
                await withDiscardingTaskGroup { group in
                    group.addTask {
                        await Self.repeating(every: heartbeat) {
                            guard let registry = registry.registry else { return false }
                            await registry.heartbeat()
                            return true
                        }
                    }
                    group.addTask {
                        await Self.repeating(every: sweep) {
                            guard let registry = registry.registry else { return false }
                            await registry.sweep()
                            return true
                        }
                    }
                }
            }
        }
    }

    /// Runs `body` every `interval` until the task is cancelled or `body` says stop.
    private static func repeating(every interval: Duration, _ body: @Sendable () async -> Bool) async {
        while !Task.isCancelled {
            do {
                try await Task.sleep(for: interval)
            } catch {
                return
            }
            guard await body() else { return }
        }
    }

    /// Renews the leases of this node's runs (and of the registrations about to run); stops
    /// the runs whose lease another node took, and those whose client cancelled them on another
    /// node (should its signal have been lost).
    func heartbeat() async {
        let held = state.withLock { state -> [LongLivedOperationKey: LongLivedRun] in
            var held: [LongLivedOperationKey: LongLivedRun] = [:]
            for (key, entry) in state.runs where !entry.isLost { held[key] = entry.run }
            for (key, run) in state.pending { held[key] = run }
            return held
        }
        guard !held.isEmpty else { return }
        let renewed: Set<LongLivedOperationKey>
        do {
            renewed = try await journal.renewLongLivedLeases(Array(held.keys), lease: newLease())
        } catch {
            // Tried again at the next heartbeat; the leases hold a few more.
            logger.warning("could not renew the leases of \(held.count) long-lived operations: \(error)")
            return
        }
        for (key, run) in held where !renewed.contains(key) {
            lose(run)
        }
        do {
            for key in try await journal.longLivedCancellationsRequested(among: Array(renewed)) {
                stopCancelled(key)
            }
        } catch {
            logger.warning("could not look for cancellations of \(renewed.count) long-lived operations: \(error)")
        }
    }

    /// Another node holds `run`'s operation now: its task stops, journaling nothing more.
    private func lose(_ run: LongLivedRun) {
        let task = state.withLock { state -> Task<Void, Never>? in
            guard let entry = state.runs[run.key], entry.run === run, !entry.isCancelled else { return nil }
            state.runs[run.key]?.isLost = true
            return entry.task
        }
        guard let task else { return }
        logger.warning("lost the lease of long-lived operation \(run.key): another node runs it")
        task.cancel()
    }

    /// `run` stopped here without finishing because another node continues it: the streams
    /// following it here read the rest from the journal.
    func moved(_ run: LongLivedRun) {
        run.followJournal(every: leasing.journalPollInterval)
        state.withLock { state in
            if state.runs[run.key]?.run === run { state.runs[run.key] = nil }
            if run.isFollowed, state.following[run.key]?.isFollowed != true { state.following[run.key] = run }
        }
    }

    /// Takes over the operations no node holds, and forgets the journal followers that no
    /// stream follows any more.
    func sweep() async {
        state.withLock { state in state.following = state.following.filter { $0.value.isFollowed } }
        let keys: [LongLivedOperationKey]
        do {
            keys = try await journal.unheldLongLivedOperations(at: clock(), limit: Self.sweepLimit)
        } catch {
            logger.warning("could not look for long-lived operations to take over: \(error)")
            return
        }
        for key in keys {
            do {
                try await takeOver(key)
            } catch {
                logger.warning("could not take over long-lived operation \(key): \(error)")
            }
        }
    }

    /// Takes the running operation `key` over and continues it here, unless it runs here
    /// already, the node is stopping, or another node holds it (or won it just now). Returns
    /// whether it continues here.
    ///
    /// - throws: ``StoreError`` when the journal cannot be read or written.
    @discardableResult
    func takeOver(_ key: LongLivedOperationKey) async throws -> Bool {
        let local = state.withLock { state in
            state.isShuttingDown || state.runs[key] != nil || state.pending[key] != nil || state.registering[key] != nil
        }
        guard !local else { return false }
        let record: LongLivedOperationRecord?
        do {
            record = try await journal.takeOverLongLivedOperation(key, lease: newLease(), at: clock())
        } catch let error as StoreError where error.code == .unknownOperation {
            // Completed or gone since it was listed.
            return false
        }
        guard let record else { return false }
        do {
            try await continueRun(record)
        } catch {
            // Without a run here, let another node (or the next sweep) have it.
            _ = try? await journal.releaseLongLivedOperation(key, node: leasing.nodeID)
            throw error
        }
        return true
    }
}

/// The registry as its heartbeat, its sweep and the journal's signals see it: they stop once
/// nothing else keeps it.
struct WeakRegistry: Sendable {
    weak var registry: LongLivedOperations?

    init(_ registry: LongLivedOperations) { self.registry = registry }
}
