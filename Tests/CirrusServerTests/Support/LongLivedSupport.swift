@testable import CirrusServer
import CirrusStore
import CirrusWire
import Foundation
import NIOConcurrencyHelpers
import Testing

/// A clock a test moves by hand.
final class ManualClock: Sendable {
    private let now = NIOLockedValueBox(Wire.Timestamp(seconds: 1_700_000_000, nanos: 0))

    var read: @Sendable () -> Wire.Timestamp { { [self] in self.now.withLockedValue { $0 } } }

    func advance(seconds: Int64) {
        self.now.withLockedValue { $0.seconds += seconds }
    }
}

/// A gate tasks wait at until the test opens it. Waiting is cancellable.
final class Gate: Sendable {
    private let state = NIOLockedValueBox((isOpen: false, waiting: 0))

    func open() { self.state.withLockedValue { $0.isOpen = true } }

    var waiting: Int { self.state.withLockedValue { $0.waiting } }

    /// Waits even when the waiting task is cancelled: a write the server cannot take back
    /// (a durable registration) that a closed connection does not cut short.
    func waitThroughCancellation() async {
        await Task.detached { try? await self.wait() }.value
    }

    func wait() async throws {
        self.state.withLockedValue { $0.waiting += 1 }
        defer { self.state.withLockedValue { $0.waiting -= 1 } }
        while !self.state.withLockedValue({ $0.isOpen }) {
            try await Task.sleep(for: .milliseconds(1))
        }
    }
}

/// An executor whose operations emit `count` fetch-records events named e1, e2 …, waiting at
/// `gate` after event `pauseAfter`: a long-lived operation the test holds in the middle.
struct SteppedExecutor: OperationExecutor {
    let count: Int
    let pauseAfter: Int
    let gate: Gate

    func run(_ open: Wire.Open, caller: ClientIdentity, stream: OperationStream) async -> OperationCompletion {
        do {
            for index in 1...count {
                let outcome = Wire.RecordOutcome(recordID: recordID("e\(index)"))
                try await stream.emit(.fetchRecords(Wire.FetchRecordsEvent(callback: .perRecordResult(outcome))))
                if index == pauseAfter { try await gate.wait() }
            }
            return .success()
        } catch {
            return .failure(.operationCancelled, "cancelled")
        }
    }
}

/// The name a stepped event carries.
func steppedName(_ event: Wire.Event) -> String? {
    if case .fetchRecords(let payload) = event.payload, case .perRecordResult(let outcome) = payload.callback {
        return outcome.recordID?.recordName
    }
    return nil
}

/// A server with SQLite storage and long-lived operations, in a temporary directory.
struct LongLivedHarness {
    let storage: SQLiteStorage
    let registry: LongLivedOperations
    let server: CirrusServer
    let port: Int
}

func withLongLivedServer(
    directory: String? = nil,
    executor: (@Sendable (SQLiteStorage) -> any OperationExecutor)? = nil,
    journal: (@Sendable (SQLiteStorage) -> any OperationJournal)? = nil,
    retentionSeconds: Int64 = LongLivedOperations.defaultRetentionSeconds,
    clock: @escaping @Sendable () -> Wire.Timestamp = SQLiteStorage.systemClock,
    afterRegistration: @escaping @Sendable (LongLivedOperationKey) async -> Void = { _ in },
    _ body: (LongLivedHarness) async throws -> Void
) async throws {
    let owned = directory == nil
    let directory =
        directory ?? FileManager.default.temporaryDirectory.appendingPathComponent("cirrus-ll-\(UUID().uuidString)").path
    defer { if owned { try? FileManager.default.removeItem(atPath: directory) } }
    let storage = try SQLiteStorage(directory: directory)
    defer { try? storage.close() }
    let executor = executor?(storage) ?? StorageExecutor(storage: storage)
    let registry = LongLivedOperations(
        journal: journal?(storage) ?? storage, executor: executor, retentionSeconds: retentionSeconds, clock: clock,
        logger: .init(label: "test"), afterRegistration: afterRegistration)
    try await registry.resumeUnfinished()
    do {
        try await withServer(configure: {
            $0.executor = executor
            $0.longLivedOperations = registry
        }) { server, port in
            try await body(LongLivedHarness(storage: storage, registry: registry, server: server, port: port))
        }
    } catch {
        await registry.shutdown()
        throw error
    }
    await registry.shutdown()
}

/// What one stream of a long-lived operation delivered.
struct Followed {
    var persisted = false
    var events: [Wire.Event] = []
    var complete: Wire.Complete?
}

extension TestClient {
    /// Opens `request` as a long-lived operation on `streamID`.
    func openLongLived(
        _ request: Wire.Open.Request, operationID: String, streamID: UInt64, window: UInt32 = 500,
        scope: Wire.DatabaseScope = .private
    ) async throws {
        let open = Wire.Open(
            operationID: operationID,
            databaseScope: scope,
            containerIdentifier: container,
            configuration: Wire.OperationConfiguration(isLongLived: true),
            initialWindow: window,
            request: request
        )
        try await self.send(Wire.Frame(streamID: streamID, kind: .open(open)))
    }

