import CirrusWire
import Foundation
import Synchronization
import Testing

@testable import CirrusStore

/// A clock that stands still until a test moves it.
final class ManualClock: Sendable {
    private let now: Mutex<Int64>
    init(start: Int64 = 1_700_000_000) { now = Mutex(start) }
    func advance(by seconds: Int64) { now.withLock { $0 += seconds } }
    var seconds: Int64 { now.withLock { $0 } }
    var clock: @Sendable () -> Wire.Timestamp { { [self] in Wire.Timestamp(seconds: seconds, nanos: 0) } }
}

private func name(_ record: Wire.Record) -> String { record.recordID?.recordName ?? "?" }

private func refusal(_ body: () async throws -> Void) async -> StoreError? {
    do {
        try await body()
        return nil
    } catch let error as StoreError {
        return error
    } catch {
        Issue.record("unexpected \(error)")
        return nil
    }
}

@Suite("Query cursors")
struct QueryCursorTests {
    private let flagged = Q.query(Q.cmp("flag", .equals, .int64Value(1)), sorts: [Q.sort("n")])

    private func numbered(_ range: Range<Int>, flag: Int64 = 1) -> [Wire.Record] {
        range.map { item(String(format: "r%02d", $0), [("n", .int64Value(Int64($0))), ("flag", .int64Value(flag))]) }
    }

    @Test func pagesFollowEachOtherAndTheLastHasNoCursor() async throws {
        try await withQueryStore { storage, _ in
            try await storage.saveAll(numbered(0..<25))
            var page = try await storage.queryRecords(flagged, in: zoneID("_defaultZone"), of: alice, desiredKeys: nil, limit: 10)
            var pages = [page.records.map(name)]
            while let cursor = page.cursor {
                page = try await storage.continueQuery(cursor, in: alice, desiredKeys: .sameAsQuery, limit: 10)
                pages.append(page.records.map(name))
            }
            #expect(pages.map(\.count) == [10, 10, 5])
            #expect(pages.flatMap { $0 } == numbered(0..<25).map(name))
        }
    }

    @Test func noEmptyLastPageWhenTheMatchesFillThePagesExactly() async throws {
        try await withQueryStore { storage, _ in
            try await storage.saveAll(numbered(0..<20) + numbered(20..<30, flag: 0))
            let first = try await storage.queryRecords(flagged, in: zoneID("_defaultZone"), of: alice, desiredKeys: nil, limit: 10)
            let cursor = try #require(first.cursor)
            let second = try await storage.continueQuery(cursor, in: alice, desiredKeys: .sameAsQuery, limit: 10)
            #expect(second.records.count == 10)
            #expect(second.cursor == nil)
            let all = try await storage.queryRecords(flagged, in: zoneID("_defaultZone"), of: alice, desiredKeys: nil, limit: 20)
            #expect(all.cursor == nil)
            #expect(try await storage.count("query_preimages") == 0, "a cursor keeps nothing in the store")
        }
    }

