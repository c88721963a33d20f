@testable import CirrusServer
import CirrusPostgres
import CirrusStore
import CirrusTestSupport
import CirrusWire
import NIOConcurrencyHelpers
import Foundation
import Testing

/// The default zone of alice's private database as the store names it.
let alicesZone = Wire.RecordZoneID(zoneName: "_defaultZone", ownerName: "_alice")
let alicesDatabase = DatabaseKey.private(container: container, user: "_alice")

/// A long-lived save of every record of its `modifyRecords` request, `chunk` records per
/// journaled modify, continued after its checkpoint's item count as the server's own executor
/// does after a restart (PostgreSQL is not yet a whole `RecordStorage`, so the server's
/// executor cannot run on it). With a `gate`, it waits there once `pauseAt` items are saved.
struct ChunkedSaveExecutor: OperationExecutor {
    var chunk = 10
    var gate: Gate?
    var pauseAt = 0

    func run(_ open: Wire.Open, caller: ClientIdentity, stream: OperationStream) async -> OperationCompletion {
        guard case .modifyRecords(let request) = open.request, let run = stream.run else {
            return .failure(.invalidArguments, "only long-lived saves")
        }
        let records = request.recordsToSave
        var done = run.checkpoint?.items ?? 0
        do {
            while done < records.count {
                if let gate, done == pauseAt { try await gate.wait() }
                try Task.checkCancellation()
                let end = min(done + chunk, records.count)
                _ = try await run.modifyRecords(
                    RecordModification(saving: Array(records[done..<end])), in: alicesDatabase,
                    events: { result in
                        result.saves.map { save in
                            let outcome: Wire.ModifyRecordsPerRecordSave.Outcome =
                                switch save.result {
                                case .success(let record): .record(record)
                                case .failure(let failure):
                                    .error(Wire.OperationError(code: .internalError, message: failure.message))
                                }
                            let event = Wire.ModifyRecordsPerRecordSave(recordID: save.id, outcome: outcome)
                            return .modifyRecords(Wire.ModifyRecordsEvent(callback: .perRecordSave(event)))
                        }
                    },
                    checkpoint: LongLivedCheckpoint(items: end))
                done = end
            }
            return .success()
        } catch is CancellationError {
            return .failure(.operationCancelled, "cancelled")
        } catch let error as StoreError {
            return OperationCompletion(error: error.operationError)
        } catch {
            return .failure(.internalError, "\(error)")
        }
    }
}

/// One `cirrusd` node in a test: its own storage on the shared database and its registry.
struct Node {
    let storage: PostgresStorage
    let registry: LongLivedOperations
    let executor: ChunkedSaveExecutor
    /// The shared database's name.
    let database: String
    let nodeID: String

    /// Leases a minute long: no stall of a loaded machine moves an operation before the test
    /// means it to (with 5 s leases, heartbeats that waited that long for a pooled connection
    /// lost them). A test plays a lease running out with ``expireLeases()``.
    static func leasing(
        _ node: String, lease: Duration = .seconds(60), heartbeat: Duration = .milliseconds(200),
        sweep: Duration = .milliseconds(200), poll: Duration = .milliseconds(50)
    ) -> LongLivedOperations.Leasing {
        LongLivedOperations.Leasing(
            nodeID: node, leaseDuration: lease, heartbeatInterval: heartbeat, sweepInterval: sweep,
            journalPollInterval: poll)
    }

    /// - parameter hearsSignals: false for a node that never hears the journal's signals (as
    ///   when every `NOTIFY` is lost): it learns only from its polls and heartbeats.
    /// - parameter pause: when the test pauses it, the node's heartbeats stop renewing its
    ///   leases (see ``HeartbeatPause``).
    static func start(
        _ url: PostgresURL, _ leasing: LongLivedOperations.Leasing, _ executor: ChunkedSaveExecutor, hearsSignals: Bool = true,
        pause: HeartbeatPause? = nil
    ) async throws -> Node {
        let storage = try await PostgresStorage(url: url, maximumConnections: 4)
        let registry = LongLivedOperations(
            journal: NodeJournal(base: storage, hearsSignals: hearsSignals, pause: pause), executor: executor,
            retentionSeconds: LongLivedOperations.defaultRetentionSeconds, clock: SQLiteStorage.systemClock,
            leasing: leasing, logger: .init(label: "test.\(leasing.nodeID)"), afterRegistration: { _ in })
        try await registry.resumeUnfinished()
        return Node(storage: storage, registry: registry, executor: executor, database: url.database, nodeID: leasing.nodeID)
    }