    func resume(_ operationID: String, after lastSeq: UInt64, streamID: UInt64, window: UInt32 = 500) async throws {
        let resume = Wire.Resume(operationID: operationID, lastSeq: lastSeq, initialWindow: window)
        try await self.send(Wire.Frame(streamID: streamID, kind: .resume(resume)))
    }

    /// Reads `streamID` until its `Complete` (or until `stopAfter` events), granting more credit
    /// as events arrive. Frames of other streams fail the test.
    func follow(streamID: UInt64, window: UInt32 = 500, stopAfter: Int? = nil) async throws -> Followed {
        var followed = Followed()
        var sinceGrant: UInt32 = 0
        while true {
            let frame = try await self.nextFrame()
            #expect(frame.streamID == streamID, "\(frame)")
            switch frame.kind {
            case .persisted:
                #expect(followed.events.isEmpty, "Persisted comes first")
                followed.persisted = true
            case .event(let event):
                followed.events.append(event)
                sinceGrant += 1
                if let stopAfter, followed.events.count >= stopAfter { return followed }
                if sinceGrant >= window / 2 {
                    try await self.send(Wire.Frame(streamID: streamID, kind: .window(Wire.Window(credit: sinceGrant))))
                    sinceGrant = 0
                }
            case .complete(let complete):
                followed.complete = complete
                return followed
            default:
                Issue.record("unexpected \(frame)")
            }
        }
    }

    /// Runs a container method and returns its `Complete`.
    func containerMethod(_ request: Wire.Open.Request, streamID: UInt64) async throws -> Wire.Complete {
        let open = Wire.Open(operationID: UUID().uuidString, containerIdentifier: container, request: request)
        try await self.send(Wire.Frame(streamID: streamID, kind: .open(open)))
        let frame = try await self.nextFrame()
        guard case .complete(let complete) = frame.kind else { throw UnexpectedFrame(frame: frame) }
        return complete
    }

    func listLongLived(streamID: UInt64) async throws -> [String] {
        let complete = try await self.containerMethod(
            .fetchLongLivedOperationIDs(Wire.FetchLongLivedOperationIDsRequest()), streamID: streamID)
        guard case .fetchLongLivedOperationIDs(let result) = complete.result else {
            Issue.record("no list in \(complete)")
            return []
        }
        return result.operationIDs
    }
}

/// Checks that `events` are seqs `first`, `first + 1` … with no gap or repeat.
func expectContiguous(_ events: [Wire.Event], from first: UInt64 = 1, sourceLocation: SourceLocation = #_sourceLocation) {
    for (offset, event) in events.enumerated() where event.seq != first + UInt64(offset) {
        Issue.record("event \(offset) has seq \(event.seq), expected \(first + UInt64(offset))", sourceLocation: sourceLocation)
        return
    }
}

func savedRecordOf(_ event: Wire.Event) -> Wire.Record? {
    if case .modifyRecords(let payload) = event.payload, case .perRecordSave(let save) = payload.callback,
        case .record(let record) = save.outcome
    {
        return record
    }
    return nil
}

/// Holds the `pauseAt`-th call of `pass()` at `gate`; the others go through.
struct NthCallGate: Sendable {
    let pauseAt: Int
    let gate: Gate
    private let calls = NIOLockedValueBox(0)

    init(pauseAt: Int, gate: Gate) {
        self.pauseAt = pauseAt
        self.gate = gate
    }

    func pass() async throws {
        let count = calls.withLockedValue { count in
            count += 1
            return count
        }
        if count == pauseAt { try await gate.wait() }
    }
}

/// A journal that holds the `pauseAt`-th event append at `gate`: a long-lived operation of the
/// real executor stopped at a known point.
struct GatedJournal: ForwardingJournal {
    let base: SQLiteStorage
    private let appends: NthCallGate

    init(base: SQLiteStorage, pauseAt: Int, gate: Gate) {
        self.base = base
        self.appends = NthCallGate(pauseAt: pauseAt, gate: gate)
    }

    func appendLongLivedEvents(
        _ payloads: [Wire.Event.Payload], to key: LongLivedOperationKey, checkpoint: [UInt8]?, by node: String?
    ) async throws -> [Wire.Event] {
        try await appends.pass()
        return try await base.appendLongLivedEvents(payloads, to: key, checkpoint: checkpoint, by: node)
    }
}

/// A journal that holds the `pauseAt`-th journaled modify-records chunk at `gate`, before it
/// writes anything: a long-lived modify stopped between two chunks.
struct GatedModifyJournal: ForwardingJournal {
    let base: SQLiteStorage
    private let chunks: NthCallGate

    init(base: SQLiteStorage, pauseAt: Int, gate: Gate) {
        self.base = base
        self.chunks = NthCallGate(pauseAt: pauseAt, gate: gate)
    }

    func modifyRecords(
        _ modification: RecordModification, in database: DatabaseKey, by user: String,
        journaling: ModificationJournaling
    ) async throws -> (result: RecordModificationResult, events: [Wire.Event]) {
        try await chunks.pass()
        return try await base.modifyRecords(modification, in: database, by: user, journaling: journaling)
    }
}
