import CirrusStore
import CirrusTestSupport
import CirrusWire
import Dispatch
import PostgresNIO
import Synchronization
import Testing

@testable import CirrusPostgres

/// The PostgreSQL server restarts or stops while a node serves: calls fail promptly with the
/// retryable `.unavailable` (the client sees `serviceUnavailable` with a retry-after), the same
/// storage serves again once the server is back, and nothing acknowledged is lost or half
/// written. Each test runs a server of its own (the process's shared one is never stopped).
@Suite("PostgreSQL restarts")
struct PostgresRestartTests {
    private static let zone = zoneID("_defaultZone")

    private func note(_ name: String) -> Wire.Record {
        Wire.Record(
            recordID: Wire.RecordID(recordName: name, zoneID: Self.zone), recordType: "Note",
            fields: [Wire.RecordField(key: "v", value: Wire.FieldValue(kind: .int64Value(1)))])
    }

    /// Runs a blocking server command (`pg_ctl`) off the cooperative threads.
    private func offloaded(_ work: @escaping @Sendable () throws -> Void) async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            DispatchQueue.global().async { continuation.resume(with: Result { try work() }) }
        }
    }

    /// What the writers and readers saw.
    private final class Outcomes: Sendable {
        private let state = Mutex<(acknowledged: [String], failures: [String: Int], other: [String])>(([], [:], []))

        var acknowledged: [String] { state.withLock { $0.acknowledged } }
        var failures: [String: Int] { state.withLock { $0.failures } }
        /// Failures that are not `.unavailable`, described.
        var other: [String] { state.withLock { $0.other } }

        func acknowledge(_ name: String) { state.withLock { $0.acknowledged.append(name) } }

        func fail(_ error: any Error) {
            state.withLock { state in
                if let error = error as? StoreError, error.code == .unavailable {
                    state.failures["\(error.code)", default: 0] += 1
                } else {
                    state.other.append("\(error)")
                }
            }
        }
    }

    /// Tells the load to end.
    private final class StopFlag: Sendable {
        private let value = Atomic<Bool>(false)
        var isSet: Bool { value.load(ordering: .relaxed) }
        func set() { value.store(true, ordering: .relaxed) }
    }

    /// Every record of the zone's change feed, in feed order, with its sequence.
    private func feed(_ storage: PostgresStorage) async throws -> [(name: String, seq: Int64)] {
        var entries: [(name: String, seq: Int64)] = []
        var since: Int64 = 0
        while true {
            let batch = try await storage.recordChanges(in: Self.zone, of: alice, since: since, limit: 200, desiredKeys: nil)
            for record in batch.changed {
                let seq = record.recordChangeTag.split(separator: "-").last.flatMap { Int64($0, radix: 36) } ?? -1
                entries.append((record.recordID?.recordName ?? "", seq))
            }
            since = batch.lastSeq
            if !batch.moreComing { break }
        }
        return entries
    }

    @Test func aRestartUnderLoadFailsCallsRetryablyAndLosesNothingAcknowledged() async throws {
        let server = try TemporaryPostgres()
        defer { server.stop() }
        let url = try PostgresURL(server.createDatabase())
        let storage = try await PostgresStorage(url: url, maximumConnections: 6, leaseTimeout: .seconds(3))
        let outcomes = Outcomes()
        let reads = Outcomes()
        let stop = StopFlag()
        let writers = 8
        let perWriter = 300
        let listens = storage.listener.listens

        try await withThrowingTaskGroup(of: Void.self) { group in
            // However this ends, the load stops (a failed wait would otherwise wait for it).
            defer { stop.set() }
            // 8 writers, each saving one record at a time until told to stop (or 300 each).
            for writer in 0..<writers {
                group.addTask {
                    for index in 0..<perWriter where !stop.isSet {
                        let name = "w\(writer)-\(index)"
                        do {
                            let result = try await storage.modifyRecords(
                                RecordModification(saving: [note(name)]), in: alice, by: "_alice")
                            if let failure = result.saves.first?.failure {
                                outcomes.fail(StoreError(.storageFailure, "\(name) failed as an item: \(failure)"))
                            } else {
                                outcomes.acknowledge(name)
                            }
                        } catch {
                            outcomes.fail(error)
                            try await Task.sleep(for: .milliseconds(20))
                        }
                    }
                }
            }
            // A reader fetching what was acknowledged and reading the change feed.
            group.addTask {
                while !stop.isSet {
                    do {
                        let names = outcomes.acknowledged.suffix(5)
                        let ids = names.map { Wire.RecordID(recordName: $0, zoneID: Self.zone) }
                        _ = try await storage.fetchRecords(ids, desiredKeys: nil, in: alice)
                        _ = try await storage.recordChanges(in: Self.zone, of: alice, since: 0, limit: 50, desiredKeys: nil)
                    } catch {
                        reads.fail(error)
                        try await Task.sleep(for: .milliseconds(20))
                    }
                }
            }
            // A read in flight when the server goes down: it must fail, and retryably.
            let (sleeping, sleeps) = AsyncStream<Void>.makeStream()
            group.addTask {
                do {
                    try await storage.connection { connection in
                        sleeps.yield()
                        let rows = try await connection.query("SELECT pg_sleep(600)", logger: storage.logger)
                        for try await _ in rows {}
                    }
                    reads.fail(StoreError(.storageFailure, "pg_sleep(600) returned across a restart"))
                } catch {
                    reads.fail(error)
                }
            }
            for await _ in sleeping { break }

            try await eventually(timeout: .seconds(120), "saves before the restart") { outcomes.acknowledged.count >= 40 }
            try await offloaded { try server.restartServer() }
            let before = outcomes.acknowledged.count
            // The same storage serves again: saves are acknowledged after the restart.
            try await eventually(timeout: .seconds(120), "saves after the restart", every: .milliseconds(20)) {
                outcomes.acknowledged.count >= before + 40
            }
            try await eventually(timeout: .seconds(60), "the listener listens again", every: .milliseconds(20)) {
                storage.listener.listens > listens
            }
            stop.set()
            try await group.waitForAll()
        }

        #expect(outcomes.other.isEmpty, "failures that are not retryable: \(outcomes.other.prefix(5))")
        #expect(reads.other.isEmpty, "read failures that are not retryable: \(reads.other.prefix(5))")
        // At least the read that was in flight failed, retryably.
        #expect(reads.failures["unavailable", default: 0] >= 1)

        // Nothing acknowledged is lost; the feed holds every record once, at sequences 1 ... n.
        let acknowledged = outcomes.acknowledged
        let entries = try await feed(storage)
        let names = entries.map(\.name)
        #expect(Set(names).count == names.count, "a record appears twice in the change feed")
        let sequences: [Int64] = entries.map(\.seq)
        let expectedSequences: [Int64] = (0..<entries.count).map { (index: Int) -> Int64 in Int64(index) + 1 }
        #expect(sequences == expectedSequences, "sequences with gaps or repeats")
        #expect(Set(acknowledged).isSubset(of: Set(names)), "acknowledged saves missing from the feed")
        // A save that failed is there whole or not at all: every stored record is in the feed.
        #expect(try await storage.rowCount(of: "records") == entries.count)
        // Each committed write of the zone moved it along the database feed (saves that shared
        // statements, once together); a rolled-back one did not.
        let head = try await storage.zoneChanges(in: alice, since: 0, limit: 10).headSeq
        #expect(head >= 1 && head <= Int64(entries.count), "\(head)")
        for chunk in stride(from: 0, to: acknowledged.count, by: 200) {
            let ids = acknowledged[chunk..<min(chunk + 200, acknowledged.count)].map {
                Wire.RecordID(recordName: $0, zoneID: Self.zone)
            }
            let fetched = try await storage.fetchRecords(ids, desiredKeys: nil, in: alice)
            let missing = fetched.filter { (try? $0.result.get()) == nil }
            #expect(missing.isEmpty, "\(missing.count) acknowledged records not fetchable")
        }
        await storage.close()
    }

    @Test func aCallWhileTheServerIsStoppedFailsRetryablyAndSucceedsOnceItIsBack() async throws {
        let server = try TemporaryPostgres()
        defer { server.stop() }
        let url = try PostgresURL(server.createDatabase())
        let storage = try await PostgresStorage(url: url, maximumConnections: 4, leaseTimeout: .seconds(3))
        let saved = try await storage.modifyRecords(RecordModification(saving: [note("before")]), in: alice, by: "_alice")
        #expect(!saved.hasFailures)

        try await offloaded { try server.stopServer() }
        // Reads and saves fail with the retryable code, within a bound (generous: the lease
        // timeout is 3 s), never hang.
        let clock = ContinuousClock()
        for attempt in 0..<3 {
            let start = clock.now
            let error = await #expect(throws: StoreError.self, "attempt \(attempt)") {
                _ = try await storage.modifyRecords(RecordModification(saving: [note("down\(attempt)")]), in: alice, by: "_alice")
            }
            #expect(error?.code == .unavailable, "\(String(describing: error))")
            let fetchError = await #expect(throws: StoreError.self) {
                _ = try await storage.fetchRecords(
                    [Wire.RecordID(recordName: "before", zoneID: Self.zone)], desiredKeys: nil, in: alice)
            }
            #expect(fetchError?.code == .unavailable, "\(String(describing: fetchError))")
            let feedError = await #expect(throws: StoreError.self) {
                _ = try await storage.recordChanges(in: Self.zone, of: alice, since: 0, limit: 10, desiredKeys: nil)
            }
            #expect(feedError?.code == .unavailable, "\(String(describing: feedError))")
            #expect(clock.now - start < .seconds(45), "the calls failed within a bound")
        }

        try await offloaded { try server.startServer() }
        // The same storage serves again, without being reopened.
        var after: RecordModificationResult?
        try await eventually(timeout: .seconds(120), "a save after the server is back", every: .milliseconds(100)) {
            do {
                after = try await storage.modifyRecords(RecordModification(saving: [note("after")]), in: alice, by: "_alice")
                return true
            } catch let error as StoreError where error.code == .unavailable {
                return false
            }
        }
        #expect(after?.hasFailures == false)
        // The saves that failed while it was down left nothing behind.
        let entries = try await feed(storage)
        #expect(entries.map(\.name) == ["before", "after"])
        #expect(entries.map(\.seq) == [1, 2])
        await storage.close()
    }
}
