import CirrusKit
import CirrusModel
import CirrusWire
import Foundation
import NIOConcurrencyHelpers
import Testing

@Suite("Queries end to end")
struct QueriesEndToEndTests {
    static let zone = CKRecordZone.ID(zoneName: "Notes")

    /// Notes n00…n(count-1) in the Notes zone: category alternates work/home, `createdAt` one
    /// day apart, `rank` = index, tags ["even"|"odd", "all"], title "Note <i> …".
    static func seed(_ database: CKDatabase, count: Int) async throws {
        _ = try await database.save(CKRecordZone(zoneID: Self.zone))
        let records = (0..<count).map { i -> CKRecord in
            let record = CKRecord(recordType: "Note", recordID: CKRecord.ID(recordName: String(format: "n%03d", i), zoneID: Self.zone))
            record["category"] = i % 2 == 0 ? "work" : "home"
            record["createdAt"] = Date(timeIntervalSince1970: 1_700_000_000 + Double(i) * 86_400)
            record["rank"] = i
            record["tags"] = [i % 2 == 0 ? "even" : "odd", "all"]
            record["title"] = "Note \(i) about Café plans"
            record["content"] = String(repeating: "x", count: 20)
            return record
        }
        for batch in stride(from: 0, to: records.count, by: 400) {
            _ = try await database.modifyRecords(saving: Array(records[batch..<min(batch + 400, records.count)]), deleting: [])
        }
    }

    static func names(_ results: [(CKRecord.ID, Result<CKRecord, any Error>)]) -> [String] {
        results.map(\.0.recordName)
    }

    @Test func predicatesSortsAndDesiredKeysThroughTheAsyncAPI() async throws {
        try await withStack { container in
            let database = container("alice").privateCloudDatabase
            try await Self.seed(database, count: 20)

            let query = CKQuery(
                recordType: "Note",
                predicate: CKPredicate(format: "category == %@ AND rank >= %d AND NOT rank == 10", "work", 6))
            query.sortDescriptors = [CKSortDescriptor(key: "rank", ascending: false)]
            let (results, cursor) = try await database.records(
                matching: query, inZoneWith: Self.zone, desiredKeys: ["rank"])
            #expect(Self.names(results) == ["n018", "n016", "n014", "n012", "n008", "n006"])
            #expect(cursor == nil)
            let first = try #require(try results.first?.1.get())
            #expect(first["rank"] as? Int == 18)
            #expect(first["title"] == nil)

            let contains = try await database.records(
                matching: CKQuery(recordType: "Note", predicate: CKPredicate(format: "tags CONTAINS 'odd' AND rank < 6")),
                inZoneWith: Self.zone)
            #expect(Set(Self.names(contains.matchResults)) == ["n001", "n003", "n005"])

            let text = try await database.records(
                matching: CKQuery(recordType: "Note", predicate: CKPredicate(format: "self CONTAINS 'cafe note'")),
                inZoneWith: Self.zone, resultsLimit: 400)
            #expect(text.matchResults.count == 20)

            let between = try await database.records(
                matching: CKQuery(recordType: "Note", predicate: CKPredicate(format: "rank BETWEEN {3, 5}")),
                inZoneWith: Self.zone)
            #expect(Set(Self.names(between.matchResults)) == ["n003", "n004", "n005"])
            let none = try await database.records(
                matching: CKQuery(recordType: "Note", predicate: CKPredicate(format: "rank BETWEEN {3, 5} AND FALSEPREDICATE")),
                inZoneWith: Self.zone)
            #expect(none.matchResults.isEmpty)
        }
    }