    @Test func changesBetweenPagesNeitherRepeatNorSkipRecordsThatMatchedThroughout() async throws {
        try await withQueryStore { storage, _ in
            let saved = try await storage.saveAll(numbered(0..<40))
            func changed(_ i: Int, n: Int64? = nil, flag: Int64? = nil) -> Wire.Record {
                var record = saved[i]
                if let n { record.fields = record.fields.map { $0.key == "n" ? field("n", .int64Value(n)) : $0 } }
                if let flag { record.fields = record.fields.map { $0.key == "flag" ? field("flag", .int64Value(flag)) : $0 } }
                return record
            }
            func delete(_ names: String...) async throws {
                let result = try await storage.modifyRecords(
                    RecordModification(deleting: names.map { recordID($0) }), in: alice, by: "_alice")
                #expect(!result.hasFailures)
            }
            var page = try await storage.queryRecords(flagged, in: zoneID("_defaultZone"), of: alice, desiredKeys: nil, limit: 10)
            var returned = page.records
            #expect(returned.map(name) == numbered(0..<10).map(name))

            // Between pages 1 and 2: sort keys move both ways, records go,
            // stop matching, come back under a new row, and new ones appear.
            try await storage.saveAll([changed(20, n: -5), changed(5, n: 100), changed(25, flag: 0), changed(12, n: 1_000)])
            try await delete("r15", "r02", "r30")
            try await storage.saveAll(numbered(40..<41) + [item("r02", [("n", .int64Value(2)), ("flag", .int64Value(1))])])
            try await storage.saveAll([item("r30", [("n", .int64Value(30)), ("flag", .int64Value(1))])])
            var cursor = try #require(page.cursor)
            page = try await storage.continueQuery(cursor, in: alice, desiredKeys: .sameAsQuery, limit: 10)
            returned += page.records

            // Between pages 2 and 3.
            try await storage.saveAll([changed(35, n: -10)])
            try await delete("r36")
            cursor = try #require(page.cursor)
            page = try await storage.continueQuery(cursor, in: alice, desiredKeys: .sameAsQuery, limit: 10)
            returned += page.records
            while let next = page.cursor {
                page = try await storage.continueQuery(next, in: alice, desiredKeys: .sameAsQuery, limit: 10)
                returned += page.records
            }

            let names = returned.map(name)
            #expect(Set(names).count == names.count, "no record twice: \(names)")
            let gone: Set = ["r15", "r25", "r36", "r02", "r30"]
            let throughout = numbered(0..<40).map(name).filter { !gone.contains($0) }
            #expect(throughout.allSatisfy(names.contains), "nothing that matched throughout is skipped: \(names)")
            #expect(!names.contains("r15") && !names.contains("r25") && !names.contains("r36"))
            #expect(names.filter { $0 == "r02" }.count == 1, "returned before it was deleted, not again after")
            // Records come as they are when their page is read, in the first page's order.
            #expect(returned.first { name($0) == "r20" }?.value("n") == .int64Value(-5))
            #expect(returned.first { name($0) == "r12" }?.value("n") == .int64Value(1_000))
            #expect(Array(names.prefix(20).suffix(10)) == ["r10", "r11", "r12", "r13", "r14", "r16", "r17", "r18", "r19", "r20"])
        }
    }

    @Test func aCursorCanBeUsedAgainAndRemembersTheDesiredKeys() async throws {
        try await withQueryStore { storage, _ in
            try await storage.saveAll(numbered(0..<5).map { record in
                var record = record
                record.fields.append(field("extra", .stringValue("x")))
                return record
            })
            let first = try await storage.queryRecords(flagged, in: zoneID("_defaultZone"), of: alice, desiredKeys: ["n"], limit: 2)
            #expect(first.records.map(\.keys) == [["n"], ["n"]])
            let cursor = try #require(first.cursor)
            let again = try await storage.continueQuery(cursor, in: alice, desiredKeys: .sameAsQuery, limit: 2)
            let twice = try await storage.continueQuery(cursor, in: alice, desiredKeys: .sameAsQuery, limit: 2)
            #expect(again.records.map(name) == ["r02", "r03"])
            #expect(again == twice)
            #expect(again.records.map(\.keys) == [["n"], ["n"]])
            let replaced = try await storage.continueQuery(cursor, in: alice, desiredKeys: .replaced(["extra"]), limit: 2)
            #expect(replaced.records.map(\.keys) == [["extra"], ["extra"]])
            let all = try await storage.continueQuery(cursor, in: alice, desiredKeys: .replaced(nil), limit: 5)
            #expect(all.records.map(\.keys) == Array(repeating: ["n", "flag", "extra"], count: 3))
            #expect(all.cursor == nil)
        }
    }

