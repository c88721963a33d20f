import CirrusWire
import Foundation
import GRDB
import Testing

@testable import CirrusStore

private func name(_ record: Wire.Record) -> String { record.recordID?.recordName ?? "?" }

/// The records named, as stored now.
private func latest(_ storage: any QueryStorageUnderTest, _ names: [String]) async throws -> [Wire.Record] {
    try await storage.fetchRecords(names.map { recordID($0) }, desiredKeys: nil, in: alice).map { try #require($0.record) }
}

private let unknown = StoreError(.invalidArguments, "the query cursor is unknown or expired")

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

/// Keyset cursors: sealed positions, versions kept only under live cursors,
/// pages that read about as many rows as they return.
@Suite("Query keyset cursors")
struct QueryKeysetTests {
    private func numbered(_ range: Range<Int>, zone: String = "_defaultZone") -> [Wire.Record] {
        range.map { item(String(format: "r%03d", $0), zone: zone, [("n", .int64Value(Int64($0)))]) }
    }

    private func all(
        _ storage: any QueryStorageUnderTest, _ first: QueryPage, limit: Int, between: (Int) async throws -> Void = { _ in }
    ) async throws -> [String] {
        var page = first
        var names = page.records.map(name)
        var pages = 1
        while let cursor = page.cursor {
            try await between(pages)
            page = try await storage.continueQuery(cursor, in: alice, desiredKeys: .sameAsQuery, limit: limit)
            names += page.records.map(name)
            pages += 1
        }
        return names
    }

    @Test func aCursorAlteredInAnyBitIsRefused() async throws {
        try await withQueryStore { storage, _ in
            try await storage.saveAll(numbered(0..<6))
            let page = try await storage.queryRecords(
                Q.query(sorts: [Q.sort("n")]), in: zoneID("_defaultZone"), of: alice, desiredKeys: ["n"], limit: 2)
            let cursor = try #require(page.cursor)
            for index in cursor.indices {
                for bit in [0, 3, 7] {
                    var altered = cursor
                    altered[index] ^= 1 << bit
                    let error = await refusal {
                        _ = try await storage.continueQuery(altered, in: alice, desiredKeys: .sameAsQuery, limit: 2)
                    }
                    #expect(error == unknown, "byte \(index) bit \(bit)")
                }
            }
            for altered in [cursor + [0], Array(cursor.dropLast()), Array(cursor.dropFirst())] {
                let error = await refusal {
                    _ = try await storage.continueQuery(altered, in: alice, desiredKeys: .sameAsQuery, limit: 2)
                }
                #expect(error == unknown)
            }
            let next = try await storage.continueQuery(cursor, in: alice, desiredKeys: .sameAsQuery, limit: 2)
            #expect(next.records.map(name) == ["r002", "r003"])
        }
    }

    @Test func aCursorOfAnotherStoreIsRefused() async throws {
        try await withQueryStore { other, _ in
            try await other.saveAll(numbered(0..<6))
            let foreign = try #require(
                try await other.queryRecords(Q.query(), in: zoneID("_defaultZone"), of: alice, desiredKeys: nil, limit: 2).cursor)
            try await withQueryStore { storage, _ in
                try await storage.saveAll(numbered(0..<6))
                let error = await refusal {
                    _ = try await storage.continueQuery(foreign, in: alice, desiredKeys: .sameAsQuery, limit: 2)
                }
                #expect(error == unknown)
            }
        }
    }

    /// SQLite's own economy: PostgreSQL keeps every replaced version until pruned.
    @Test func versionsAreKeptOnlyInZonesWithLiveCursors() async throws {
        try await withSQLiteStore { storage, _ in
            try await storage.createZone("Quiet")
            let loud = try await storage.saveAll(numbered(0..<5))
            let quiet = try await storage.saveAll(numbered(0..<5, zone: "Quiet"))
            func touch(_ records: [Wire.Record]) async throws {
                try await storage.saveAll(records.map { record in
                    var record = record
                    record.fields = [field("n", .int64Value(99))]
                    return record
                })
            }
            try await touch([loud[0], quiet[0]])
            #expect(try await storage.count("query_preimages") == 0, "no cursor yet")
            // A page without a cursor makes nothing live either way; one with a cursor does.
            let page = try await storage.queryRecords(Q.query(), in: zoneID("_defaultZone"), of: alice, desiredKeys: nil, limit: 2)
            #expect(page.cursor != nil)
            let current = try await latest(storage, ["r001", "r002"])
            try await touch(current + [quiet[1]])
            #expect(try await storage.count("query_preimages") == 2, "the two changes in the zone with a cursor")
            _ = try await storage.modifyRecords(RecordModification(deleting: [recordID("r003")]), in: alice, by: "_alice")
            #expect(try await storage.count("query_preimages") == 3, "a delete keeps the version too")
        }
    }

    @Test func aDateSortFollowsTheFirstPagesOrderWhileEveryChangeMovesRecords() async throws {
        try await withQueryStore(clock: SteppingClock(start: 1_000).clock) { storage, _ in
            var saved: [String: Wire.Record] = [:]
            for record in numbered(0..<30) {
                for stored in try await storage.saveAll([record]) { saved[name(stored)] = stored }
            }
            let byModification = Q.query(sorts: [Q.sort("modificationDate")])
            let first = try await storage.queryRecords(byModification, in: zoneID("_defaultZone"), of: alice, desiredKeys: nil, limit: 7)
            let names = try await all(storage, first, limit: 7) { page in
                // Each change moves a record to the end of the order, from before and after the cursor.
                let victims = ["r\(String(format: "%03d", page))", "r\(String(format: "%03d", 29 - page))"]
                let current = try await latest(storage, victims)
                try await storage.saveAll(current.map { record in
                    var record = record
                    record.fields = [field("n", .int64Value(-1))]
                    return record
                })
            }
            #expect(names == numbered(0..<30).map(name), "the first page's order, each record once")
            // A new query sees the new order.
            let fresh = try await storage.queryRecords(byModification, in: zoneID("_defaultZone"), of: alice, desiredKeys: nil, limit: 30)
            #expect(fresh.records.map(name) != names)
            #expect(Set(fresh.records.map(name)) == Set(names))
        }
    }

    @Test func descendingFieldSortWithMissingValuesAndChangesBetweenPages() async throws {
        try await withQueryStore { storage, _ in
            var records = (0..<24).map { i -> Wire.Record in
                // Ties (i / 3), a double among the integers, some without the field.
                if i % 7 == 6 { return item(String(format: "r%03d", i), [("other", .int64Value(1))]) }
                if i == 10 { return item("r010", [("n", .doubleValue(3.5))]) }
                return item(String(format: "r%03d", i), [("n", .int64Value(Int64(i / 3)))])
            }
            records = try await storage.saveAll(records)
            let query = Q.query(sorts: [Q.sort("n", ascending: false)])
            let expected = try await storage.queryRecords(query, in: zoneID("_defaultZone"), of: alice, desiredKeys: nil, limit: 100)
                .records.map(name)
            let first = try await storage.queryRecords(query, in: zoneID("_defaultZone"), of: alice, desiredKeys: nil, limit: 5)
            var changedOnce = false
            let names = try await all(storage, first, limit: 5) { _ in
                guard !changedOnce else { return }
                changedOnce = true
                // The highest and a record without the value swap places; one record goes.
                let current = try await latest(storage, ["r021", "r006"])
                try await storage.saveAll(current.map { record in
                    var record = record
                    record.fields = name(record) == "r021" ? [field("other", .int64Value(2))] : [field("n", .int64Value(100))]
                    return record
                })
                _ = try await storage.modifyRecords(RecordModification(deleting: [recordID("r009")]), in: alice, by: "_alice")
            }
            #expect(names == expected.filter { $0 != "r009" }, "the first page's order, without the deleted record")
        }
    }

    @Test func distanceSortWithTiesMissingLocationsAndChangesBetweenPages() async throws {
        try await withQueryStore { storage, _ in
            let places = [(48.8566, 2.3522), (51.5074, -0.1278), (52.52, 13.405), (0, 179.9), (0, -179.9), (89.9, 0)]
            let records = (0..<24).map { i -> Wire.Record in
                let name = String(format: "r%03d", i)
                // Some without a location; the others share places (ties, by record name).
                if i % 7 == 6 || i == 10 { return item(name, [("other", .int64Value(1))]) }
                let (latitude, longitude) = places[i % places.count]
                return item(name, [("at", Q.location(latitude, longitude))])
            }
            let original = try await storage.saveAll(records)
            let berlin = Wire.Location(latitude: 52.52, longitude: 13.405)
            for ascending in [true, false] {
                let query = Q.query(sorts: [Q.sort("at", ascending: ascending, from: berlin)])
                let expected = try await storage.queryRecords(
                    query, in: zoneID("_defaultZone"), of: alice, desiredKeys: nil, limit: 100
                ).records.map(name)
                #expect(expected.count == 24)
                #expect(Array(expected.suffix(4)) == ["r006", "r010", "r013", "r020"], "no location: last, by name")
                let first = try await storage.queryRecords(query, in: zoneID("_defaultZone"), of: alice, desiredKeys: nil, limit: 5)
                var changedOnce = false
                let names = try await all(storage, first, limit: 5) { _ in
                    guard !changedOnce else { return }
                    changedOnce = true
                    // A record moves to Berlin, one loses its location, one goes.
                    let current = try await latest(storage, ["r023", "r013"])
                    let moved = current.map { record in
                        var record = record
                        record.fields = name(record) == "r023" ? [field("other", .int64Value(2))] : [field("at", Q.location(52.52, 13.405))]
                        return record
                    }
                    _ = try await storage.modifyRecords(RecordModification(saving: moved, savePolicy: .allKeys), in: alice, by: "_alice")
                    _ = try await storage.modifyRecords(RecordModification(deleting: [recordID("r007")]), in: alice, by: "_alice")
                }
                #expect(names == expected.filter { $0 != "r007" }, "the first page's order, without the deleted record")
                // Put back what the pages changed.
                let changed = try await latest(storage, ["r023", "r013"]).map { record in
                    var record = record
                    record.fields = original.first { name($0) == name(record) }?.fields ?? []
                    return record
                }
                let restored = try await storage.modifyRecords(
                    RecordModification(
                        saving: changed + [item("r007", [("at", Q.location(places[1].0, places[1].1))])], savePolicy: .allKeys),
                    in: alice, by: "_alice")
                #expect(!restored.hasFailures)
            }
        }
    }

    @Test func aCursorOutlivesTheStoreThatIssuedIt() async throws {
        for engine in StorageEngineUnderTest.all where engine.isComplete {
            let location = try engine.newLocation()
            defer { engine.remove(location) }
            let first = try #require(try await engine.open(location, systemClock) as? any QueryStorageUnderTest)
            let saved = try await first.saveAll(numbered(0..<6))
            let page = try await first.queryRecords(
                Q.query(sorts: [Q.sort("n")]), in: zoneID("_defaultZone"), of: alice, desiredKeys: nil, limit: 2)
            let cursor = try #require(page.cursor)
            try await first.close()
            let storage = try #require(try await engine.open(location, systemClock) as? any QueryStorageUnderTest)
            // A change after the restart still keeps the version the cursor needs.
            var moved = saved[4]
            moved.fields = [field("n", .int64Value(-1))]
            try await storage.saveAll([moved])
            let names = try await all(
                storage, try await storage.continueQuery(cursor, in: alice, desiredKeys: .sameAsQuery, limit: 2), limit: 2)
            #expect(names == ["r002", "r003", "r004", "r005"])
            try await storage.close()
        }
    }

    /// SQLite-specific: rows examined and the query plan.
    @Test func firstPagesInTheQueryOrderReadAboutAPage() async throws {
        try await withSQLiteStore { storage, _ in
            for start in stride(from: 0, to: 3_000, by: 400) {
                try await storage.saveAll(numbered(start..<min(start + 400, 3_000)))
            }
            let orders: [(Wire.QueryPredicate?, [Wire.QuerySortDescriptor])] = [
                (nil, []), (nil, [Q.sort("creationDate")]), (nil, [Q.sort("modificationDate", ascending: false)]),
                // Thousands of matches: read in order and filtered, not listed whole first.
                (Q.cmp("n", .greaterOrEqual, .int64Value(0)), []),
                (Q.cmp("n", .greaterOrEqual, .int64Value(0)), [Q.sort("creationDate", ascending: false)]),
            ]
            for (predicate, sorts) in orders {
                let query = Q.query(predicate, sorts: sorts)
                let page = try await storage.queryRecords(query, in: zoneID("_defaultZone"), of: alice, desiredKeys: nil, limit: 10)
                #expect(page.records.count == 10)
                #expect(page.recordsExamined == 11, "\(sorts)")
                let plan = try await storage.queryPlan(for: query, in: zoneID("_defaultZone"), of: alice)
                #expect(!plan.contains { $0.contains("USE TEMP B-TREE FOR ORDER BY") }, "\(sorts): \(plan)")
                #expect(!plan.contains { $0.contains("LIST SUBQUERY") }, "\(sorts): \(plan)")
                var cursor = try #require(page.cursor)
                var names = page.records.map(name)
                for _ in 0..<3 {
                    let next = try await storage.continueQuery(cursor, in: alice, desiredKeys: .sameAsQuery, limit: 10)
                    #expect(next.recordsExamined == 11)
                    names += next.records.map(name)
                    cursor = try #require(next.cursor)
                }
                #expect(Set(names).count == 40)
            }
        }
    }
}