    @Test func refusalsComeFromTheClientBeforeSendingAndFromTheServerForRawTrees() async throws {
        try await withStack { container in
            let database = container("alice").privateCloudDatabase
            try await Self.seed(database, count: 2)
            do {
                _ = try await database.records(
                    matching: CKQuery(recordType: "Note", predicate: CKPredicate(format: "a == 1 OR b == 2")), inZoneWith: Self.zone)
                Issue.record("OR must be refused")
            } catch let error as CKError {
                #expect(error.code == .invalidArguments)
                #expect(error.localizedDescription.contains("position 8"))
            }
            // A tree no parser would make, as a raw client could send it: BEGINSWITH with a number.
            var comparison = Wire.ComparisonPredicate()
            comparison.key = "title"
            comparison.comparisonOperator = .beginsWith
            comparison.value = Wire.FieldValue(kind: .int64Value(3))
            let raw = CKPredicate(wire: Wire.QueryPredicate(node: .comparison(comparison)))
            do {
                _ = try await database.records(matching: CKQuery(recordType: "Note", predicate: raw), inZoneWith: Self.zone)
                Issue.record("the server must refuse a bad tree")
            } catch let error as CKError {
                #expect(error.code == .invalidArguments)
                #expect(error.localizedDescription.contains("BEGINSWITH"))
            }
            // Sorting by a list field is refused by the server.
            let sorted = CKQuery(recordType: "Note", predicate: CKPredicate(value: true))
            sorted.sortDescriptors = [CKSortDescriptor(key: "tags", ascending: true)]
            await #expect(throws: CKError.self) { _ = try await database.records(matching: sorted, inZoneWith: Self.zone) }
        }
    }

