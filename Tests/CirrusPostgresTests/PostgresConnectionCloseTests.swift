import CirrusStore
import CirrusTestSupport
import CirrusWire
import PostgresNIO
import Synchronization
import Testing

@testable import CirrusPostgres

/// A connection the server ends while a call holds it (as a restart ends every session): the
/// call fails with the retryable `.unavailable` instead of waiting forever on a statement the
/// closed connection never answers (postgres-nio drops a statement written after its channel
/// closed; ``PostgresConnection/untilClosed(_:)``).
@Suite("PostgreSQL connections ended mid-call")
struct PostgresConnectionCloseTests {
    /// What a call returned, once it did.
    private final class Outcome: Sendable {
        private let value = Mutex<Result<Void, any Error>?>(nil)

        var result: Result<Void, any Error>? { value.withLock { $0 } }

        func set(_ result: Result<Void, any Error>) { value.withLock { $0 = result } }
    }

    /// Ends `connection`'s session from another one, waits until the client saw the close,
    /// then sends a statement on it.
    private static func endSessionThenQuery(_ connection: PostgresConnection, on storage: PostgresStorage) async throws {
        let logger = storage.logger
        var pid: Int32 = 0
        for try await value in try await connection.query("SELECT pg_backend_pid()", logger: logger).decode(Int32.self) {
            pid = value
        }
        let ended = pid
        try await storage.connection { other in
            _ = try await other.query("SELECT pg_terminate_backend(\(ended))", logger: logger)
        }
        try await connection.closeFuture.get()
        _ = try await connection.query("SELECT 1", logger: logger)
    }

    /// Runs `call` in a task and waits (a minute at most) for it to return: a call that hangs
    /// fails the test rather than hanging it.
    private static func outcome(of call: @escaping @Sendable () async throws -> Void) async throws -> Result<Void, any Error> {
        let outcome = Outcome()
        Task {
            do {
                try await call()
                outcome.set(.success(()))
            } catch {
                outcome.set(.failure(error))
            }
        }
        try await eventually(timeout: .seconds(60), "the call returned", every: .milliseconds(20)) { outcome.result != nil }
        return try #require(outcome.result)
    }

    private static func expectUnavailable(_ result: Result<Void, any Error>) {
        switch result {
        case .success:
            Issue.record("a statement on an ended session succeeded")
        case .failure(let error):
            #expect((error as? StoreError)?.code == .unavailable, "\(error)")
        }
    }

    @Test func aReadWhoseSessionEndsFailsRetryably() async throws {
        try await withPostgresStore { storage in
            let result = try await Self.outcome {
                try await storage.connection { connection in try await Self.endSessionThenQuery(connection, on: storage) }
            }
            Self.expectUnavailable(result)
            // The pool serves again.
            let zones = try await storage.fetchAllZones(in: alice)
            #expect(zones.count <= 1)
        }
    }

    @Test func aWriteTransactionWhoseSessionEndsFailsRetryablyAndTheQueueGoesOn() async throws {
        try await withPostgresStore { storage in
            let result = try await Self.outcome {
                try await storage.write(in: alice, weight: 1) { connection in
                    try await Self.endSessionThenQuery(connection, on: storage)
                }
            }
            Self.expectUnavailable(result)
            // The database's write queue runs its next transaction.
            let note = Wire.Record(
                recordID: Wire.RecordID(recordName: "after", zoneID: zoneID("_defaultZone")), recordType: "Note",
                fields: [Wire.RecordField(key: "v", value: Wire.FieldValue(kind: .int64Value(1)))])
            let saved = try await storage.modifyRecords(RecordModification(saving: [note]), in: alice, by: "_alice")
            #expect(!saved.hasFailures)
        }
    }
}