    @Test func aCursorWorksOnlyInTheDatabaseThatMadeIt() async throws {
        try await withQueryStore { storage, _ in
            try await storage.saveAll(numbered(0..<5))
            try await storage.saveAll(numbered(0..<5).map { record in
                var record = record
                record.recordID = recordID(name(record), in: bob)
                return record
            }, in: bob, by: "_bob")
            try await storage.saveAll(numbered(0..<5).map { record in
                var record = record
                record.recordID = recordID(name(record), in: publicDB)
                return record
            }, in: publicDB, by: "_alice")
            let mine = try #require(
                try await storage.queryRecords(flagged, in: zoneID("_defaultZone"), of: alice, desiredKeys: nil, limit: 2).cursor)
            let shared = try #require(
                try await storage.queryRecords(
                    flagged, in: zoneID("_defaultZone", in: publicDB), of: publicDB, desiredKeys: nil, limit: 2
                ).cursor)
            for (cursor, database) in [(mine, bob), (mine, publicDB), (shared, alice)] {
                let error = await refusal {
                    _ = try await storage.continueQuery(cursor, in: database, desiredKeys: .sameAsQuery, limit: 2)
                }
                #expect(error == StoreError(.invalidArguments, "the query cursor is unknown or expired"))
            }
            #expect(try await storage.continueQuery(mine, in: alice, desiredKeys: .sameAsQuery, limit: 2).records.count == 2)
        }
    }

    @Test(arguments: [[], [1, 2, 3], [2] + Array(repeating: 0, count: 24), [1] + Array(repeating: 7, count: 24)])
    func malformedOrUnknownCursorsAreRefused(bytes: [UInt8]) async throws {
        try await withQueryStore { storage, _ in
            try await storage.saveAll(numbered(0..<5))
            let error = await refusal {
                _ = try await storage.continueQuery(bytes, in: alice, desiredKeys: .sameAsQuery, limit: 2)
            }
            #expect(error == StoreError(.invalidArguments, "the query cursor is unknown or expired"))
        }
    }

    @Test func cursorsExpireAfterTheirLifetimeAndArePruned() async throws {
        let clock = ManualClock()
        try await withQueryStore(clock: clock.clock) { storage, _ in
            let saved = try await storage.saveAll(numbered(0..<30))
            let cursor = try #require(
                try await storage.queryRecords(flagged, in: zoneID("_defaultZone"), of: alice, desiredKeys: nil, limit: 10).cursor)
            #expect(try await storage.count("query_preimages") == 0)
            // A change under the live cursor keeps the record's version of its first page.
            var moved = saved[25]
            moved.fields = [field("n", .int64Value(-1)), field("flag", .int64Value(1))]
            try await storage.saveAll([moved])
            #expect(try await storage.count("query_preimages") == 1)
            clock.advance(by: 3_599)
            #expect(try await storage.continueQuery(cursor, in: alice, desiredKeys: .sameAsQuery, limit: 10).records.count == 10)
            clock.advance(by: 1)
            let error = await refusal {
                _ = try await storage.continueQuery(cursor, in: alice, desiredKeys: .sameAsQuery, limit: 10)
            }
            #expect(error == StoreError(.invalidArguments, "the query cursor is unknown or expired"))

            // Pruning drops the versions kept for cursors that have expired.
            let early = Wire.Timestamp(seconds: clock.seconds - 3_600, nanos: 0)
            #expect(try await storage.pruneQueryCursors(createdBefore: early) == 0)
            let cutoff = Wire.Timestamp(seconds: clock.seconds + 1, nanos: 0)
            #expect(try await storage.pruneQueryCursors(createdBefore: cutoff) == 1)
            #expect(try await storage.count("query_preimages") == 0)
        }
    }

    @Test func aCursorOfADeletedZoneFindsNoZone() async throws {
        try await withQueryStore { storage, _ in
            try await storage.createZone("Z")
            try await storage.saveAll((0..<5).map { item("z\($0)", zone: "Z", [("flag", .int64Value(1))]) })
            let first = try await storage.queryRecords(flagged, in: zoneID("Z"), of: alice, desiredKeys: nil, limit: 2)
            let cursor = try #require(first.cursor)
            _ = try await storage.modifyZones(saving: [], deleting: [zoneID("Z")], in: alice)
            try await storage.createZone("Z")
            let error = await refusal {
                _ = try await storage.continueQuery(cursor, in: alice, desiredKeys: .sameAsQuery, limit: 2)
            }
            #expect(error?.code == .zoneNotFound)
        }
    }
}
