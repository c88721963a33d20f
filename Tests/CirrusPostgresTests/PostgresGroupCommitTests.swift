import CirrusStore
import CirrusTestSupport
import CirrusWire
import PostgresNIO
import Synchronization
import Testing

@testable import CirrusPostgres

/// Group commit on PostgreSQL (``PostgresWriteQueue``): concurrent writes into one database
/// share transactions, each learns its own outcome, and only after the commit.
@Suite("PostgreSQL group commit")
struct PostgresGroupCommitTests {
    private func note(_ name: String) -> Wire.Record {
        Wire.Record(
            recordID: Wire.RecordID(recordName: name, zoneID: zoneID("_defaultZone")), recordType: "Note",
            fields: [Wire.RecordField(key: "v", value: Wire.FieldValue(kind: .int64Value(1)))])
    }

    /// Runs `writes` while a first write of `alice`'s database holds its transaction open,
    /// and lets that one finish once all of them wait: they then share the next transaction.
    /// `inOrder`: each write starts once the one before waits, so they wait in index order.
    /// Their outcomes, by index.
    private func lineUp<T: Sendable>(
        _ count: Int, on storage: PostgresStorage, inOrder: Bool = false,
        _ write: @escaping @Sendable (Int) async throws -> T
    ) async throws -> [Int: Result<T, any Error>] {
        let (started, starting) = AsyncStream<Void>.makeStream()
        let (opened, gate) = AsyncStream<Void>.makeStream()
        defer { gate.finish() }
        async let first: Void = storage.write(in: alice, weight: 1) { _ in
            starting.yield()
            for await _ in opened {}
        }
        for await _ in started { break }
        let outcomes = try await withThrowingTaskGroup(of: (Int, Result<T, any Error>).self) { group in
            for index in 0..<count {
                group.addTask {
                    do { return (index, .success(try await write(index))) } catch { return (index, .failure(error)) }
                }
                if inOrder { try await waitUntil { storage.writes.pendingCount(in: alice) == index + 1 } }
            }
            try await waitUntil { storage.writes.pendingCount(in: alice) == count }
            gate.finish()
            return try await group.reduce(into: [:]) { $0[$1.0] = $1.1 }
        }
        try await first
        return outcomes
    }

