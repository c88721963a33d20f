import CirrusWire
import Foundation
import GRDB
import Testing

@testable import CirrusStore

/// Plan lines that read a whole table (a full-text virtual table is searched, not read whole).
private func scans(_ plan: [String]) -> [String] {
    plan.filter { $0.hasPrefix("SCAN") && !$0.contains("VIRTUAL TABLE") }
}

@Suite("Query indexes")
struct QueryIndexTests {
    /// 100,000 records in one transaction, inserted directly with the store's
    /// own index rows (`StoreRows.insertIndex`): `n` = i, `group` =
    /// "g(i % 10,000)" (10 records per group). Saving them through
    /// `modifyRecords` indexes them the same, only more slowly.
    private func hundredThousand(_ storage: SQLiteStorage) async throws {
        try await storage.write(weight: 100_000) { db in
            let databaseID = try StoreRows.ensureDatabase(db, alice)
            guard let zone = try StoreRows.liveZone(db, databaseID, "_defaultZone") else {
                throw StoreError(.zoneNotFound, "no default zone")
            }
            let now = Wire.Timestamp(seconds: 1_000, nanos: 0)
            for i in 0..<100_000 {
                var record = item("r\(i)", [("n", .int64Value(Int64(i))), ("group", .stringValue("g\(i % 10_000)"))])
                record.recordChangeTag = "t\(i)"
                record.creationDate = now
                record.modificationDate = now
                record.creatorUserRecordID = Wire.RecordID(recordName: "_alice")
                record.lastModifiedUserRecordID = Wire.RecordID(recordName: "_alice")
                try db.run(
                    sql: """
                        INSERT INTO records (zone_id, name, record_type, change_tag, change_seq, creator, data,
                            created_ns, modified_ns, modifier)
                        VALUES (?, ?, 'Note', ?, ?, '_alice', ?, 1000000000000, 1000000000000, '_alice')
                        """,
                    arguments: [zone.id, "r\(i)", record.recordChangeTag, i + 1, Data(record.serializedBytes())])
                try StoreRows.insertIndex(
                    db, recordID: db.lastInsertedRowID, zoneID: zone.id, record: record,
                    indexed: FieldIndexing.Indexed(all: true, text: true))
            }
            // Every field and the text are indexed, as the rows above say (``FieldIndexing``).
            try db.run(
                sql: "INSERT INTO indexed_fields (zone_id, record_type, key) VALUES (?, 'Note', ?)",
                arguments: [zone.id, FieldIndexing.everything])
            try db.run(sql: "UPDATE zones SET change_seq = 100000 WHERE id = ?", arguments: [zone.id])
        }
    }

    @Test func aQueryMatching10Of100000RecordsExaminesAbout10() async throws {
        try await withSQLiteStore { storage, _ in
            let start = ContinuousClock.now
            try await hundredThousand(storage)
            print("query index test: 100,000 records written in \(ContinuousClock.now - start)")
            let ids = Wire.ReferenceList(values: (0..<10).map { Wire.Reference(recordID: recordID("r\($0 * 7)")) })
            let cases: [(String, Wire.QueryPredicate, Int, String)] = [
                ("group == 'g42'", Q.cmp("group", .equals, .stringValue("g42")), 10, "record_values_by_value (zone_id=? AND record_type=? AND key=? AND kind=? AND value"),
                ("n BETWEEN {5000, 5009}", Q.cmp("n", .between, Q.ints(5_000, 5_009)), 10, "record_values_by_value (zone_id=? AND record_type=? AND key=? AND kind=? AND value"),
                ("n >= 0 AND group == 'g42'",
                 Q.and(Q.cmp("n", .greaterOrEqual, .int64Value(0)), Q.cmp("group", .equals, .stringValue("g42"))), 10, "record_values_by_value (zone_id=? AND record_type=? AND key=? AND kind=? AND value"),
                ("NOT n == 42 AND group == 'g42'",
                 Q.and(Q.not(Q.cmp("n", .equals, .int64Value(42))), Q.cmp("group", .equals, .stringValue("g42"))), 9, "record_values_by_value (zone_id=? AND record_type=? AND key=? AND kind=? AND value"),
                ("group IN {'g1', 'g2'} AND n < 30000",
                 Q.and(Q.cmp("group", .in, Q.strings("g1", "g2")), Q.cmp("n", .less, .int64Value(30_000))), 6, "record_values_by_value (zone_id=? AND record_type=? AND key=? AND kind=? AND value"),
                ("recordID IN {…10 IDs}", Q.cmp("recordID", .in, .referenceList(ids)), 10, "sqlite_autoindex_records_1"),
                ("self CONTAINS 'g42'", Q.text("g42"), 10, "VIRTUAL TABLE"),
            ]
            for (label, predicate, matches, index) in cases {
                let time = ContinuousClock.now
                let page = try await storage.queryRecords(
                    Q.query(predicate, sorts: [Q.sort("n")]), in: zoneID("_defaultZone"), of: alice, desiredKeys: nil, limit: 100)
                let elapsed = ContinuousClock.now - time
                #expect(page.records.count == matches, "\(label)")
                #expect(page.recordsExamined <= matches + 1, "\(label): examined \(page.recordsExamined)")
                let plan = try await storage.queryPlan(
                    for: Q.query(predicate, sorts: [Q.sort("n")]), in: zoneID("_defaultZone"), of: alice)
                #expect(scans(plan).isEmpty, "\(label): \(plan)")
                #expect(plan.contains { $0.contains(index) }, "\(label): \(plan)")
                print("query index test: \(label): \(page.records.count) matches, \(page.recordsExamined) examined, \(elapsed)")
            }

            // Everything, a page of 100: the cursor is a position, nothing is stored.
            let time = ContinuousClock.now
            let page = try await storage.queryRecords(Q.query(), in: zoneID("_defaultZone"), of: alice, desiredKeys: nil, limit: 100)
            print("query index test: TRUEPREDICATE page of 100 in \(ContinuousClock.now - time)")
            #expect(page.records.count == 100)
            #expect(page.recordsExamined == 101)
            #expect(try await storage.count("query_preimages") == 0)
            let cursor = try #require(page.cursor)
            let next = try await storage.continueQuery(cursor, in: alice, desiredKeys: .sameAsQuery, limit: 100)
            #expect(next.records.first?.recordID?.recordName == "r100")
            #expect(next.recordsExamined == 101)
        }
    }

