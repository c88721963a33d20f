import CirrusStore
import Logging
import PostgresNIO
import Synchronization

/// Group commit on PostgreSQL: the writes of one node into one database that arrive while a
/// transaction of that database is being written and committed wait, then run together in
/// the next one, and all learn their outcome after its one durable commit. Under load one
/// WAL flush serves many requests, and the database's row lock — which every writer of the
/// database takes first, on every node, so its change sequences follow commit order — is
/// taken once for all of them.
///
/// One queue per database (``DatabaseKey``): a transaction locks one database row, so two
/// nodes' transactions never wait on each other in opposite orders, and writes into
/// different databases run side by side on the pool's connections.
///
/// Jobs run without savepoints first, as on SQLite (``WriteBatchQueue``): a job checks what
/// can fail before it writes. When a job throws anyway (the server refused a statement), the
/// transaction rolls back and the batch runs again with each job in its own savepoint, so
/// the error stays with the job that threw and the others commit. Savepoints are only the
/// fallback: each costs two round trips, and more than 64 in a transaction overflow the
/// server's subtransaction cache, which slows every other session's snapshots. When the
/// COMMIT itself fails, every job of the batch gets its error: nothing is acknowledged that
/// is not durable. When the transaction's connection closes (the server restarted), every job
/// gets the retryable `.unavailable` at once, whatever statement the batch was waiting on
/// (``PostgresConnection/untilClosed(_:)``), and the queue goes on with its next batch.
final class PostgresWriteQueue: Sendable {
    struct Job: Sendable {
        var body: @Sendable (PostgresConnection) async throws -> any Sendable
        /// Set for a modification of records, which shares its statements with the
        /// modifications beside it in the batch when they may run together
        /// (``PostgresRecordWriter/Together``); `body` runs it alone.
        var modification: PostgresRecordWriter.Request?
        var continuation: CheckedContinuation<any Sendable, any Error>
    }

    private let client: PostgresClient
    private let logger: Logger
    private let maxWeightPerTransaction: Int
    private let leaseTimeout: Duration
    private let queues = Mutex<[DatabaseKey: WriteBatchQueue<Job>]>([:])
    /// Told after each transaction (committed or not), on the task that ran it.
    private let afterCommit: @Sendable (WriteCommit) -> Void

    init(
        client: PostgresClient, logger: Logger, maxWeightPerTransaction: Int = 2_000, leaseTimeout: Duration = .seconds(10),
        afterCommit: @escaping @Sendable (WriteCommit) -> Void
    ) {
        self.client = client
        self.logger = logger
        self.maxWeightPerTransaction = maxWeightPerTransaction
        self.leaseTimeout = leaseTimeout
        self.afterCommit = afterCommit
    }

    /// Runs `body` in the next transaction of `key`'s database, after its row lock
    /// (``PostgresRows/lockDatabase(_:_:_:)``), and returns its result once that transaction
    /// committed. An error thrown by `body` rolls back only its own writes; `body` may run
    /// twice (see the type's comment), so it must do database work only, and must not
    /// swallow an error of the server (the transaction would stay aborted).
    ///
    /// - parameter weight: about how many rows `body` writes (items of the request).
    /// - throws: what `body` threw, or the error of the transaction that held it.
    func write<T: Sendable>(
        in key: DatabaseKey, weight: Int, _ body: @escaping @Sendable (PostgresConnection) async throws -> T
    ) async throws -> T {
        try await enqueue(in: key, weight: weight, modification: nil, body)
    }

    /// Carries out `request` in the next transaction of `key`'s database, in the same
    /// statements as the modifications beside it that may run with it
    /// (``PostgresRecordWriter/Together``): under load, the single saves of many clients of
    /// one database cost the statements of one request. Returns once that transaction committed.
    ///
    /// - throws: as ``write(in:weight:_:)``.
    func modify(
        _ request: PostgresRecordWriter.Request, in key: DatabaseKey, weight: Int
    ) async throws -> PostgresRecordWriter.Outcome {
        let logger = self.logger
        return try await enqueue(in: key, weight: weight, modification: request) { connection in
            let outcomes = try await PostgresRecordWriter.Request.run([request], in: key, connection, logger)
            guard let outcome = outcomes.first else { throw StoreError(.storageFailure, "a modification had no outcome") }
            return outcome
        }
    }

    private func enqueue<T: Sendable>(
        in key: DatabaseKey, weight: Int, modification: PostgresRecordWriter.Request?,
        _ body: @escaping @Sendable (PostgresConnection) async throws -> T
    ) async throws -> T {
        let value = try await withCheckedThrowingContinuation {
            (continuation: CheckedContinuation<any Sendable, any Error>) in
            let job = Job(
                body: { connection in try await body(connection) }, modification: modification, continuation: continuation)
            let mustDrain = queues.withLock { queues in
                queues[key, default: WriteBatchQueue(maxWeightPerTransaction: maxWeightPerTransaction)]
                    .append(job, weight: weight)
            }
            if mustDrain { Task { await self.drain(key) } }
        }
        guard let result = value as? T else {
            throw StoreError(.storageFailure, "a write returned \(type(of: value)), not \(T.self)")
        }
        return result
    }

