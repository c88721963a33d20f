/// The queue of group commit, whatever the engine: write requests that arrive while a
/// transaction is being written and made durable wait here, then leave together, in arrival
/// order, as the next transaction's jobs.
///
/// One drainer at a time: ``append(_:weight:)`` tells the caller whether it must start one
/// (no transaction was running), and the drainer takes batches with ``nextBatch()`` until it
/// returns nil. Not synchronized: its owner keeps it behind a lock (``WriteCoalescer`` for
/// SQLite, `PostgresWriteQueue` per database for PostgreSQL).
///
/// For example:
/// ```swift
/// let mustDrain = queue.withLock { $0.append(job, weight: items) }
/// if mustDrain { startDraining() }  // loops on queue.withLock { $0.nextBatch() }
/// ```
package struct WriteBatchQueue<Job> {
    private var pending: [(job: Job, weight: Int)] = []
    private var draining = false
    /// A batch takes jobs until their weights (items) add up to this; a heavier job alone
    /// still makes a batch.
    package let maxWeightPerTransaction: Int

    package init(maxWeightPerTransaction: Int) {
        self.maxWeightPerTransaction = max(1, maxWeightPerTransaction)
    }

    /// How many jobs wait for the next transaction.
    package var count: Int { pending.count }

    /// Whether nothing waits and no drainer runs (the queue may be dropped).
    package var isIdle: Bool { pending.isEmpty && !draining }

    /// Queues `job`, which writes about `weight` rows; true when the caller must start a
    /// drainer (none runs), false when the running one will take the job.
    package mutating func append(_ job: Job, weight: Int) -> Bool {
        pending.append((job, max(1, weight)))
        if draining { return false }
        draining = true
        return true
    }

    /// The jobs of the next transaction with their total weight, or nil — and the drainer
    /// stops — when none wait.
    package mutating func nextBatch() -> (jobs: [Job], weight: Int)? {
        guard !pending.isEmpty else {
            draining = false
            return nil
        }
        var weight = 0
        var count = 0
        for entry in pending {
            if count > 0 && weight + entry.weight > maxWeightPerTransaction { break }
            weight += entry.weight
            count += 1
        }
        let batch = pending.prefix(count).map(\.job)
        pending.removeFirst(count)
        return (batch, weight)
    }
}

extension WriteBatchQueue: Sendable where Job: Sendable {}