    @Test func everyKindOfQueryIsPlannedOnAnIndex() async throws {
        try await withSQLiteStore { storage, _ in
            try await storage.saveAll((0..<50).map { (i: Int) -> Wire.Record in
                var fields: [(String, Wire.FieldValue.Kind)] = []
                fields.append(("n", .int64Value(Int64(i))))
                fields.append(("d", .doubleValue(Double(i))))
                fields.append(("s", .stringValue("s\(i)")))
                fields.append(("at", Q.location(Double(i), Double(i))))
                fields.append(("tags", Q.strings("t\(i)")))
                fields.append(("b", .bytesValue([UInt8(i)])))
                fields.append(("when", Q.date(Int64(i))))
                fields.append(("ref", reference(recordID("r0"), deleteSelf: false)))
                return item("r\(i)", fields)
            })
            let user = Wire.FieldValue.Kind.referenceValue(Wire.Reference(recordID: Wire.RecordID(recordName: "_alice")))
            let cases: [(Wire.QueryPredicate?, String)] = [
                (nil, "USING INDEX records_by_type (zone_id=? AND record_type=?)"),
                (Q.cmp("s", .beginsWith, .stringValue("s1")), "record_values_by_value (zone_id=? AND record_type=? AND key=? AND kind=? AND value"),
                (Q.cmp("d", .greater, .doubleValue(10)), "record_values_by_value (zone_id=? AND record_type=? AND key=? AND kind=? AND value"),
                (Q.cmp("n", .notEquals, .int64Value(3)), "record_values_by_value (zone_id=? AND record_type=? AND key=? AND kind=?)"),
                (Q.cmp("tags", .contains, .stringValue("t3")), "record_values_by_value (zone_id=? AND record_type=? AND key=? AND kind=? AND value"),
                (Q.cmp("b", .equals, .bytesValue([3])), "record_values_by_value (zone_id=? AND record_type=? AND key=? AND kind=? AND value"),
                (Q.cmp("when", .lessOrEqual, Q.date(3)), "record_values_by_value (zone_id=? AND record_type=? AND key=? AND kind=? AND value"),
                (Q.cmp("ref", .equals, reference(recordID("r0"), deleteSelf: false)), "record_values_by_value (zone_id=? AND record_type=? AND key=? AND kind=? AND value"),
                (Q.near("at", 10, 10, within: 200_000), "record_values_by_value (zone_id=? AND record_type=? AND key=? AND kind=? AND value"),
                (Q.near("at", 10, 10, within: 200_000, .greater), "record_values_by_value (zone_id=? AND record_type=? AND key=? AND kind=?)"),
                (Q.cmp("creatorUserRecordID", .equals, user), "records_by_creator"),
                (Q.cmp("creationDate", .greater, Q.date(0)), "records_by_created"),
                (Q.cmp("modificationDate", .less, Q.date(4_000_000_000)), "records_by_modified"),
                (Q.not(Q.cmp("n", .equals, .int64Value(3))), "USING INDEX records_by_type (zone_id=? AND record_type=?)"),
                (Q.cmp("recordID", .equals, .referenceValue(Wire.Reference(recordID: recordID("r3")))), "sqlite_autoindex_records_1 (zone_id=? AND name=?)"),
                (Q.and(Q.text("s3"), Q.cmp("n", .greater, .int64Value(1)), Q.cmp("modificationDate", .greater, Q.date(0))), "record_text"),
            ]
            for (predicate, index) in cases {
                let query = Q.query(predicate, sorts: [Q.sort("s", ascending: false), Q.sort("at", from: Wire.Location())])
                let plan = try await storage.queryPlan(for: query, in: zoneID("_defaultZone"), of: alice)
                #expect(scans(plan).isEmpty, "\(plan)")
                #expect(plan.contains { $0.contains(index) }, "\(index): \(plan)")
                _ = try await storage.queryAll(query)
            }
        }
    }

