import CirrusWire
public import Logging

/// The operation a log line was written for: every line written while an operation runs —
/// by its executor, the storage, the long-lived runner — carries `operation`, `kind` and
/// `user`, and `stream` and `connection` when a client's stream runs it, without each of
/// those loggers being handed the fields.
///
/// The fields travel in a task-local value that ``metadataProvider`` reads when a line is
/// written; a process installs the provider once, when it bootstraps its log handler.
///
/// For example (as `cirrusd` does):
/// ```swift
/// LoggingSystem.bootstrap(
///     { label, provider in StreamLogHandler.standardError(label: label, metadataProvider: provider) },
///     metadataProvider: OperationLogContext.metadataProvider)
/// ```
public enum OperationLogContext {
    @TaskLocal static var metadata: Logger.Metadata = [:]

    /// Adds the running operation's fields to every line written on its tasks.
    public static let metadataProvider = Logger.MetadataProvider { OperationLogContext.metadata }

    /// Runs `body` (an operation) with `fields`, and only those, on its log lines: a task it
    /// starts that outlives the stream (a long-lived run) sets its own.
    static func withFields<T: Sendable>(
        _ fields: Logger.Metadata, _ body: () async -> T
    ) async -> T {
        await Self.$metadata.withValue(fields, operation: body)
    }

    /// The fields of `open` run for `user` (on `stream` when a client's stream runs it).
    static func fields(of open: Wire.Open, user: String, stream: UInt64? = nil) -> Logger.Metadata {
        var fields: Logger.Metadata = ["operation": "\(open.operationID)", "user": "\(user)"]
        if let kind = open.request?.metricLabel { fields["kind"] = "\(kind)" }
        if let stream { fields["stream"] = "\(stream)" }
        return fields
    }
}
