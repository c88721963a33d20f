import CirrusWire

/// Runs operations: the server hands it every `Open` of an authenticated caller, on a task of
/// its own, with an ``OperationStream`` to send the operation's callbacks through.
///
/// For example, an executor that answers one event and succeeds:
/// ```swift
/// struct Echo: OperationExecutor {
///     func run(_ open: Wire.Open, caller: ClientIdentity, stream: OperationStream) async -> OperationCompletion {
///         try? await stream.emit(.fetchRecords(Wire.FetchRecordsEvent()))
///         return .success()
///     }
/// }
/// ```
public protocol OperationExecutor: Sendable {
    /// Runs `open` to its end. Events go out through `stream` (which waits for the client's
    /// flow-control credit); the returned completion becomes the stream's `Complete`. When the
    /// client cancels or disconnects, the task running this is cancelled and `emit` throws.
    ///
    /// `nonisolated(nonsending)`: it runs where its caller runs, the operation's own task (on
    /// the connection's event loop for a small save, on the pool otherwise), without a hop to
    /// the generic executor on entry and after each await, each a `swift_task_switch` that
    /// looks up the task's executor preference under its status lock. A conformer's plain
    /// `async` method still satisfies it.
    nonisolated(nonsending) func run(
        _ open: Wire.Open, caller: ClientIdentity, stream: OperationStream
    ) async -> OperationCompletion

    /// Whether this executor runs `request`'s kind. A kind it does not run is refused on its
    /// stream by ``run(_:caller:stream:)`` and never registered as a long-lived operation.
    func runs(_ request: Wire.Open.Request) -> Bool

    /// Whether `caller` may still follow (resume, replay, look up) the long-lived operation
    /// `open` they started: an executor whose access can change after the operation started
    /// (a participant removed from a share) says no, and the caller is answered as for an
    /// operation that does not exist. `journaled` reads every event the operation journaled,
    /// for an executor that must see what the operation revealed.
    ///
    /// - throws: what `journaled` throws.
    func mayFollow(
        _ open: Wire.Open, caller: ClientIdentity, journaled: () async throws -> [Wire.Event.Payload]
    ) async throws -> Bool
}

extension OperationExecutor {
    /// Runs every kind unless the executor says otherwise.
    public func runs(_ request: Wire.Open.Request) -> Bool { true }

    /// Whoever started an operation may follow it unless the executor says otherwise.
    public func mayFollow(
        _ open: Wire.Open, caller: ClientIdentity, journaled: () async throws -> [Wire.Event.Payload]
    ) async throws -> Bool { true }
}

/// How an operation ended: its final result (for kinds whose completion carries data) or its
/// error.
public struct OperationCompletion: Sendable, Hashable {
    public var result: Wire.Complete.Result?
    public var error: Wire.OperationError?

    public init(result: Wire.Complete.Result? = nil, error: Wire.OperationError? = nil) {
        self.result = result
        self.error = error
    }

    public static func success(_ result: Wire.Complete.Result? = nil) -> OperationCompletion {
        OperationCompletion(result: result)
    }

    public static func failure(_ code: Wire.ErrorCode, _ message: String) -> OperationCompletion {
        OperationCompletion(error: Wire.OperationError(code: code, message: message))
    }
}

/// The executor of a server that runs no operations: every `Open` is refused on its stream.
public struct NoOperations: OperationExecutor {
    public init() {}

    public func runs(_ request: Wire.Open.Request) -> Bool { false }

    public func run(_ open: Wire.Open, caller: ClientIdentity, stream: OperationStream) async -> OperationCompletion {
        .failure(.serverRejectedRequest, "this server runs no operations")
    }
}
