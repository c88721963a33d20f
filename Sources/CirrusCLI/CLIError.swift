import CirrusKit
import CirrusModel

/// The exit codes of `cirrus`, which scripts can rely on.
package enum CLIExitCode: Int32, Sendable, CaseIterable {
    /// Everything asked for was done.
    case success = 0
    /// The command ran but not everything succeeded: the server refused the operation or some
    /// of its items, rows were skipped (`--on-error skip`), a benchmark counted errors.
    case failure = 1
    /// Bad flags or arguments, or a file given on the command line that cannot be read.
    case usage = 2
    /// The server could not be reached or would not accept us: connection refused, TLS,
    /// certificates, authentication, timeouts.
    case connection = 3
    /// The input data is malformed (a bad row under `--on-error fail`).
    case badInput = 4
    /// What the command names does not exist: record, zone, long-lived operation, import state.
    case notFound = 5
    /// Interrupted by SIGINT (128 + 2, as shells report it).
    case interrupted = 130
}

/// An error `cirrus` reports as one line on stderr and turns into an exit code.
package struct CLIError: Error, Sendable, CustomStringConvertible {
    package let exitCode: CLIExitCode
    package let message: String

    package init(_ exitCode: CLIExitCode, _ message: String) {
        self.exitCode = exitCode
        self.message = message
    }

    package static func usage(_ message: String) -> CLIError { CLIError(.usage, message) }

    package var description: String { self.message }

    /// `error` as the CLI reports it: a `CKError` by its code (connection problems → 3,
    /// missing things → 5, anything else → 1), prefixed with `context`.
    package static func from(_ error: any Error, context: String? = nil) -> CLIError {
        if let error = error as? CLIError {
            return context.map { CLIError(error.exitCode, "\($0): \(error.message)") } ?? error
        }
        let prefix = context.map { "\($0): " } ?? ""
        guard let error = error as? CKError else {
            return CLIError(.failure, prefix + "\(error)")
        }
        return CLIError(exitCode(for: error.code), prefix + describe(error))
    }

    /// The exit code of a `CKError` code.
    package static func exitCode(for code: CKError.Code) -> CLIExitCode {
        switch code {
        case .networkFailure, .networkUnavailable, .notAuthenticated, .serviceUnavailable, .incompatibleVersion,
            .badContainer, .missingEntitlement, .accountTemporarilyUnavailable, .serverResponseLost:
            .connection
        case .unknownItem, .zoneNotFound, .userDeletedZone:
            .notFound
        default:
            .failure
        }
    }

    /// `code name: message` in one line.
    package static func describe(_ error: CKError) -> String {
        let message = (error.message ?? "").split(whereSeparator: \.isNewline).joined(separator: " ")
        return message.isEmpty ? error.code.description : "\(error.code.description): \(message)"
    }
}