/// The merge of changed records into a page compares sort values in Swift; it must order
/// them exactly as SQLite's ORDER BY does.
@Suite("Query keyset order")
struct QueryKeysetOrderTests {
    @Test func swiftOrdersSortValuesAsSQLiteDoes() throws {
        var values: [QueryKeyset.Value] = [
            .null, .integer(0), .integer(-1), .integer(3), .integer(Int64.max), .integer(Int64.min),
            .integer(9_007_199_254_740_993), .real(9_007_199_254_740_992), .real(2.5), .real(3), .real(-0.5),
            .real(-Double.infinity), .real(Double.infinity), .real(9.3e18), .real(-9.3e18),
            .text(""), .text("a"), .text("B"), .text("é"), .text("e\u{301}"), .text("z"), .text("\u{1F600}"),
        ]
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<30 { values.append(.integer(Int64.random(in: -5...5, using: &generator))) }
        for _ in 0..<30 { values.append(.real(Double(Int.random(in: -10...10, using: &generator)) / 2)) }
        let queue = try DatabaseQueue()
        let sqlite: [Int] = try queue.write { db in
            try db.execute(sql: "CREATE TABLE t (i INTEGER PRIMARY KEY, v)")
            for (i, value) in values.enumerated() {
                try db.execute(sql: "INSERT INTO t (i, v) VALUES (?, ?)", arguments: [i, value.databaseValue])
            }
            return try Int.fetchAll(db, sql: "SELECT i FROM t ORDER BY v ASC NULLS LAST, i")
        }
        let sorts = [QuerySort(key: .field("v"), ascending: true)]
        let swift = values.indices.sorted { a, b in
            let c = QueryKeyset.compare(
                QueryKeyset.Position(values: [values[a]], name: "", rowID: Int64(a)),
                QueryKeyset.Position(values: [values[b]], name: "", rowID: Int64(b)), sorts)
            return c != 0 ? c < 0 : a < b
        }
        #expect(swift == sqlite, "\(swift.map { values[$0] }) vs \(sqlite.map { values[$0] })")
    }
}