    @Test func migrationToV2IndexesRecordsWrittenUnderV1() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let record = Wire.Record(
            recordID: recordID("old"), recordType: "Note", recordChangeTag: "1-1",
            creationDate: Wire.Timestamp(seconds: 77, nanos: 0), modificationDate: Wire.Timestamp(seconds: 88, nanos: 0),
            creatorUserRecordID: Wire.RecordID(recordName: "_alice"), lastModifiedUserRecordID: Wire.RecordID(recordName: "_alice"),
            fields: [field("title", .stringValue("Vieux café")), field("tags", Q.strings("a", "b")), field("n", .int64Value(5))])
        do {
            let pool = try DatabasePool(path: (directory as NSString).appendingPathComponent(SQLiteStorage.fileName))
            try SQLiteStorage.migrator.migrate(pool, upTo: "v1")
            try await pool.write { db in
                try db.execute(sql: "INSERT INTO databases (container, scope, owner) VALUES (?, ?, ?)",
                               arguments: [alice.container, alice.scope.rawValue, alice.owner])
                try db.execute(sql: "INSERT INTO zones (database_id, name, db_seq) VALUES (1, '_defaultZone', 0)")
                try db.execute(
                    sql: "INSERT INTO records (zone_id, name, record_type, change_tag, change_seq, creator, data) VALUES (1, 'old', 'Note', '1-1', 1, '_alice', ?)",
                    arguments: [Data(record.serializedBytes())])
                // v1 rows: no kind.
                try db.execute(sql: "INSERT INTO record_fields (record_id, zone_id, record_type, key, list_index, text_value) VALUES (1, 1, 'Note', 'title', -1, 'Vieux café')")
            }
            try pool.close()
        }
        let storage = try SQLiteStorage(directory: directory)
        defer { try? storage.close() }
        #expect(try await storage.names(Q.cmp("title", .equals, .stringValue("Vieux café"))) == ["old"])
        #expect(try await storage.names(Q.cmp("tags", .contains, .stringValue("b"))) == ["old"])
        #expect(try await storage.names(Q.cmp("n", .equals, .int64Value(5))) == ["old"])
        #expect(try await storage.names(Q.text("CAFE")) == ["old"])
        #expect(try await storage.names(Q.cmp("creationDate", .equals, Q.date(77))) == ["old"])
        #expect(try await storage.names(Q.cmp("modificationDate", .equals, Q.date(88))) == ["old"])
        #expect(try await storage.count("record_values") == 4)
    }

    /// Records indexed under schema v6 (`record_fields`, a typed column per
    /// kind) answer every kind of comparison after v7 moved their rows to
    /// `record_values`, and sort as before.
    @Test func migrationToV7KeepsEveryKindOfValueQueryable() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let records = (0..<3).map { (i: Int) -> Wire.Record in
            var record = item("v\(i)", [
                ("n", .int64Value(Int64(i))), ("d", .doubleValue(Double(i) + 0.5)), ("s", .stringValue("s\(i)")),
                ("b", .bytesValue([UInt8(i)])), ("when", Q.date(Int64(100 + i))), ("tags", Q.strings("t\(i)", "all")),
                ("at", Q.location(Double(i), Double(i))), ("ref", reference(recordID("v\(i)"), deleteSelf: false)),
                ("empty", Q.strings()),
            ])
            record.recordChangeTag = "1-\(i + 1)"
            return record
        }
        do {
            let pool = try DatabasePool(path: (directory as NSString).appendingPathComponent(SQLiteStorage.fileName))
            try SQLiteStorage.migrator.migrate(pool, upTo: "v6-keyset-cursors")
            try await pool.write { db in
                try db.execute(sql: "INSERT INTO databases (container, scope, owner) VALUES (?, ?, ?)",
                               arguments: [alice.container, alice.scope.rawValue, alice.owner])
                try db.execute(sql: "INSERT INTO zones (database_id, name, db_seq, change_seq) VALUES (1, '_defaultZone', 0, 3)")
                for (i, record) in records.enumerated() {
                    try db.execute(
                        sql: """
                            INSERT INTO records (id, zone_id, name, record_type, change_tag, change_seq, creator, data)
                            VALUES (?, 1, ?, 'Note', ?, ?, '_alice', ?)
                            """,
                        arguments: [i + 1, record.recordID?.recordName, record.recordChangeTag, i + 1,
                                    Data(record.serializedBytes())])
                    for row in RecordCodec.indexRows(of: record) {
                        try db.execute(
                            sql: """
                                INSERT INTO record_fields (record_id, zone_id, record_type, key, list_index, kind,
                                    int_value, real_value, real_value2, text_value, blob_value)
                                VALUES (?, 1, 'Note', ?, ?, ?, ?, ?, ?, ?, ?)
                                """,
                            arguments: [i + 1, row.key, row.listIndex, row.kind.rawValue,
                                        row.int, row.real, row.real2, row.text, row.blob])
                    }
                }
            }
            try pool.close()
        }
        let storage = try SQLiteStorage(directory: directory)
        defer { try? storage.close() }
        // 9 fields, two list elements of `tags`: 10 rows per record.
        #expect(try await storage.count("record_values") == 30)
        #expect(try await storage.names(Q.cmp("n", .greater, .int64Value(0))) == ["v1", "v2"])
        #expect(try await storage.names(Q.cmp("d", .less, .doubleValue(1))) == ["v0"])
        #expect(try await storage.names(Q.cmp("n", .equals, .doubleValue(2))) == ["v2"])
        #expect(try await storage.names(Q.cmp("s", .beginsWith, .stringValue("s1"))) == ["v1"])
        #expect(try await storage.names(Q.cmp("b", .equals, .bytesValue([2]))) == ["v2"])
        #expect(try await storage.names(Q.cmp("when", .lessOrEqual, Q.date(101))) == ["v0", "v1"])
        #expect(try await storage.names(Q.cmp("tags", .contains, .stringValue("t2"))) == ["v2"])
        #expect(try await storage.names(Q.cmp("tags", .contains, .stringValue("all"))) == ["v0", "v1", "v2"])
        #expect(try await storage.names(Q.cmp("ref", .equals, reference(recordID("v1"), deleteSelf: false))) == ["v1"])
        #expect(try await storage.names(Q.near("at", 0, 0, within: 200_000)) == ["v0", "v1"])
        #expect(try await storage.names(Q.cmp("n", .notEquals, .int64Value(1))) == ["v0", "v2"])
        let sorted = try await storage.queryAll(Q.query(sorts: [Q.sort("d", ascending: false)]))
        #expect(sorted.map { $0.recordID?.recordName ?? "" } == ["v2", "v1", "v0"])
        let near = try await storage.queryAll(Q.query(sorts: [Q.sort("at", from: Wire.Location(latitude: 2, longitude: 2))]))
        #expect(near.map { $0.recordID?.recordName ?? "" } == ["v2", "v1", "v0"])

        // A record deleted after the upgrade takes its rows along.
        _ = try await storage.modifyRecords(RecordModification(deleting: [recordID("v0")]), in: alice, by: "_alice")
        #expect(try await storage.count("record_values") == 20)
    }

    @Test func theSystemSQLiteHasFTS5() async throws {
        try await withSQLiteStore { storage, _ in
            let options = try await storage.read { db in try String.fetchAll(db, sql: "PRAGMA compile_options") }
            #expect(options.contains("ENABLE_FTS5"))
        }
    }
}

