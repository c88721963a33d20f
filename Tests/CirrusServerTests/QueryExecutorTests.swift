import CirrusServer
import CirrusStore
import CirrusWire
import Foundation
import Testing

private func numbered(_ i: Int, zone: Wire.RecordZoneID = defaultZone) -> Wire.Record {
    var record = note(String(format: "q%02d", i), title: "note \(i)", zone: zone)
    record.fields.append(Wire.RecordField(key: "n", value: Wire.FieldValue(kind: .int64Value(Int64(i)))))
    record.fields.append(Wire.RecordField(
        key: "next", value: Wire.FieldValue(kind: .referenceValue(Wire.Reference(recordID: recordID(String(format: "q%02d", i + 1), zone: zone))))))
    return record
}

private func comparison(_ key: String, _ op: Wire.ComparisonOperator, _ value: Wire.FieldValue.Kind) -> Wire.QueryPredicate {
    Wire.QueryPredicate(node: .comparison(Wire.ComparisonPredicate(key: key, comparisonOperator: op, value: Wire.FieldValue(kind: value))))
}

extension OperationClient {
    /// One query page: the matched records and the completion.
    mutating func query(_ request: Wire.QueryRequest, scope: Wire.DatabaseScope = .private) async throws
        -> (records: [Wire.Record], cursor: Wire.QueryCursor?, complete: Wire.Complete)
    {
        let (events, complete) = try await self.run(.query(request), scope: scope)
        let records = events.compactMap { payload -> Wire.Record? in
            guard case .query(let event) = payload, case .recordMatched(let outcome) = event.callback,
                case .record(let record) = outcome.outcome
            else { return nil }
            #expect(outcome.recordID == record.recordID)
            return record
        }
        var cursor: Wire.QueryCursor?
        if case .query(let result) = complete.result { cursor = result.cursor }
        return (records, cursor, complete)
    }
}

@Suite("Queries over the wire, stored in SQLite")
struct QueryExecutorTests {
    @Test func pagesOfMatchedRecordsThenACursorUntilTheEnd() async throws {
        try await withStorageServer { port in
            var alice = try await OperationClient.connect(port: port, user: "alice")
            let (_, saved) = try await alice.save((0..<7).map { numbered($0) })
            #expect(saved.error == nil)
            let query = Wire.Query(
                recordType: "Note",
                predicate: comparison("n", .greaterOrEqual, .int64Value(1)),
                sortDescriptors: [Wire.QuerySortDescriptor(key: "n", ascending: false)])
            var page = try await alice.query(Wire.QueryRequest(
                start: .query(query), desiredKeys: ["n"], desiredKeysSpecified: true, resultsLimit: 4))
            #expect(page.complete.error == nil)
            #expect(page.records.map { $0.recordID?.recordName } == ["q06", "q05", "q04", "q03"])
            #expect(page.records.first?.recordID == recordID("q06"), "IDs come back as the client names its zones")
            #expect(page.records.allSatisfy { $0.fields.map(\.key) == ["n"] })
            var names = page.records.compactMap { $0.recordID?.recordName }
            while let cursor = page.cursor {
                page = try await alice.query(Wire.QueryRequest(start: .cursor(cursor), resultsLimit: 4))
                #expect(page.complete.error == nil)
                #expect(page.records.allSatisfy { $0.fields.map(\.key) == ["n"] }, "the cursor keeps the desired keys")
                names += page.records.compactMap { $0.recordID?.recordName }
            }
            #expect(names == ["q06", "q05", "q04", "q03", "q02", "q01"])
            await alice.client.close()
        }
    }

    @Test func referencesAndZonesAsTheClientNamesThem() async throws {
        try await withStorageServer { port in
            var alice = try await OperationClient.connect(port: port, user: "alice")
            let work = Wire.RecordZoneID(zoneName: "Work", ownerName: "__defaultOwner__")
            _ = try await alice.run(.modifyRecordZones(Wire.ModifyRecordZonesRequest(recordZonesToSave: [Wire.RecordZone(zoneID: work)])))
            _ = try await alice.save((0..<3).map { numbered($0, zone: work) } + (0..<3).map { numbered($0) })
            let pointsAtQ02 = comparison("next", .equals, .referenceValue(Wire.Reference(recordID: recordID("q02", zone: work))))
            let page = try await alice.query(Wire.QueryRequest(
                start: .query(Wire.Query(recordType: "Note", predicate: pointsAtQ02)), zoneID: work))
            #expect(page.records.map(\.recordID) == [recordID("q01", zone: work)])
            #expect(page.cursor == nil)
            let all = try await alice.query(Wire.QueryRequest(start: .query(Wire.Query(recordType: "Note"))))
            #expect(all.records.count == 3, "no zone = the default zone; no limit = the server's page size")
            await alice.client.close()
        }
    }

