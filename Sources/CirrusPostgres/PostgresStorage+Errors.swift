import CirrusStore
import NIOCore
import NIOPosix
import PostgresNIO
import _ConnectionPoolModule

// The one place CirrusPostgres turns what postgres-nio, its pool and NIO throw into
// ``StoreError``s: a server that cannot be reached now (restarting, stopped, the connection
// lost) is `.unavailable`, which a client tries again; everything else is the engine's own
// failure, `.storageFailure`.

extension PostgresStorage {
    /// A ``StoreError`` for what the server or the pool threw (the server's message, never
    /// the connection's password: the server does not send it back).
    static func storeError(_ error: any Error) -> StoreError {
        if let error = error as? StoreError { return error }
        if let transaction = error as? PostgresTransactionError,
            let cause = transaction.closureError ?? transaction.commitError ?? transaction.beginError
        {
            return storeError(cause)
        }
        if let reason = PostgresUnavailability.reason(error) {
            return StoreError(.unavailable, "PostgreSQL is unavailable: \(reason)")
        }
        if let error = error as? PSQLError {
            let message = error.serverInfo?[.message] ?? "\(error.code)"
            let state = error.serverInfo?[.sqlState].map { " (SQLSTATE \($0))" } ?? ""
            return StoreError(.storageFailure, "PostgreSQL: \(message)\(state)")
        }
        return StoreError(.storageFailure, "PostgreSQL: \(error)")
    }
}

/// Which failures mean the server cannot be reached now, rather than that it refused what
/// was asked.
enum PostgresUnavailability {
    /// The SQLSTATEs of a server shutting down or starting (class 57P: `admin_shutdown`,
    /// `crash_shutdown`, `cannot_connect_now`) or out of connection slots (`too_many_connections`);
    /// class 08 (connection exceptions) counts whole.
    static let sqlStates: Set<String> = ["57P01", "57P02", "57P03", "53300"]

    /// What the connection's failure was, or nil when `error` is not one.
    static func reason(_ error: any Error) -> String? {
        switch error {
        case let error as PSQLError:
            if error.code == .server {
                guard let state = error.serverInfo?[.sqlState], state.hasPrefix("08") || sqlStates.contains(state) else {
                    return nil
                }
                return "\(error.serverInfo?[.message] ?? "the server refused the session") (SQLSTATE \(state))"
            }
            let lost: [PSQLError.Code] = [
                .serverClosedConnection, .clientClosedConnection, .connectionError, .uncleanShutdown, .poolClosed,
            ]
            guard lost.contains(error.code) else { return nil }
            return error.underlying.map { "\(error.code) (\($0))" } ?? "\(error.code)"
        case let error as ConnectionPoolError:
            guard error == .connectionCreationCircuitBreakerTripped else { return nil }
            return "no connection could be made for a while"
        case let timeout as PostgresLeaseTimeout:
            return "no connection within \(timeout.timeout)"
        case let closed as PostgresConnectionClosed:
            return closed.description
        case is IOError, is NIOConnectionError, is ChannelError:
            return "\(error)"
        default:
            return nil
        }
    }
}