@Suite("Query planning")
struct QueryPlanningTests {
    @Test func aSmallZoneIsReadWholeRatherThanAWordCommonToEveryDatabase() async throws {
        try await withSQLiteStore { storage, _ in
            try await storage.createZone("Small")
            try await storage.saveAll((0..<30).map { item("common\($0)", [("title", .stringValue("common word"))]) })
            try await storage.saveAll((0..<3).map { item("small\($0)", zone: "Small", [("title", .stringValue("common"))]) })
            // The default zone's text is indexed once a query searched it (``FieldIndexing``).
            #expect(try await storage.names(Q.text("word")).count == 30)
            let plan = try await storage.queryPlan(for: Q.query(Q.text("common")), in: zoneID("Small"), of: alice)
            #expect(plan.contains { $0.contains("records_by_type") }, "\(plan)")
            #expect(try await storage.names(Q.text("common"), zone: "Small") == ["small0", "small1", "small2"])
            let big = try await storage.queryPlan(for: Q.query(Q.text("word")), in: zoneID("_defaultZone"), of: alice)
            #expect(big.contains { $0.contains("rowid=?") }, "\(big)")
        }
    }

    @Test func aConjunctThatNothingMatchesEndsTheQueryBeforeAnyRecordIsRead() async throws {
        try await withSQLiteStore { storage, _ in
            try await storage.saveAll((0..<20).map { item("r\($0)", [("n", .int64Value(Int64($0)))]) })
            let query = Q.query(Q.and(Q.cmp("n", .greater, .int64Value(2)), Q.cmp("n", .equals, .int64Value(99))))
            let page = try await storage.queryRecords(query, in: zoneID("_defaultZone"), of: alice, desiredKeys: nil, limit: 10)
            #expect(page.records.isEmpty)
            #expect(page.recordsExamined == 0)
            let plan = try await storage.queryPlan(for: query, in: zoneID("_defaultZone"), of: alice)
            #expect(plan.isEmpty)
        }
    }

