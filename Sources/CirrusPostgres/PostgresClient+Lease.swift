import NIOCore
import PostgresNIO
import Synchronization

/// No pooled connection was free or could be made within the storage's lease timeout (the
/// server is down, or every connection is busy for that long).
struct PostgresLeaseTimeout: Error, CustomStringConvertible {
    var timeout: Duration

    var description: String { "no PostgreSQL connection within \(timeout)" }
}

/// The leased connection closed (the server ended the session, or the client closed it after
/// a failure) before the work on it finished.
struct PostgresConnectionClosed: Error, CustomStringConvertible {
    var description: String { "the connection closed while in use" }
}

extension PostgresClient {
    /// Runs `body` on a pooled connection, or throws ``PostgresLeaseTimeout`` when none is
    /// leased within `timeout`, or ``PostgresConnectionClosed`` when the connection closes
    /// before `body` returned.
    ///
    /// While the server cannot be reached the pool keeps a request waiting, and fails it only
    /// after it has failed to connect for a minute: a caller would hang that long. Here the
    /// lease is taken by a task of its own that hands the connection over and holds it until
    /// `body` returned; when the timeout comes first, that task is cancelled (which withdraws
    /// the request) and not waited for: a request the pool still answers later is released at
    /// once. Once leased, `body` runs without a deadline, until it returns or the connection
    /// closes (``PostgresConnection/untilClosed(_:)``).
    func withConnection<Result: Sendable>(
        leaseTimeout timeout: Duration, _ body: @escaping @Sendable (PostgresConnection) async throws -> Result
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
            return try await connection.untilClosed(body)
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

extension PostgresConnection {
    /// Runs `body` with this connection and returns what it returns, or throws
    /// ``PostgresConnectionClosed`` as soon as the connection closes first.
    ///
    /// A statement sent on a connection whose channel has closed is never answered:
    /// postgres-nio (1.33.2) writes each statement into the channel without a write promise,
    /// and once the channel closed and NIO removed its handlers, that write fails at the head
    /// of the pipeline with no one to tell, and the statement's own promise is never completed.
    /// The server ends every session when it restarts (`admin_shutdown`), so a transaction
    /// between two statements then would wait forever on its next one (and its database's
    /// write queue behind it). Here `body` runs in a task of its own, watched by the channel's
    /// close: when the close comes first, the caller gets the error at once and `body`'s task
    /// is left to end by itself (a statement it still sends fails or never returns; nothing it
    /// does is committed, as the server rolled the session's transaction back). Cancelling the
    /// caller cancels `body`'s task.
    func untilClosed<Result: Sendable>(
        _ body: @escaping @Sendable (PostgresConnection) async throws -> Result
    ) async throws -> Result {
        guard !isClosed else { throw PostgresConnectionClosed() }
        let outcome = FirstOutcome<Result>()
        let work = Task {
            do {
                outcome.resume(with: .success(try await body(self)))
            } catch {
                outcome.resume(with: .failure(error))
            }
        }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                outcome.wait(continuation)
                closeFuture.whenComplete { _ in outcome.resume(with: .failure(PostgresConnectionClosed())) }
            }
        } onCancel: {
            work.cancel()
        }
    }
}

/// The first of several outcomes of one piece of work (its result, or its connection's
/// close), handed to the one caller waiting for it; the later ones are dropped.
private final class FirstOutcome<Value: Sendable>: Sendable {
    private enum State {
        case pending
        case waiting(CheckedContinuation<Value, any Error>)
        case arrived(Result<Value, any Error>)
        case delivered
    }

    private let state = Mutex(State.pending)

    /// Sets the caller's continuation, resumed at once when the outcome already arrived.
    func wait(_ continuation: CheckedContinuation<Value, any Error>) {
        let arrived: Result<Value, any Error>? = state.withLock { state in
            switch state {
            case .pending:
                state = .waiting(continuation)
                return nil
            case .arrived(let result):
                state = .delivered
                return result
            case .waiting, .delivered:
                return nil
            }
        }
        if let arrived { continuation.resume(with: arrived) }
    }

    /// Hands `result` over unless an outcome came first.
    func resume(with result: Result<Value, any Error>) {
        let waiting: CheckedContinuation<Value, any Error>? = state.withLock { state in
            switch state {
            case .pending:
                state = .arrived(result)
                return nil
            case .waiting(let continuation):
                state = .delivered
                return continuation
            case .arrived, .delivered:
                return nil
            }
        }
        waiting?.resume(with: result)
    }
}
