import NIOCore
import PostgresNIO

/// No pooled connection was free or could be made within the storage's lease timeout (the
/// server is down, or every connection is busy for that long).
struct PostgresLeaseTimeout: Error, CustomStringConvertible {
    var timeout: Duration

    var description: String { "no PostgreSQL connection within \(timeout)" }
}

extension PostgresClient {
    /// Runs `body` on a pooled connection, or throws ``PostgresLeaseTimeout`` when none is
    /// leased within `timeout`.
    ///
    /// While the server cannot be reached the pool keeps a request waiting, and fails it only
    /// after it has failed to connect for a minute: a caller would hang that long. Here the
    /// lease is taken by a task of its own that hands the connection over and holds it until
    /// `body` returned; when the timeout comes first, that task is cancelled (which withdraws
    /// the request) and not waited for: a request the pool still answers later is released at
    /// once. Once leased, `body` runs to its end without a deadline.
    func withConnection<Result: Sendable>(
        leaseTimeout timeout: Duration, _ body: (PostgresConnection) async throws -> Result
    ) async throws -> Result {
        let (leases, lease) = AsyncThrowingStream<PostgresConnection, any Error>.makeStream()
        let (released, release) = AsyncStream<Void>.makeStream()
        let holder = Task {
            do {
                try await self.withConnection { connection in
                    lease.yield(connection)
                    for await _ in released {}
                }
                lease.finish()
            } catch {
                lease.finish(throwing: error)
            }
        }
        let timer = Task {
            try await Task.sleep(for: timeout)
            lease.finish(throwing: PostgresLeaseTimeout(timeout: timeout))
        }
        defer {
            release.finish()
            timer.cancel()
            holder.cancel()
        }
        var iterator = leases.makeAsyncIterator()
        guard let connection = try await iterator.next() else {
            throw PostgresLeaseTimeout(timeout: timeout)
        }
        do {
            return try await body(connection)
        } catch {
            // A connection the server ended is closed before it returns to the pool, so no
            // later statement is queued on it.
            if PostgresUnavailability.reason(error) != nil {
                let _: EventLoopFuture<Void> = connection.close()
            }
            throw error
        }
    }
}