    @Test func cursorsSurviveReconnectionAndStayWithTheirUser() async throws {
        try await withStack { container in
            let first = container("alice").privateCloudDatabase
            try await Self.seed(first, count: 25)
            let query = CKQuery(recordType: "Note", predicate: CKPredicate(value: true))
            query.sortDescriptors = [CKSortDescriptor(key: "rank", ascending: true)]
            let page1 = try await first.records(matching: query, inZoneWith: Self.zone, resultsLimit: 10)
            let cursor = try #require(page1.queryCursor)

            // Another connection (another container object) of the same user continues it,
            // after a round trip through Codable as an app would persist it.
            let restored = try JSONDecoder().decode(CKQueryOperation.Cursor.self, from: JSONEncoder().encode(cursor))
            let second = container("alice").privateCloudDatabase
            let page2 = try await second.records(continuingMatchFrom: restored, resultsLimit: 10)
            #expect(Self.names(page2.matchResults) == (10..<20).map { String(format: "n%03d", $0) })
            let page3 = try await second.records(continuingMatchFrom: try #require(page2.queryCursor), resultsLimit: 10)
            #expect(Self.names(page3.matchResults) == (20..<25).map { String(format: "n%03d", $0) })
            #expect(page3.queryCursor == nil)

            do {
                _ = try await container("bob").privateCloudDatabase.records(continuingMatchFrom: cursor)
                Issue.record("Bob must not continue Alice's query")
            } catch let error as CKError {
                #expect(error.code == .invalidArguments)
            }
        }
    }

    @Test func changesBetweenPagesNeitherRepeatNorSkipRecords() async throws {
        try await withStack { container in
            let database = container("alice").privateCloudDatabase
            try await Self.seed(database, count: 30)
            let query = CKQuery(recordType: "Note", predicate: CKPredicate(format: "category == 'work'"))
            query.sortDescriptors = [CKSortDescriptor(key: "rank", ascending: true)]
            let page1 = try await database.records(matching: query, inZoneWith: Self.zone, resultsLimit: 5)
            var seen = Self.names(page1.matchResults)
            #expect(seen == ["n000", "n002", "n004", "n006", "n008"])

            // Between pages: an unseen record jumps to the front of the order, a seen one to the
            // back, one unseen record is deleted and a new one is created.
            func edit(_ name: String, rank: Int) async throws {
                let record = try await database.record(for: CKRecord.ID(recordName: name, zoneID: Self.zone))
                record["rank"] = rank
                _ = try await database.save(record)
            }
            try await edit("n020", rank: -1)
            try await edit("n002", rank: 1000)
            _ = try await database.deleteRecord(withID: CKRecord.ID(recordName: "n012", zoneID: Self.zone))
            let fresh = CKRecord(recordType: "Note", recordID: CKRecord.ID(recordName: "new", zoneID: Self.zone))
            fresh["category"] = "work"
            fresh["rank"] = 7
            _ = try await database.save(fresh)

            var cursor = page1.queryCursor
            while let next = cursor {
                let page = try await database.records(continuingMatchFrom: next, resultsLimit: 5)
                seen += Self.names(page.matchResults)
                cursor = page.queryCursor
            }
            #expect(seen.count == Set(seen).count, "no record twice: \(seen)")
            let existedThroughout = Set(stride(from: 0, to: 30, by: 2).map { String(format: "n%03d", $0) }).subtracting(["n012"])
            #expect(existedThroughout.isSubset(of: Set(seen)), "nothing skipped: \(seen)")
            #expect(!seen.contains("n012"))
        }
    }

    @Test func theQuerySamplesRunAgainstTheServer() async throws {
        try await withStack { container in
            let database = container("alice").privateCloudDatabase
            try await Self.seed(database, count: 30)
            let log = NIOLockedValueBox<[String]>([])
            func print(_ line: String) { log.withLockedValue { $0.append(line) } }
            let oneWeekAgo = Date(timeIntervalSince1970: 1_700_000_000 + 20 * 86_400)
            let myZoneID = Self.zone
            let pages = NIOLockedValueBox<[CKQueryOperation.Cursor]>([])
            func fetchNextPage(cursor: CKQueryOperation.Cursor) { pages.withLockedValue { $0.append(cursor) } }
            func processResults(_ records: [CKRecord]) { print("processed \(records.count)") }

            // --- sample (seed 002, CKQueryOperation; NSPredicate → CKPredicate, NSSortDescriptor → CKSortDescriptor)
            let predicate = CKPredicate(format: "category == %@ AND createdAt > %@", "work", oneWeekAgo)
            let query = CKQuery(recordType: "Note", predicate: predicate)
            query.sortDescriptors = [CKSortDescriptor(key: "createdAt", ascending: false)]

            let operation = CKQueryOperation(query: query)
            operation.zoneID = myZoneID  // Optional: specific zone
            operation.desiredKeys = ["title", "content"]
            operation.resultsLimit = 50  // Pagination

            // Collect results
            var fetchedRecords: [CKRecord] = []

            operation.recordMatchedBlock = { recordID, result in
                if case .success(let record) = result {
                    fetchedRecords.append(record)
                }
            }

            operation.queryResultBlock = { result in
                switch result {
                case .success(let cursor):
                    if let cursor = cursor {
                        // More results available - fetch next page
                        fetchNextPage(cursor: cursor)
                    } else {
                        // All results fetched
                        processResults(fetchedRecords)
                    }
                case .failure(let error):
                    print("Query failed: \(error)")
                }
            }

            database.add(operation)
            // --- end of sample
            await finished(operation)
            // Work notes created after day 20: ranks 28, 26, 24, 22, newest first.
            #expect(fetchedRecords.map(\.recordID.recordName) == ["n028", "n026", "n024", "n022"])
            #expect(fetchedRecords.first?["rank"] == nil)
            #expect(fetchedRecords.first?["title"] as? String == "Note 28 about Café plans")
            #expect(log.withLockedValue { $0 } == ["processed 4"])
            #expect(pages.withLockedValue { $0.isEmpty })

            // --- sample (seed 002, cursor-based pagination)
            var allRecords: [CKRecord] = []
            let done = AsyncStream<Void>.makeStream()

            func fetchAllRecords(cursor: CKQueryOperation.Cursor? = nil) {
                let operation: CKQueryOperation

                if let cursor = cursor {
                    operation = CKQueryOperation(cursor: cursor)
                } else {
                    let query = CKQuery(recordType: "Note", predicate: CKPredicate(value: true))
                    operation = CKQueryOperation(query: query)
                    operation.zoneID = myZoneID
                }

                operation.resultsLimit = 7

                operation.recordMatchedBlock = { _, result in
                    if case .success(let record) = result {
                        allRecords.append(record)
                    }
                }

                operation.queryResultBlock = { result in
                    if case .success(let nextCursor) = result {
                        if let nextCursor = nextCursor {
                            fetchAllRecords(cursor: nextCursor)  // Recursive
                        } else {
                            print("Fetched all \(allRecords.count) records")
                            done.continuation.finish()
                        }
                    }
                }

                database.add(operation)
            }
            // --- end of sample

            fetchAllRecords()
            for await _ in done.stream {}
            #expect(log.withLockedValue { $0.last } == "Fetched all 30 records")
            #expect(Set(allRecords.map(\.recordID.recordName)).count == 30)
        }
    }
}
