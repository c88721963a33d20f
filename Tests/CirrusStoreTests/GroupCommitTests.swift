import CirrusWire
import Testing

@testable import CirrusStore

@Suite("Group commit")
struct GroupCommitTests {
    struct Boom: Error {}

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

    @Test func concurrentOperationsAllGetTheirOwnOutcome() async throws {
        try await withSQLiteStore { storage, _ in
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
}