    /// How many jobs of `key`'s database wait for its next transaction (for tests that line
    /// jobs up).
    func pendingCount(in key: DatabaseKey) -> Int {
        queues.withLock { $0[key]?.count ?? 0 }
    }

    /// Runs `key`'s batches one transaction after the other until its queue is empty.
    private func drain(_ key: DatabaseKey) async {
        while let (batch, weight) = nextBatch(key) {
            let start = ContinuousClock.now
            let outcomes = await run(batch, in: key)
            afterCommit(WriteCommit(jobs: batch.count, items: weight, duration: .now - start))
            for (job, outcome) in zip(batch, outcomes) {
                job.continuation.resume(with: outcome.mapError { PostgresStorage.storeError($0) })
            }
        }
    }

    /// The jobs of `key`'s next transaction, or nil (and its drainer stops) when none wait.
    private func nextBatch(_ key: DatabaseKey) -> (jobs: [Job], weight: Int)? {
        queues.withLock { queues in
            let batch = queues[key]?.nextBatch()
            if queues[key]?.isIdle == true { queues[key] = nil }
            return batch
        }
    }

    /// One outcome per job of `batch`, in order.
    private func run(_ batch: [Job], in key: DatabaseKey) async -> [Result<any Sendable, any Error>] {
        let logger = self.logger
        do {
            return try await client.withConnection(leaseTimeout: leaseTimeout) { connection in
                if let outcomes = try await Self.runTogether(batch, key, connection, logger) { return outcomes }
                return try await Self.runApart(batch, key, connection, logger)
            }
        } catch {
            return batch.map { _ in .failure(error) }
        }
    }

    /// Runs the batch in one transaction without savepoints; nil when a job threw and the
    /// batch must run again apart (the transaction rolled back).
    ///
    /// - throws: when the transaction failed for every job (the lock, the COMMIT).
    private static func runTogether(
        _ batch: [Job], _ key: DatabaseKey, _ connection: PostgresConnection, _ logger: Logger
    ) async throws -> [Result<any Sendable, any Error>]? {
        try await begin(key, connection, logger)
        var values: [any Sendable] = []
        values.reserveCapacity(batch.count)
        var next = 0
        while next < batch.count {
            // The next statements run the modifications that may run together from here, or
            // one job.
            var together = PostgresRecordWriter.Together()
            var end = next
            while end < batch.count, let request = batch[end].modification, together.add(request) { end += 1 }
            do {
                if end > next {
                    let outcomes = try await PostgresRecordWriter.Request.run(together.requests, in: key, connection, logger)
                    values += outcomes.map { $0 as any Sendable }
                } else {
                    values.append(try await batch[next].body(connection))
                    end = next + 1
                }
            } catch {
                try await rollback(after: error, connection, logger)
                // A lone job's error is its own; the rollback undid what it wrote.
                if batch.count == 1 { return [.failure(error)] }
                return nil
            }
            next = end
        }
        try await commit(connection, logger)
        return values.map { .success($0) }
    }

    /// Runs the batch in one transaction, each job in a savepoint, so a job that throws
    /// rolls back only its own writes.
    ///
    /// - throws: when the transaction failed for every job (the lock, a savepoint, the COMMIT).
    private static func runApart(
        _ batch: [Job], _ key: DatabaseKey, _ connection: PostgresConnection, _ logger: Logger
    ) async throws -> [Result<any Sendable, any Error>] {
        try await begin(key, connection, logger)
        var outcomes: [Result<any Sendable, any Error>] = []
        do {
            for job in batch {
                try await connection.query("SAVEPOINT job", logger: logger)
                do {
                    let value = try await job.body(connection)
                    try await connection.query("RELEASE SAVEPOINT job", logger: logger)
                    outcomes.append(.success(value))
                } catch {
                    if PostgresUnavailability.reason(error) != nil { throw error }
                    try await connection.query("ROLLBACK TO SAVEPOINT job", logger: logger)
                    outcomes.append(.failure(error))
                }
            }
        } catch {
            try await rollback(after: error, connection, logger)
            throw error
        }
        try await commit(connection, logger)
        return outcomes
    }

    /// Starts a transaction and takes the database's row lock (rolled back when that fails).
    private static func begin(_ key: DatabaseKey, _ connection: PostgresConnection, _ logger: Logger) async throws {
        try await connection.query("BEGIN", logger: logger)
        do {
            try await PostgresRows.lockDatabase(connection, key, logger)
        } catch {
            try await rollback(after: error, connection, logger)
            throw error
        }
    }

    /// Commits: durable when it returns (`synchronous_commit=on`).
    private static func commit(_ connection: PostgresConnection, _ logger: Logger) async throws {
        try await connection.query("COMMIT", logger: logger)
    }

    /// Rolls back after `error`. A rollback fails only when the connection did (every job of
    /// the batch then gets that error). When `error` is the connection's loss, throws it
    /// without a statement: the server rolls back a transaction whose session ended, and a
    /// statement sent on a connection the server is closing may never be answered.
    private static func rollback(after error: any Error, _ connection: PostgresConnection, _ logger: Logger) async throws {
        if PostgresUnavailability.reason(error) != nil { throw error }
        try await connection.query("ROLLBACK", logger: logger)
    }
}
