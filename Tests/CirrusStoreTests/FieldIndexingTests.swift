import CirrusWire
import Foundation
import GRDB
import Testing

@testable import CirrusStore

/// Fields indexed once a query names them (``FieldIndexing``, schema v16).
@Suite("Field indexing on first query")
struct FieldIndexingTests {
    /// What `indexed_fields` says of a zone's `Note`s: key → whether its build is complete.
    private func markers(_ storage: SQLiteStorage, zone: String = "_defaultZone") async throws -> [String: Bool] {
        try await storage.read { db in
            let rows = try Row.fetchAll(
                db,
                sql: """
                    SELECT f.key, f.built_through IS NULL FROM indexed_fields f JOIN zones z ON z.id = f.zone_id
                    WHERE z.name = ? AND f.record_type = 'Note'
                    """,
                arguments: [zone])
            return Dictionary(uniqueKeysWithValues: rows.map { ($0[0] as String, $0[1] as Bool) })
        }
    }

    @Test func savesIndexNoFieldUntilAQueryNamesItAndThenEveryOne() async throws {
        try await withSQLiteStore { storage, _ in
            try await storage.saveAll((0..<5).map {
                item("r\($0)", [("n", .int64Value(Int64($0))), ("title", .stringValue("word \($0)")), ("other", .int64Value(1))])
            })
            #expect(try await storage.count("record_values") == 0)
            #expect(try await storage.count("record_text") == 0)
            #expect(try await markers(storage).isEmpty)

            // The first query on n indexes n for every record, and only n (and the record's own
            // columns, which every query reads).
            #expect(try await storage.names(Q.cmp("n", .greaterOrEqual, .int64Value(3))) == ["r3", "r4"])
            #expect(try await storage.count("record_values") == 5)
            #expect(try await markers(storage) == ["n": true, FieldIndexing.system: true])

            // Saves index it from then on; other fields still not.
            try await storage.saveAll([item("r5", [("n", .int64Value(5)), ("other", .int64Value(1))])])
            #expect(try await storage.count("record_values") == 6)
            #expect(try await storage.names(Q.cmp("n", .greaterOrEqual, .int64Value(3))) == ["r3", "r4", "r5"])

            // A text search indexes the text; a sort indexes its field.
            #expect(try await storage.names(Q.text("word")) == ["r0", "r1", "r2", "r3", "r4"])
            #expect(try await storage.count("record_text") == 5)
            let sorted = try await storage.names(nil, sorts: [Q.sort("other", ascending: false), Q.sort("n", ascending: false)])
            #expect(sorted == ["r5", "r4", "r3", "r2", "r1", "r0"])
            #expect(try await storage.count("record_values") == 12)
            #expect(try await markers(storage) == ["n": true, FieldIndexing.text: true, "other": true, FieldIndexing.system: true])
        }
    }

    /// A build runs in chunks of ``FieldIndexing/chunkRecords`` (one write transaction each)
    /// and ends with every record indexed.
    @Test func aBuildOfSeveralChunksIndexesEveryRecord() async throws {
        try await withSQLiteStore { storage, _ in
            let count = FieldIndexing.chunkRecords * 2 + 500
            for start in stride(from: 0, to: count, by: 400) {
                try await storage.saveAll((start..<min(start + 400, count)).map { item("r\($0)", [("n", .int64Value(Int64($0)))]) })
            }
            let names = try await storage.names(Q.cmp("n", .greaterOrEqual, .int64Value(0)), sorts: [Q.sort("n")])
            #expect(names == (0..<count).map { "r\($0)" })
            #expect(try await storage.count("record_values") == count)
            #expect(try await markers(storage) == ["n": true, FieldIndexing.system: true])
        }
    }