    @Test func noResultsLimitMeans100AndLargerLimitsStopAt400() async throws {
        try await withStorageServer { port in
            var alice = try await OperationClient.connect(port: port, user: "alice")
            _ = try await alice.save((0..<400).map { numbered($0) })
            _ = try await alice.save((400..<450).map { numbered($0) })
            let all = Wire.Query(recordType: "Note")
            let byDefault = try await alice.query(Wire.QueryRequest(start: .query(all)))
            #expect(byDefault.records.count == 100)
            #expect(byDefault.cursor != nil)
            let capped = try await alice.query(Wire.QueryRequest(start: .query(all), resultsLimit: 5_000))
            #expect(capped.records.count == 400)
            let rest = try await alice.query(Wire.QueryRequest(start: .cursor(try #require(capped.cursor)), resultsLimit: 5_000))
            #expect(rest.records.count == 50)
            #expect(rest.cursor == nil)
            await alice.client.close()
        }
    }

    @Test func badPredicatesCursorsAndZonesAreRefused() async throws {
        try await withStorageServer { port in
            var alice = try await OperationClient.connect(port: port, user: "alice")
            var bob = try await OperationClient.connect(port: port, user: "bob")
            _ = try await alice.save((0..<5).map { numbered($0) })

            var bad = comparison("title", .beginsWith, .int64Value(2))
            bad.format = "title BEGINSWITH 2"
            let refused = try await alice.query(Wire.QueryRequest(start: .query(Wire.Query(recordType: "Note", predicate: bad))))
            #expect(refused.complete.error?.code == .invalidArguments)
            #expect(refused.complete.error?.message == "predicate \"title BEGINSWITH 2\": BEGINSWITH needs a string value, got int64")

            let first = try await alice.query(Wire.QueryRequest(start: .query(Wire.Query(recordType: "Note")), resultsLimit: 2))
            let cursor = try #require(first.cursor)
            let stolen = try await bob.query(Wire.QueryRequest(start: .cursor(cursor)))
            #expect(stolen.records.isEmpty)
            #expect(stolen.complete.error?.code == .invalidArguments)
            #expect(stolen.complete.error?.message == "the query cursor is unknown or expired")
            let garbage = try await alice.query(Wire.QueryRequest(start: .cursor(Wire.QueryCursor(opaque: [1, 2, 3]))))
            #expect(garbage.complete.error?.code == .invalidArguments)

            let missing = Wire.RecordZoneID(zoneName: "Missing", ownerName: "__defaultOwner__")
            let noZone = try await alice.query(Wire.QueryRequest(start: .query(Wire.Query(recordType: "Note")), zoneID: missing))
            #expect(noZone.complete.error?.code == .zoneNotFound)
            let empty = try await alice.query(Wire.QueryRequest())
            #expect(empty.complete.error?.code == .invalidArguments)
            await alice.client.close()
            await bob.client.close()
        }
    }

    @Test func aCursorAlteredInOneBitIsRefusedAndTheRealOneStillWorks() async throws {
        try await withStorageServer { port in
            var alice = try await OperationClient.connect(port: port, user: "alice")
            _ = try await alice.save((0..<5).map { numbered($0) })
            let first = try await alice.query(Wire.QueryRequest(start: .query(Wire.Query(recordType: "Note")), resultsLimit: 2))
            let cursor = try #require(first.cursor)
            for index in [0, cursor.opaque.count / 2, cursor.opaque.count - 1] {
                var altered = cursor.opaque
                altered[index] ^= 0x10
                let refused = try await alice.query(Wire.QueryRequest(start: .cursor(Wire.QueryCursor(opaque: altered))))
                #expect(refused.records.isEmpty)
                #expect(refused.complete.error?.code == .invalidArguments, "byte \(index)")
                #expect(refused.complete.error?.message == "the query cursor is unknown or expired")
            }
            let next = try await alice.query(Wire.QueryRequest(start: .cursor(cursor), resultsLimit: 2))
            #expect(next.records.count == 2)
            await alice.client.close()
        }
    }
}
