import CirrusWire
import NIOConcurrencyHelpers

/// The long-lived operations of a fake server: each one's `Open` and the events it produced.
/// It answers the container requests (list, fetch one) and `Resume` as the protocol says:
/// `Persisted`, the events after `last_seq`, then `Complete`. Operations opened by the client
/// with `isLongLived` are registered as they arrive (events from `events(for:)`).
final class LongLivedScript: Sendable {
    struct Operation: Sendable {
        var open: Wire.Open
        var payloads: [Wire.Event.Payload]
        var error: Wire.OperationError? = nil
        var result: Wire.Complete.Result? = nil
        /// Resumed streams send nothing after their replay (the operation is still running).
        var running = false
    }

    private let operations = NIOLockedValueBox<[String: Operation]>([:])
    private let order = NIOLockedValueBox<[String]>([])
    /// Events of a long-lived operation the client opens.
    private let events: @Sendable (Wire.Open) -> [Wire.Event.Payload]
    /// The answer to any other `Open`.
    private let fallback: @Sendable (Wire.Open, Int) -> FakeReply

    init(
        events: @escaping @Sendable (Wire.Open) -> [Wire.Event.Payload] = { _ in [] },
        fallback: @escaping @Sendable (Wire.Open, Int) -> FakeReply = { open, _ in EchoReplies.reply(open) }
    ) {
        self.events = events
        self.fallback = fallback
    }

    func add(_ operation: Operation) {
        self.operations.withLockedValue { $0[operation.open.operationID] = operation }
        self.order.withLockedValue { $0.append(operation.open.operationID) }
    }

    func remove(_ operationID: String) {
        self.operations.withLockedValue { $0[operationID] = nil }
        self.order.withLockedValue { $0.removeAll { $0 == operationID } }
    }

    func reply(_ open: Wire.Open, _ connection: Int) -> FakeReply {
        switch open.request {
        case .fetchLongLivedOperationIDs:
            let ids = self.order.withLockedValue { $0 }
            return FakeReply(result: .fetchLongLivedOperationIDs(Wire.FetchLongLivedOperationIDsResult(operationIDs: ids)))
        case .fetchLongLivedOperation(let request):
            guard let operation = self.operations.withLockedValue({ $0[request.operationID] }) else {
                return FakeReply(error: Wire.OperationError(code: .unknownOperation, message: "no operation \(request.operationID)"))
            }
            var original = operation.open
            original.initialWindow = 0
            let info = Wire.LongLivedOperationInfo(
                operationID: request.operationID,
                open: original,
                status: operation.running ? .running : .completed,
                lastSeq: UInt64(operation.payloads.count)
            )
            return FakeReply(result: .fetchLongLivedOperation(info))
        default:
            guard open.configuration?.isLongLived == true else { return self.fallback(open, connection) }
            let payloads = self.events(open)
            self.add(Operation(open: open, payloads: payloads))
            return FakeReply(payloads: payloads, persisted: true)
        }
    }

    func resume(_ resume: Wire.Resume, _ connection: Int) -> FakeReply {
        guard let operation = self.operations.withLockedValue({ $0[resume.operationID] }) else {
            return FakeReply(error: Wire.OperationError(code: .unknownOperation, message: "no operation \(resume.operationID)"))
        }
        let start = Int(min(resume.lastSeq, UInt64(operation.payloads.count)))
        return FakeReply(
            payloads: Array(operation.payloads[start...]),
            error: operation.error,
            result: operation.result,
            hang: operation.running,
            persisted: true,
            startSeq: UInt64(start)
        )
    }
}