    /// Polls `condition` every 10 ms for up to a minute.
    private func waitUntil(_ condition: () -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(60)
        while !condition() {
            guard ContinuousClock.now < deadline else {
                Issue.record("the writes never lined up")
                throw CancellationError()
            }
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    /// The transactions a storage ran, as it reports them.
    private final class Commits: Sendable {
        private let seen = Mutex<[WriteCommit]>([])
        var all: [WriteCommit] { seen.withLock { $0 } }
        func observe(_ storage: PostgresStorage) { storage.observeCommits { commit in self.seen.withLock { $0.append(commit) } } }
    }

    @Test func aJobTheServerRefusesRollsBackAloneAndTheOthersOfItsTransactionCommit() async throws {
        let url = try newDatabase()
        try await withPostgresStore(url) { storage in
            try await storage.connection { _ = try await $0.query("CREATE TABLE scratch (n integer PRIMARY KEY)", logger: storage.logger) }
            let commits = Commits()
            commits.observe(storage)
            // Even jobs save a record, odd ones insert a row; every fifth job then runs a
            // statement the server refuses (division by zero), after it wrote.
            let outcomes = try await lineUp(20, on: storage) { index in
                if index.isMultiple(of: 2) {
                    return try await storage.modifyRecords(
                        RecordModification(saving: [note("r\(index)")]), in: alice, by: "_alice"
                    ).hasFailures
                }
                return try await storage.write(in: alice, weight: 1) { connection in
                    try await connection.query("INSERT INTO scratch (n) VALUES (\(index))", logger: storage.logger)
                    if index % 5 == 0 { try await connection.query("SELECT 1 / 0", logger: storage.logger) }
                    return false
                }
            }
            for (index, outcome) in outcomes {
                if index % 5 == 0 && !index.isMultiple(of: 2) {
                    #expect(throws: StoreError.self, "job \(index)") { try outcome.get() }
                    if case .failure(let error) = outcome {
                        #expect((error as? StoreError)?.message.contains("division by zero") == true, "\(error)")
                    }
                } else {
                    #expect((try? outcome.get()) == false, "job \(index)")
                }
            }
            #expect(commits.all.contains { $0.jobs == 20 }, "the 20 writes shared a transaction: \(commits.all.map(\.jobs))")
            let rows = try TemporaryPostgres.shared().psql("SELECT n FROM scratch ORDER BY n", database: url.database)
            #expect(rows.split(separator: "\n").compactMap { Int($0) } == [1, 3, 7, 9, 11, 13, 17, 19])
            // The saves of the shared transaction took the zone's sequences 1 ... 10 in their order.
            let batch = try await storage.recordChanges(
                in: zoneID("_defaultZone"), of: alice, since: 0, limit: 100, desiredKeys: nil)
            #expect(batch.changed.count == 10 && batch.lastSeq == 10)
            let seqs = batch.changed.compactMap { $0.recordChangeTag.split(separator: "-").last.flatMap { Int64($0, radix: 36) } }
            #expect(seqs == Array(1...10))
        }
    }

    @Test func aFailedCommitFailsEveryJobOfItsTransactionAndTheNextOneRuns() async throws {
        let url = try newDatabase()
        try await withPostgresStore(url) { storage in
            // A constraint checked at COMMIT: only the commit can fail.
            try await storage.connection {
                _ = try await $0.query(
                    "CREATE TABLE scratch (n integer PRIMARY KEY, parent integer REFERENCES scratch DEFERRABLE INITIALLY DEFERRED)",
                    logger: storage.logger)
            }
            let outcomes = try await lineUp(10, on: storage) { index in
                if index == 3 {
                    return try await storage.modifyRecords(
                        RecordModification(saving: [note("lost")]), in: alice, by: "_alice"
                    ).hasFailures
                }
                return try await storage.write(in: alice, weight: 1) { connection in
                    let parent: Int? = index == 7 ? 1_000 : nil
                    try await connection.query("INSERT INTO scratch (n, parent) VALUES (\(index), \(parent))", logger: storage.logger)
                    return false
                }
            }
            #expect(outcomes.count == 10)
            for (index, outcome) in outcomes {
                #expect(throws: StoreError.self, "job \(index)") { try outcome.get() }
            }
            let rows = try TemporaryPostgres.shared().psql("SELECT count(*) FROM scratch", database: url.database)
            #expect(rows.split(separator: "\n") == ["0"])
            #expect(try await storage.rowCount(of: "records") == 0)
            // Nothing of the failed transaction is left behind: the next writes commit.
            let saved = try await storage.modifyRecords(RecordModification(saving: [note("kept")]), in: alice, by: "_alice")
            #expect(!saved.hasFailures)
            #expect(saved.saves[0].value?.recordChangeTag.hasSuffix("-1") == true)
        }
    }

    @Test func concurrentSavesLandOnceInOrderAndAreVisibleToAnotherNodeWhenAcknowledged() async throws {
        let url = try newDatabase()
        let writer = try await PostgresStorage(url: url, maximumConnections: 4)
        let reader = try await PostgresStorage(url: url, maximumConnections: 2)
        let commits = Commits()
        commits.observe(writer)
        let tasks = 40
        let perTask = 5
        try await withThrowingTaskGroup(of: Void.self) { group in
            for task in 0..<tasks {
                group.addTask {
                    // Half into Alice's database, half into Bob's: two queues side by side.
                    let key = task.isMultiple(of: 2) ? alice : bob
                    let owner = task.isMultiple(of: 2) ? "_alice" : "_bob"
                    for i in 0..<perTask {
                        let id = Wire.RecordID(recordName: "t\(task)i\(i)", zoneID: zoneID("_defaultZone", in: key))
                        let record = Wire.Record(recordID: id, recordType: "Note")
                        let result = try await writer.modifyRecords(RecordModification(saving: [record]), in: key, by: owner)
                        #expect(!result.hasFailures)
                        // Acknowledged means committed: another node reads it at once.
                        let fetched = try await reader.fetchRecords([id], desiredKeys: nil, in: key)
                        #expect((try? fetched.first?.result.get())?.recordChangeTag == result.saves.first?.value?.recordChangeTag)
                    }
                }
            }
            try await group.waitForAll()
        }
        for key in [alice, bob] {
            var seqs: [Int64] = []
            var since: Int64 = 0
            while true {
                let batch = try await reader.recordChanges(
                    in: zoneID("_defaultZone", in: key), of: key, since: since, limit: 37, desiredKeys: nil)
                seqs += batch.changed.compactMap { $0.recordChangeTag.split(separator: "-").last.flatMap { Int64($0, radix: 36) } }
                since = batch.lastSeq
                if !batch.moreComing { break }
            }
            // Every save once, each at the zone's next sequence: 1 ... 100, no gap, no repeat.
            #expect(seqs == Array(1...Int64(tasks * perTask / 2)), "\(key)")
        }
        let shared = commits.all.filter { $0.jobs > 1 }
        #expect(!shared.isEmpty, "some saves shared a transaction")
        // Saves of one zone that share statements move the database's feed once together.
        for key in [alice, bob] {
            let head = try await reader.zoneChanges(in: key, since: 0, limit: 10).headSeq
            #expect(head >= 1 && head <= Int64(tasks * perTask / 2), "\(key)")
        }
        #expect(commits.all.reduce(0) { $0 + $1.jobs } == tasks * perTask)
        await writer.close()
        await reader.close()
    }

    // MARK: - Modifications that share statements

    private func record(
        _ name: String, zone: String = "_defaultZone", tag: String = "", _ fields: [Wire.RecordField] = []
    ) -> Wire.Record {
        Wire.Record(
            recordID: Wire.RecordID(recordName: name, zoneID: zoneID(zone)), recordType: "Note", recordChangeTag: tag,
            fields: fields)
    }

    private func pointing(to target: String, _ name: String) -> Wire.Record {
        let reference = Wire.Reference(
            recordID: Wire.RecordID(recordName: target, zoneID: zoneID("_defaultZone")), action: .deleteSelf)
        return record(name, [Wire.RecordField(key: "up", value: Wire.FieldValue(kind: .referenceValue(reference)))])
    }

    @Test func singleSavesOfOneUserRunInTheStatementsOfOneRequest() async throws {
        try await withPostgresStore { storage in
            let commits = Commits()
            commits.observe(storage)
            let outcomes = try await lineUp(30, on: storage) { index in
                try await storage.modifyRecords(
                    RecordModification(saving: [record("s\(index)")], clientChangeToken: Array("token \(index)".utf8)),
                    in: alice, by: "_alice")
            }
            var tags = Set<String>()
            for (index, outcome) in outcomes {
                let saved = try outcome.get()
                #expect(!saved.hasFailures, "save \(index)")
                if let tag = saved.saves.first?.value?.recordChangeTag { tags.insert(tag) }
            }
            #expect(tags.count == 30, "each save has its own change tag")
            #expect(commits.all.contains { $0.jobs == 30 }, "\(commits.all.map(\.jobs))")
            let batch = try await storage.recordChanges(
                in: zoneID("_defaultZone"), of: alice, since: 0, limit: 100, desiredKeys: nil)
            #expect(Set(batch.changed.compactMap { $0.recordID?.recordName }) == Set((0..<30).map { "s\($0)" }))
            #expect(batch.lastSeq == 30 && batch.changed.count == 30)
            // One write of the zone for the 30 requests: the database's feed moved once, and
            // the zone keeps the token of the last request in the queue's order.
            #expect(try await storage.zoneChanges(in: alice, since: 0, limit: 10).headSeq == 1)
            #expect(batch.clientChangeToken.starts(with: Array("token ".utf8)))
        }
    }

    @Test func requestsThatShareStatementsSeeTheRequestsBeforeThemAsIfTheyRanInTurn() async throws {
        try await withPostgresStore { storage in
            let setup = try await storage.modifyRecords(
                RecordModification(saving: [record("stored"), record("kept")]), in: alice, by: "_alice")
            let storedTag = try #require(setup.saves[0].value?.recordChangeTag)
            let commits = Commits()
            commits.observe(storage)
            let requests: [RecordModification] = [
                // 0: a new record.
                RecordModification(saving: [record("target")]),
                // 1: a deleteSelf reference to the record request 0 saves (not stored before).
                RecordModification(saving: [pointing(to: "target", "child")]),
                // 2: a stale change tag: fails alone.
                RecordModification(saving: [record("stored", tag: "stale")]),
                // 3: atomic, one item stale: nothing of it is written.
                RecordModification(saving: [record("atomic-new"), record("kept", tag: "stale")]),
                // 4: not atomic, one item stale: the other is written.
                RecordModification(saving: [record("loose-new"), record("kept", tag: "stale too")], isAtomic: false),
                // 5: a reference to a record nobody saves.
                RecordModification(saving: [pointing(to: "nowhere", "orphan")]),
                // 6: names the record request 0 saves, as new: it sees request 0's save.
                RecordModification(saving: [record("target")]),
                // 7: the right tag of a stored record.
                RecordModification(saving: [record("stored", tag: storedTag)]),
            ]
            let outcomes = try await lineUp(requests.count, on: storage, inOrder: true) { index in
                try await storage.modifyRecords(requests[index], in: alice, by: "_alice")
            }
            let results = try outcomes.mapValues { try $0.get() }
            #expect(commits.all.contains { $0.jobs == requests.count }, "\(commits.all.map(\.jobs))")
            // Requests 0-3 ran in one set of statements, 4-7 in the next (4 names a record 3
            // names): after the setup's write, the zone moved along the database's feed twice.
            #expect(try await storage.zoneChanges(in: alice, since: 0, limit: 10).headSeq == 3)
            #expect(results[0]?.saves[0].value != nil)
            #expect(results[1]?.saves[0].value != nil, "\(String(describing: results[1]))")
            #expect(results[2]?.saves[0].failure?.code == .serverRecordChanged)
            #expect(results[3]?.saves[0].failure?.code == .batchRequestFailed)
            #expect(results[3]?.saves[1].failure?.code == .serverRecordChanged)
            #expect(results[4]?.saves[0].value != nil)
            #expect(results[4]?.saves[1].failure?.code == .serverRecordChanged)
            #expect(results[5]?.saves[0].failure != nil)
            #expect(results[6]?.saves[0].failure?.code == .serverRecordChanged, "request 6 saw request 0's record")
            #expect(results[7]?.saves[0].value != nil)
            let fetched = try await storage.fetchRecords(
                ["target", "child", "atomic-new", "loose-new", "orphan"].map {
                    Wire.RecordID(recordName: $0, zoneID: zoneID("_defaultZone"))
                }, desiredKeys: nil, in: alice)
            #expect(fetched.map { $0.value != nil } == [true, true, false, true, false])
            // Deleting the target cascades to the child saved beside it.
            let deleted = try await storage.modifyRecords(
                RecordModification(deleting: [Wire.RecordID(recordName: "target", zoneID: zoneID("_defaultZone"))]),
                in: alice, by: "_alice")
            #expect(deleted.cascadedDeletions.map(\.recordName) == ["child"])
        }
    }
}