    /// Ends every lease this node holds now, as time running out would: the other node's sweep
    /// takes the operations over. Call it once the node no longer renews them (dead or paused).
    func expireLeases() throws {
        _ = try TemporaryPostgres.shared().psql(
            "UPDATE long_lived_operations SET lease_expiry_ns = 0 WHERE lease_node = '\(nodeID)'", database: database)
    }

    func stop() async {
        await registry.shutdown()
        await storage.close()
    }

    /// Serves this node's registry for the length of `body`.
    func serving<R>(_ body: (Int) async throws -> R) async throws -> R {
        try await withServer(configure: {
            $0.executor = executor
            $0.longLivedOperations = registry
        }) { _, port in
            try await body(port)
        }
    }
}

/// Two nodes on one PostgreSQL database, for the length of `body`; both stop at its end. The
/// nodes named in `deaf` hear no signal of the journal; `pausing` pauses node a's heartbeats
/// when the test says so.
func withTwoNodes(
    a: (LongLivedOperations.Leasing, ChunkedSaveExecutor), b: (LongLivedOperations.Leasing, ChunkedSaveExecutor),
    deaf: Set<String> = [], pausing: HeartbeatPause? = nil, _ body: (Node, Node) async throws -> Void
) async throws {
    let server = try TemporaryPostgres.shared()
    let url = try PostgresURL(server.createDatabase())
    defer { _ = try? server.psql("DROP DATABASE IF EXISTS \(url.database) WITH (FORCE)") }
    let first = try await Node.start(url, a.0, a.1, hearsSignals: !deaf.contains(a.0.nodeID), pause: pausing)
    let second: Node
    do {
        second = try await Node.start(url, b.0, b.1, hearsSignals: !deaf.contains(b.0.nodeID))
    } catch {
        await first.stop()
        throw error
    }
    do {
        try await body(first, second)
    } catch {
        await first.stop()
        await second.stop()
        throw error
    }
    await first.stop()
    await second.stop()
}

/// A node's heartbeats as a test holds them: they renew the node's leases until ``pause()``,
/// then renew none while the node goes on believing it holds them, as a process paused past its
/// leases would (its heartbeat task does not run, and nothing tells it the lease is gone).
final class HeartbeatPause: Sendable {
    private let state = NIOLockedValueBox((isPaused: false, renewing: 0))

    /// Pauses the heartbeats; returns once no renewal is under way, so none renews a lease after.
    func pause() async throws {
        state.withLockedValue { $0.isPaused = true }
        try await eventually("the renewals under way to end") { state.withLockedValue { $0.renewing == 0 } }
    }

    /// Renews through `renew`, unless paused: then it renews nothing and says all were renewed.
    func renewing(
        _ keys: [LongLivedOperationKey], _ renew: () async throws -> Set<LongLivedOperationKey>
    ) async throws -> Set<LongLivedOperationKey> {
        let isPaused = state.withLockedValue { state in
            if !state.isPaused { state.renewing += 1 }
            return state.isPaused
        }
        if isPaused { return Set(keys) }
        defer { state.withLockedValue { $0.renewing -= 1 } }
        return try await renew()
    }
}

/// A node's journal in these tests: its storage, deaf to the journal's signals unless it
/// `hearsSignals` (a node that lost every `NOTIFY` learns of other nodes' appends and
/// cancellations only from its polls and heartbeats), its lease renewals held by `pause`.
struct NodeJournal: ForwardingJournal {
    let base: PostgresStorage
    var hearsSignals = true
    var pause: HeartbeatPause?

    func observeLongLivedOperations(_ observer: @escaping @Sendable (LongLivedOperationSignal) -> Void) {
        if hearsSignals { base.observeLongLivedOperations(observer) }
    }

    func renewLongLivedLeases(_ keys: [LongLivedOperationKey], lease: LongLivedLease) async throws -> Set<LongLivedOperationKey> {
        guard let pause else { return try await base.renewLongLivedLeases(keys, lease: lease) }
        return try await pause.renewing(keys) { try await base.renewLongLivedLeases(keys, lease: lease) }
    }
}
