import CirrusWire
import Synchronization
import Testing

@testable import CirrusStore

/// Group commit: concurrent writes share transactions. The first test drives SQLite's write
/// queue directly (`CirrusPostgresTests.PostgresGroupCommitTests` does the same for
/// PostgreSQL's); the others are part of the conformance suite and run against every engine.
@Suite("Group commit")
struct GroupCommitTests {
    struct Boom: Error {}

    /// The jobs whose commit hooks ran.
    final class Told: Sendable {
        let values = Mutex<Set<Int>>([])
    }

    @Test func aFailingWriteRollsBackOnlyItselfInASharedTransaction() async throws {
        try await withSQLiteStore { storage, _ in
            let results = await withTaskGroup(of: Bool.self) { group in
                for i in 0..<50 {
                    group.addTask {
                        do {
                            try await storage.write(weight: 1) { db in
                                try db.run(
                                    sql: "INSERT INTO databases (container, scope, owner) VALUES (?, 2, ?)",
                                    arguments: ["c", "_user\(i)"])
                                if i % 5 == 0 { throw Boom() }
                            }
                            return true
                        } catch {
                            return false
                        }
                    }
                }
                return await group.reduce(into: [Bool]()) { $0.append($1) }
            }
            #expect(results.filter { $0 }.count == 40)
            let rows = try await storage.count("databases")
            #expect(rows == 40)
        }
    }

    /// A job's commit hook (how a save hands its notifications to the watches at once) runs
    /// before its caller resumes, and never for a job whose writes rolled back.
    @Test func commitHooksRunOnlyForCommittedJobsAndBeforeTheirCallersResume() async throws {
        try await withSQLiteStore { storage, _ in
            let told = Told()
            let outcomes = await withTaskGroup(of: (index: Int, committed: Bool, toldFirst: Bool).self) { group in
                for i in 0..<50 {
                    group.addTask {
                        do {
                            let value = try await storage.writer.write(
                                weight: 1, committed: { value in _ = told.values.withLock { $0.insert(value) } }
                            ) { db in
                                try db.run(
                                    sql: "INSERT INTO databases (container, scope, owner) VALUES (?, 2, ?)",
                                    arguments: ["c", "_user\(i)"])
                                if i % 5 == 0 { throw Boom() }
                                return i
                            }
                            return (i, true, told.values.withLock { $0.contains(value) })
                        } catch {
                            return (i, false, false)
                        }
                    }
                }
                return await group.reduce(into: [(index: Int, committed: Bool, toldFirst: Bool)]()) { $0.append($1) }
            }
            let committed = Set(outcomes.filter(\.committed).map(\.index))
            #expect(committed == Set((0..<50).filter { $0 % 5 != 0 }))
            let toldLate = outcomes.filter { $0.committed && !$0.toldFirst }.map(\.index)
            #expect(toldLate.isEmpty, "every hook ran before its caller resumed")
            #expect(told.values.withLock { $0 } == committed, "no hook for a job that rolled back")
        }
    }

    @Test func concurrentOperationsAllGetTheirOwnOutcome() async throws {
        try await withSyncStore { storage, _ in
            try await storage.saveAll([note("shared")])
            let outcomes = try await withThrowingTaskGroup(of: (Int, RecordModificationResult).self) { group in
                for i in 0..<40 {
                    group.addTask {
                        // Even tasks save their own record; odd tasks try a stale save of "shared".
                        let record = i % 2 == 0 ? note("own\(i)") : note("shared", tag: "stale")
                        return (i, try await storage.modifyRecords(RecordModification(saving: [record]), in: alice, by: "_alice"))
                    }
                }
                return try await group.reduce(into: [Int: RecordModificationResult]()) { $0[$1.0] = $1.1 }
            }
            for (i, result) in outcomes {
                if i % 2 == 0 {
                    #expect(result.saved(0)?.recordID == recordID("own\(i)"))
                } else {
                    #expect(result.saveError(0)?.code == .serverRecordChanged)
                }
            }
            #expect(try await storage.count("records") == 21)
        }
    }

    @Test func concurrentSavesLandOnceEachAtTheZonesNextSequence() async throws {
        try await withSyncStore { storage, engine in
            let tasks = 40
            let perTask = 5
            try await withThrowingTaskGroup(of: Void.self) { group in
                for task in 0..<tasks {
                    group.addTask {
                        for i in 0..<perTask {
                            try await storage.saveAll([note("t\(task)i\(i)")])
                        }
                    }
                }
                try await group.waitForAll()
            }
            // One change per page: every save once, at sequences 1 ... 200 without a gap.
            var seen: [String] = []
            var since: Int64 = 0
            while true {
                let page = try await storage.recordChanges(
                    in: zoneID("_defaultZone"), of: alice, since: since, limit: 1, desiredKeys: [])
                guard let record = page.changed.first else { break }
                #expect(page.changed.count == 1 && page.lastSeq == since + 1, "\(engine) after \(since)")
                seen.append(record.recordID?.recordName ?? "")
                since = page.lastSeq
                if !page.moreComing { break }
            }
            #expect(seen.count == tasks * perTask, "\(engine)")
            #expect(Set(seen).count == tasks * perTask, "\(engine)")
            #expect(try await storage.count("records") == tasks * perTask)
        }
    }
}