    /// A first page of a query without sort descriptors reads the type's records in order when
    /// their first rows match often enough to fill it within ``QueryPlanner/estimateBound``
    /// rows, counting no source; a page asking for more than that (or a plan without a page)
    /// counts, and drives from the source listing fewer than that. Both give the same records.
    @Test func aFirstPageThatTheFirstRowsFillReadsInOrderWithoutCounting() async throws {
        try await withSQLiteStore { storage, _ in
            for part in 0..<2 {
                try await storage.saveAll((part * 300..<(part + 1) * 300).map { item("r\($0)", [("n", .int64Value(Int64($0 % 4)))]) })
            }
            let query = Q.query(Q.cmp("n", .equals, .int64Value(1)))
            #expect(try await storage.names(query.predicate).count == 150)
            let ordered = try await storage.queryPlan(for: query, in: zoneID("_defaultZone"), of: alice, pageLimit: 5)
            #expect(ordered.contains { $0.contains("records_by_type") }, "\(ordered)")
            #expect(!ordered.contains { $0.contains("LIST SUBQUERY") }, "\(ordered)")
            // 16 matches in the first 64 rows: 400 would take 1,600 rows.
            let driven = try await storage.queryPlan(for: query, in: zoneID("_defaultZone"), of: alice, pageLimit: 400)
            #expect(driven.contains { $0.contains("LIST SUBQUERY") }, "\(driven)")
            #expect(try await storage.queryPlan(for: query, in: zoneID("_defaultZone"), of: alice) == driven)
            let page = try await storage.queryRecords(query, in: zoneID("_defaultZone"), of: alice, desiredKeys: nil, limit: 5)
            #expect(page.records.map { $0.recordID?.recordName ?? "?" } == ["r1", "r5", "r9", "r13", "r17"])
            // Every column a source's filter reads, through the probe (no source is selective):
            // the creator, last modifier, dates and name.
            let me = Wire.FieldValue.Kind.referenceValue(Wire.Reference(recordID: Wire.RecordID(recordName: "_alice")))
            let all = Q.query(Q.and(
                Q.cmp("n", .equals, .int64Value(1)), Q.cmp("creatorUserRecordID", .equals, me),
                Q.cmp("lastModifiedUserRecordID", .equals, me), Q.cmp("creationDate", .greater, Q.date(0)),
                Q.cmp("modificationDate", .greater, Q.date(0)),
                Q.cmp("recordID", .notEquals, .referenceValue(Wire.Reference(recordID: recordID("r1"))))))
            let probed = try await storage.queryPlan(for: all, in: zoneID("_defaultZone"), of: alice, pageLimit: 5)
            #expect(!probed.contains { $0.contains("LIST SUBQUERY") }, "\(probed)")
            let first = try await storage.queryRecords(all, in: zoneID("_defaultZone"), of: alice, desiredKeys: nil, limit: 5)
            #expect(first.records.map { $0.recordID?.recordName ?? "?" } == ["r5", "r9", "r13", "r17", "r21"])
        }
    }
}
