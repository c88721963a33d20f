import CirrusPostgres
import CirrusWire
import Foundation
import Synchronization
import Testing

@testable import CirrusStore

/// Throughput checks; run with `CIRRUS_STORE_BENCH=1 swift test --filter ThroughputTests`.
@Suite("Throughput", .enabled(if: ProcessInfo.processInfo.environment["CIRRUS_STORE_BENCH"] == "1"))
struct ThroughputTests {
    private func seconds(_ body: () async throws -> Void) async rethrows -> Double {
        let start = ContinuousClock.now
        try await body()
        let elapsed = ContinuousClock.now - start
        return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    }

    @Test func batchesOf400() async throws {
        try await withSyncStore { storage, engine in
            let batches = 50
            let time = try await seconds {
                for b in 0..<batches {
                    let records = (0..<400).map {
                        note("b\(b)r\($0)", [field("title", .stringValue("record \($0)")), field("n", .int64Value(Int64($0)))])
                    }
                    let result = try await storage.modifyRecords(RecordModification(saving: records), in: alice, by: "_alice")
                    #expect(!result.hasFailures)
                }
            }
            print("store (\(engine)): \(Int(Double(batches * 400) / time)) records/s in 400-record operations")
        }
    }

    /// Counts the write transactions of `storage` and the requests that shared them.
    private final class CommitCounter: Sendable {
        private let counts = Mutex((transactions: 0, jobs: 0, largest: 0))

        init(_ storage: any SyncStorageUnderTest) {
            let observe: @Sendable (WriteCommit) -> Void = { commit in
                self.counts.withLock {
                    $0 = ($0.transactions + 1, $0.jobs + commit.jobs, max($0.largest, commit.jobs))
                }
            }
            (storage as? SQLiteStorage)?.observeCommits(observe)
            (storage as? PostgresStorage)?.observeCommits(observe)
        }

        var summary: String {
            let counts = self.counts.withLock { $0 }
            return "\(counts.transactions) transactions, up to \(counts.largest) requests each"
        }
    }

    @Test func concurrentSingleSaves() async throws {
        try await withSyncStore { storage, engine in
            let commits = CommitCounter(storage)
            let tasks = 100
            let perTask = 30
            let time = try await seconds {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for t in 0..<tasks {
                        group.addTask {
                            for i in 0..<perTask {
                                let result = try await storage.modifyRecords(
                                    RecordModification(saving: [note("t\(t)i\(i)", [field("v", .int64Value(1))])]), in: alice, by: "_alice")
                                #expect(!result.hasFailures)
                            }
                        }
                    }
                    try await group.waitForAll()
                }
            }
            print(
                "store (\(engine)): \(Int(Double(tasks * perTask) / time)) single-record operations/s with \(tasks) in flight"
                    + " (\(commits.summary))")
        }
    }

    @Test func rawSQLiteBaseline() async throws {
        try await withSQLiteStore { storage, _ in
            try await storage.write(weight: 1) { db in
                try db.run(sql: "CREATE TABLE raw (id INTEGER PRIMARY KEY, zone INTEGER, name TEXT, data BLOB, UNIQUE (zone, name))")
            }
            let blob = [UInt8](repeating: 7, count: 120)
            let time = try await seconds {
                for b in 0..<50 {
                    try await storage.write(weight: 400) { db in
                        for i in 0..<400 {
                            try db.run(sql: "INSERT INTO raw (zone, name, data) VALUES (?, ?, ?)", arguments: [1, "b\(b)r\(i)", Data(blob)])
                        }
                    }
                }
            }
            print("store: raw SQLite baseline \(Int(20_000 / time)) rows/s in 400-row transactions")
        }
    }
}