    /// Records saved while an index is built (before and after where the build reached, and new
    /// ones) end with the rows of their current version, each once.
    @Test func savesDuringABuildEndWithTheirCurrentRows() async throws {
        try await withSQLiteStore { storage, _ in
            let count = FieldIndexing.chunkRecords * 2
            for start in stride(from: 0, to: count, by: 400) {
                try await storage.saveAll((start..<start + 400).map { item("r\($0)", [("n", .int64Value(Int64($0)))]) })
            }
            let zone = try await storage.read { db in try #require(try StoreRows.liveZone(db, 1, "_defaultZone")).id }
            // The record's own columns first (a field's build waits for them).
            try await storage.buildIndex(FieldIndexing.Needs(keys: [], text: false, system: true), zoneID: zone, recordType: "Note")
            let needs = FieldIndexing.Needs(keys: ["n"], text: false)
            let first = try await storage.write(weight: 1) { db in
                try FieldIndexing.build(db, zoneID: zone, recordType: "Note", needs)
            }
            #expect(!first)
            #expect(try await storage.count("record_values") == FieldIndexing.chunkRecords)

            // One already indexed, one not yet, one new: each with a changed value.
            let fetched = try await storage.fetchRecords(
                [recordID("r10"), recordID("r1500")], desiredKeys: nil, in: alice
            ).compactMap(\.record)
            let changed = fetched.map { record in
                var record = record
                record.fields = [field("n", .int64Value(-1))]
                return record
            }
            try await storage.saveAll(changed + [item("new", [("n", .int64Value(-1))])])
            #expect(try await storage.count("record_values") == FieldIndexing.chunkRecords + 2)

            try await storage.buildIndex(needs, zoneID: zone, recordType: "Note")
            #expect(try await storage.count("record_values") == count + 1)
            #expect(try await storage.names(Q.cmp("n", .equals, .int64Value(-1))) == ["r10", "r1500", "new"])
            #expect(try await storage.names(Q.cmp("n", .equals, .int64Value(10))) == [])
        }
    }

    /// Records in the partial indexes of their own columns (schema v17).
    private func systemIndexed(_ storage: SQLiteStorage) async throws -> Int {
        try await storage.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM records WHERE sys_indexed = 1") ?? 0 }
    }

    /// The record's own columns (type, dates, creator: ``FieldIndexing/system``): saves leave
    /// them out of their indexes until a query reads the zone and type, which has every record
    /// of the type put in, in chunks of the zone in change order; records saved during the
    /// build (reached, not yet reached, new) and after it are in them too, other types are
    /// not, and each query finds every record.
    @Test func theRecordsOwnColumnsAreIndexedOnceAQueryNeedsThem() async throws {
        try await withSQLiteStore { storage, _ in
            let count = FieldIndexing.chunkRecords * 2 + 300
            for start in stride(from: 0, to: count, by: 400) {
                try await storage.saveAll((start..<min(start + 400, count)).map { item("r\($0)", [("n", .int64Value(Int64($0)))]) })
            }
            try await storage.saveAll((0..<3).map { item("t\($0)", type: "Task", [("n", .int64Value(1))]) })
            #expect(try await systemIndexed(storage) == 0)
            #expect(try await markers(storage).isEmpty)

            // The first chunk of a build, then saves of a record it reached, one it did not, and a new one.
            let zone = try await storage.read { db in try #require(try StoreRows.liveZone(db, 1, "_defaultZone")).id }
            let needs = FieldIndexing.Needs(keys: [], text: false, system: true)
            let first = try await storage.write(weight: 1) { db in
                try FieldIndexing.build(db, zoneID: zone, recordType: "Note", needs)
            }
            #expect(!first)
            #expect(try await systemIndexed(storage) == FieldIndexing.chunkRecords)
            #expect(try await markers(storage) == [FieldIndexing.system: false])
            let fetched = try await storage.fetchRecords(
                [recordID("r10"), recordID("r1500")], desiredKeys: nil, in: alice
            ).compactMap(\.record)
            try await storage.saveAll(fetched + [item("new", [("n", .int64Value(-1))])])
            #expect(try await systemIndexed(storage) == FieldIndexing.chunkRecords + 2)

            // A query sorted by creation date completes the build before it reads; the zone's
            // other type stays out.
            let all = Set((0..<count).map { "r\($0)" } + ["new"])
            let newest = try await storage.names(nil, sorts: [Q.sort("creationDate", ascending: false)])
            #expect(newest.count == count + 1 && Set(newest) == all)
            #expect(try await systemIndexed(storage) == count + 1)
            #expect(try await markers(storage) == [FieldIndexing.system: true])

            // Filters on the creator and the dates read the partial indexes; later saves are in them.
            try await storage.saveAll([item("later", [("n", .int64Value(-2))])])
            #expect(try await systemIndexed(storage) == count + 2)
            let user = Wire.FieldValue.Kind.referenceValue(Wire.Reference(recordID: Wire.RecordID(recordName: "_alice")))
            #expect(Set(try await storage.names(Q.cmp("creatorUserRecordID", .equals, user))) == all.union(["later"]))
            #expect(Set(try await storage.names(Q.cmp("modificationDate", .greater, Q.date(0)))) == all.union(["later"]))
            #expect(try await storage.names(Q.cmp("creationDate", .less, Q.date(0))) == [])

            // The other type, once a query reads it.
            #expect(try await storage.names(nil, type: "Task") == ["t0", "t1", "t2"])
            #expect(try await systemIndexed(storage) == count + 5)
        }
    }

    /// A later page of a query whose fields lost their index (as a cursor made by a store from
    /// before schema v16 finds them) has them indexed again before it reads.
    @Test func aLaterPageIndexesWhatItsQueryNeeds() async throws {
        try await withSQLiteStore { storage, _ in
            try await storage.saveAll((0..<30).map { item("r\($0)", [("n", .int64Value(Int64($0)))]) })
            let query = Q.query(Q.cmp("n", .less, .int64Value(20)), sorts: [Q.sort("n")])
            let page = try await storage.queryRecords(query, in: zoneID("_defaultZone"), of: alice, desiredKeys: nil, limit: 10)
            let cursor = try #require(page.cursor)
            try await storage.write(weight: 1) { db in
                try db.execute(sql: "DELETE FROM indexed_fields")
                try db.execute(sql: "DELETE FROM record_values")
            }
            let next = try await storage.continueQuery(cursor, in: alice, desiredKeys: .sameAsQuery, limit: 10)
            #expect(next.records.map { $0.recordID?.recordName ?? "" } == (10..<20).map { "r\($0)" })
            #expect(try await storage.count("record_values") == 30)
        }
    }

    /// Each field a query indexes costs a read of the zone's records of the type once: past
    /// ``FieldIndexing/maximumIndexedFields`` a query naming a new one is refused, and the
    /// indexed ones go on working.
    @Test func queriesIndexAtMostTheMaximumOfFieldsPerZoneAndType() async throws {
        try await withSQLiteStore { storage, _ in
            try await storage.saveAll([item("r", [("f0", .int64Value(1))])])
            for i in 0..<FieldIndexing.maximumIndexedFields {
                #expect(try await storage.names(Q.cmp("f\(i)", .equals, .int64Value(1))) == (i == 0 ? ["r"] : []))
            }
            let refusal = await storage.refusal(Q.query(Q.cmp("another", .equals, .int64Value(1))))
            #expect(refusal?.code == .limitExceeded)
            #expect(refusal?.message.contains("field another is not indexed") == true, "\(String(describing: refusal))")
            #expect(await storage.refusal(Q.query(Q.text("words")))?.code == .limitExceeded)
            #expect(try await storage.names(Q.cmp("f0", .equals, .int64Value(1))) == ["r"])
            // The record's own columns are not a field a client names: not counted, never refused.
            #expect(try await storage.count("indexed_fields") == FieldIndexing.maximumIndexedFields + 1)
            #expect(try await storage.names(nil, sorts: [Q.sort("creationDate")]) == ["r"])
        }
    }

    @Test func aDeletedZoneTakesItsIndexStateAlong() async throws {
        try await withSQLiteStore { storage, _ in
            try await storage.createZone("Z")
            try await storage.saveAll([item("z", zone: "Z", [("n", .int64Value(1))])])
            #expect(try await storage.names(Q.cmp("n", .equals, .int64Value(1)), zone: "Z") == ["z"])
            #expect(try await markers(storage, zone: "Z") == ["n": true, FieldIndexing.system: true])
            _ = try await storage.modifyZones(saving: [], deleting: [zoneID("Z")], in: alice)
            #expect(try await storage.count("indexed_fields") == 0)
            #expect(try await storage.count("record_values") == 0)
        }
    }
}
