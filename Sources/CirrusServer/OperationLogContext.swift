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
    @TaskLocal static var current: OperationLogFields?

    /// Adds the running operation's fields to every line written on its tasks.
    public static let metadataProvider = Logger.MetadataProvider { OperationLogContext.current?.metadata ?? [:] }

    /// Runs `body` (an operation) with `fields`, and only those, on its log lines: a task it
    /// starts that outlives the stream (a long-lived run) sets its own.
    nonisolated(nonsending) static func withFields<T: Sendable>(
        _ fields: OperationLogFields, _ body: nonisolated(nonsending) () async -> T
    ) async -> T {
        await Self.$current.withValue(fields, operation: body)
    }

    /// The fields of `open` run for `user` (on `stream`, of a connection whose logger carries
    /// `connection`, when a client's stream runs it).
    static func fields(
        of open: Wire.Open, user: String, stream: UInt64? = nil, connection: Logger.Metadata = [:]
    ) -> OperationLogFields {
        OperationLogFields(
            operationID: open.operationID, user: user, kind: open.request?.metricLabel, stream: stream,
            connection: connection)
    }
}

/// One operation's log fields, kept as the values they come from and made into metadata only
/// when a line is written: most operations write none, and building the dictionary (and merging
/// the connection's into it) for each cost about 2 % of the server's CPU per one-record fetch.
struct OperationLogFields: Sendable {
    let operationID: String
    let user: String
    let kind: String?
    let stream: UInt64?
    /// The connection's own fields; the operation's win over them.
    let connection: Logger.Metadata

    var metadata: Logger.Metadata {
        var fields = self.connection
        fields["operation"] = .string(self.operationID)
        fields["user"] = .string(self.user)
        if let kind = self.kind { fields["kind"] = .string(kind) }
        if let stream = self.stream { fields["stream"] = "\(stream)" }
        return fields
    }
}
