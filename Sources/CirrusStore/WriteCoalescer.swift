import GRDB
import Synchronization

/// Group commit: write requests that arrive while a transaction is being
/// written and synced wait, then run together in the next transaction, and
/// all learn their outcome after its one durable commit. Under load one fsync
/// serves many operations; nobody hears success before the commit that holds
/// their writes is on disk.
///
/// Jobs run without savepoints: a job checks what can fail before it writes,
/// so it either writes everything or throws before writing. When a job throws
/// anyway (SQLite itself failed, or a job refused after writing), the whole
/// transaction rolls back and the batch runs again with each job in its own
/// savepoint, so the error stays with the job that threw. A savepoint makes
/// SQLite copy every page the job touches into a sub-journal (and FTS5 flush
/// its pending terms when it is released), which is why it is only the fallback.
///
/// Every write of the store goes through here, on GRDB's writer queue.
final class WriteCoalescer: Sendable {
    private struct Job: Sendable {
        /// Whether the job reads and writes through ``transactionCache`` (record writes).
        var sharesCache: Bool
        var body: @Sendable (Database) throws -> any Sendable
        /// Told the job's value on the writer once its transaction committed, before the
        /// continuation resumes (see ``write(weight:sharesCache:committed:_:)``).
        var committed: (@Sendable (any Sendable) -> Void)?
        var continuation: CheckedContinuation<any Sendable, any Error>
    }

    private let writer: DatabasePool
    private let queue: Mutex<WriteBatchQueue<Job>>

    /// Told after each transaction (committed or not), on the writer queue.
    private let afterCommit: @Sendable (WriteCommit) -> Void
    /// Runs on the writer's connection after each transaction's callers were resumed, outside
    /// any transaction (the WAL checkpoint the log's size calls for).
    private let betweenTransactions: @Sendable (Database) -> Void

    /// What the record writes of one transaction share (see ``WriteTransactionCache``).
    let transactionCache = WriteTransactionCache()

    init(
        writer: DatabasePool, maxWeightPerTransaction: Int = 2_000,
        afterCommit: @escaping @Sendable (WriteCommit) -> Void = { _ in },
        betweenTransactions: @escaping @Sendable (Database) -> Void = { _ in }
    ) {
        self.writer = writer
        self.queue = Mutex(WriteBatchQueue(maxWeightPerTransaction: maxWeightPerTransaction))
        self.afterCommit = afterCommit
        self.betweenTransactions = betweenTransactions
    }

    /// Runs `body` in the next transaction and returns its result once that
    /// transaction committed. An error thrown by `body` rolls back only its
    /// own writes; `body` may run twice (see the type's comment), so it must
    /// not do anything but database work.
    ///
    /// - parameter weight: roughly the rows `body` writes (items of the request).
    /// - parameter sharesCache: `body` goes through ``transactionCache`` for databases,
    ///   zones and change sequences; a job that does not reads and writes those tables
    ///   directly, after the cache's pending updates were written.
    /// - parameter committed: told `body`'s value on the writer as soon as the transaction
    ///   holding it committed, before the caller resumes (which takes a thread hand-off);
    ///   never for a job whose writes rolled back. It must return quickly: the next
    ///   transaction waits for it.
    func write<T: Sendable>(
        weight: Int, sharesCache: Bool = false, committed: (@Sendable (T) -> Void)? = nil,
        _ body: @escaping @Sendable (Database) throws -> T
    ) async throws -> T {
        let value = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<any Sendable, any Error>) in
            var told: (@Sendable (any Sendable) -> Void)?
            if let committed {
                told = { @Sendable (value: any Sendable) in
                    if let value = value as? T { committed(value) }
                }
            }
            let job = Job(sharesCache: sharesCache, body: { db in try body(db) }, committed: told, continuation: continuation)
            if queue.withLock({ $0.append(job, weight: weight) }) { flush() }
        }
        guard let result = (consume value) as? T else {
            throw StoreError(.storageFailure, "a write returned a value of another type than \(T.self)")
        }
        return result
    }

    /// Drains the queue on the writer, one transaction per batch, until it is empty.
    private func flush() {
        writer.asyncWriteWithoutTransaction { db in
            while let (batch, weight) = self.queue.withLock({ $0.nextBatch() }) {
                let start = ContinuousClock.now
                let startCPU = ThreadCPUClock.now()
                let cache = self.transactionCache
                var outcomes = Self.runTogether(batch, cache, in: db) ?? Self.runApart(batch, cache, in: db)
                self.afterCommit(WriteCommit(
                    jobs: batch.count, items: weight, duration: .now - start, writerCPU: ThreadCPUClock.now() - startCPU))
                // Every job's commit hook first, then the callers: what the hooks hand on (the
                // notifications a save wrote, to other connections' watches) does not wait for
                // the callers' tasks to be scheduled.
                for (job, outcome) in zip(batch, outcomes) {
                    if let committed = job.committed, case .success(let value) = outcome { committed(value) }
                }
                // Each outcome handed over, none kept here: the caller, resumed on another
                // thread while this loop goes on, then holds the only reference to its value,
                // and changes it in place (a saved record mapped for the client) instead of
                // copying it.
                for index in batch.indices {
                    let outcome = outcomes[index]
                    outcomes[index] = Self.handedOver
                    batch[index].continuation.resume(with: consume outcome)
                }
                self.betweenTransactions(db)
            }
        }
    }

    /// What stays in a batch's outcomes once an outcome was handed to its caller.
    private static let handedOver: Result<any Sendable, any Error> = .success(())

    /// Runs the batch in one transaction without savepoints; nil when a job
    /// threw and the batch must run again apart (the transaction rolled back).
    private static func runTogether(
        _ batch: [Job], _ cache: WriteTransactionCache, in db: Database
    ) -> [Result<any Sendable, any Error>]? {
        var values: [any Sendable] = []
        values.reserveCapacity(batch.count)
        cache.reset()
        do {
            try db.inWriteTransaction {
                for job in batch {
                    if !job.sharesCache { try cache.flush(db) }
                    values.append(try job.body(db))
                }
                try cache.flush(db)
            }
        } catch {
            cache.reset()
            // Every job ran: the commit failed, and with it every job. A lone
            // job's error is its own; the rollback undid what it wrote.
            if values.count == batch.count || batch.count == 1 { return batch.map { _ in .failure(error) } }
            return nil
        }
        return values.map { .success($0) }
    }

    /// Runs the batch in one transaction, each job in its own savepoint, so a
    /// job that throws rolls back only its own writes.
    private static func runApart(
        _ batch: [Job], _ cache: WriteTransactionCache, in db: Database
    ) -> [Result<any Sendable, any Error>] {
        var outcomes: [Result<any Sendable, any Error>] = []
        cache.reset()
        do {
            try db.inWriteTransaction {
                for job in batch {
                    // A job before may have failed in a way that ended the transaction (its
                    // savepoint caught the error): none runs outside it.
                    try db.checkTransactionOpen()
                    if !job.sharesCache { try cache.flush(db) }
                    let before = cache.snapshot
                    let outcome = Self.run(job, in: db)
                    // Its savepoint rolled back: so does what it left in the cache.
                    if case .failure = outcome { cache.restore(before) }
                    outcomes.append(outcome)
                }
                try cache.flush(db)
            }
        } catch {
            cache.reset()
            outcomes = batch.map { _ in .failure(error) }
        }
        return outcomes
    }

    private static func run(_ job: Job, in db: Database) -> Result<any Sendable, any Error> {
        var outcome: Result<any Sendable, any Error> = .failure(StoreError(.storageFailure, "write did not run"))
        do {
            try db.inSavepoint {
                do {
                    outcome = .success(try job.body(db))
                    return .commit
                } catch {
                    outcome = .failure(error)
                    return .rollback
                }
            }
        } catch {
            outcome = .failure(error)
        }
        return outcome
    }

    /// How many jobs wait for the next transaction (for tests that line jobs up).
    var pendingCount: Int { queue.withLock { $0.count } }
}

/// One transaction of the write queue, as ``SQLiteStorage/observeCommits(_:)`` (and the
/// PostgreSQL engine's `observeCommits`) reports it.
public struct WriteCommit: Sendable, Hashable {
    /// The write requests that shared the transaction (group commit).
    public var jobs: Int
    /// About how many rows they wrote: the items of their requests.
    public var items: Int
    /// From the transaction's first statement to its durable commit.
    public var duration: Duration
    /// The CPU time the committing thread spent on the transaction, when the engine runs it
    /// in this process (SQLite's writer; nil for PostgreSQL, whose work is the database
    /// server's). Against ``duration`` it tells a writer short of CPU from one that waits
    /// for the disk.
    public var writerCPU: Duration?

    package init(jobs: Int, items: Int, duration: Duration, writerCPU: Duration? = nil) {
        (self.jobs, self.items, self.duration, self.writerCPU) = (jobs, items, duration, writerCPU)
    }
}
