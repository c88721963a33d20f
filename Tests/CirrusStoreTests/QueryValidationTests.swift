import CirrusWire
import Foundation
import Testing

@testable import CirrusStore

/// A query the server must refuse and the message it names the node with.
struct Refusal: Sendable, CustomTestStringConvertible {
    var query: Wire.Query
    var message: String
    var testDescription: String { message }

    init(_ predicate: Wire.QueryPredicate?, format: String = "", sorts: [Wire.QuerySortDescriptor] = [], type: String = "Note", _ message: String) {
        query = Q.query(predicate, type: type, sorts: sorts, format: format)
        self.message = message
    }
}

private func nested(_ depth: Int) -> Wire.QueryPredicate {
    (1..<depth).reduce(Q.cmp("a", .equals, .int64Value(1))) { inner, _ in Q.not(inner) }
}

private let one = Wire.FieldValue.Kind.int64Value(1)
private let somewhere = Wire.Location(latitude: 1, longitude: 2)

@Suite("Query validation")
struct QueryValidationTests {
    static let refusals: [Refusal] = [
        Refusal(
            Q.and(Q.cmp("a", .equals, one), Q.cmp("b", .beginsWith, .int64Value(2))), format: "a == 1 AND b BEGINSWITH 2",
            "predicate \"a == 1 AND b BEGINSWITH 2\": operand 2 of AND: BEGINSWITH needs a string value, got int64"),
        Refusal(Q.cmp("a", .unspecified, one), "predicate: a: no comparison operator"),
        Refusal(Q.cmp("a", Wire.ComparisonOperator(rawValue: 42), one), "predicate: a: unknown comparison operator 42"),
        Refusal(Q.cmp("a", .equals, nil), "predicate: a == needs a value, got none"),
        Refusal(Q.cmp("a", .in, one), "predicate: IN needs a list value, got int64"),
        Refusal(Q.cmp("a", .between, Q.ints(1, 2, 3)), "predicate: BETWEEN needs a list of 2 values (low, high), got 3"),
        Refusal(Q.cmp("a", .between, one), "predicate: BETWEEN needs a list value, got int64"),
        Refusal(Q.cmp("a", .contains, Q.strings("x")), "predicate: CONTAINS needs a single value (a list element), got string list"),
        Refusal(Q.cmp("a", .equals, Q.ints(1)), "predicate: == needs a single value, got int64 list"),
        Refusal(Q.cmp("a", .less, .bytesValue([1])), "predicate: < compares string, number, date values, got bytes"),
        Refusal(Q.cmp("a", .equals, .locationValue(somewhere)), "predicate: == cannot compare locations; use distanceToLocation"),
        Refusal(Q.cmp("a", .equals, .assetValue(Wire.Asset())), "predicate: assets cannot be compared"),
        Refusal(Q.cmp("a", .equals, .doubleValue(.nan)), "predicate: a ==: NaN compares with nothing"),
        Refusal(Q.cmp("a", .in, Q.doubles(1, .nan)), "predicate: a IN: NaN compares with nothing"),
        Refusal(Q.cmp("a", .equals, .referenceValue(Wire.Reference())), "predicate: a ==: a reference without a record ID"),
        Refusal(Q.cmp("", .equals, one), "predicate: empty key"),
        Refusal(Q.cmp("a.b", .equals, one), "predicate: key \"a.b\": key paths are not supported"),
        Refusal(Q.cmp("1a", .equals, one), "predicate: key \"1a\" is not a field name"),
        Refusal(Q.cmp("a b", .equals, one), "predicate: key \"a b\" is not a field name"),
        Refusal(Q.cmp("recordID", .equals, .stringValue("x")), "predicate: recordID takes reference values, got string"),
        Refusal(Q.cmp("creatorUserRecordID", .in, Q.strings("x")), "predicate: creatorUserRecordID takes reference values, got string list"),
        Refusal(Q.cmp("recordID", .less, .stringValue("x")), "predicate: recordID cannot be compared with <"),
        Refusal(Q.cmp("creationDate", .equals, one), "predicate: creationDate takes date values, got int64"),
        Refusal(Q.cmp("modificationDate", .beginsWith, .stringValue("2")), "predicate: modificationDate cannot be compared with BEGINSWITH"),
        Refusal(Q.text(" ,. !"), "predicate: self CONTAINS needs at least one word, got \" ,. !\""),
        Refusal(Q.text(""), "predicate: self CONTAINS needs at least one word, got \"\""),
        Refusal(
            Q.near("at", 1, 2, within: -1),
            "predicate: distanceToLocation: the radius must be a finite, non-negative number of meters, got -1.0"),
        Refusal(
            Q.near("at", 1, 2, within: .nan),
            "predicate: distanceToLocation: the radius must be a finite, non-negative number of meters, got nan"),
        Refusal(Q.near("at", 91, 2, within: 5), "predicate: distanceToLocation: (91.0, 2.0) is not a latitude and longitude"),
        Refusal(Q.near("at", 1, 2, within: 5, .beginsWith), "predicate: distanceToLocation compares with <, <=, > or >=, not beginsWith"),
        Refusal(Q.near("creationDate", 1, 2, within: 5), "predicate: distanceToLocation: creationDate is not a location field"),
        Refusal(
            Wire.QueryPredicate(node: .distance(Wire.DistancePredicate(key: "at", radiusMeters: 5))),
            "predicate: distanceToLocation needs a location to measure from"),
        Refusal(
            Q.and(Q.not(Q.cmp("a", .unspecified, one))),
            "predicate: operand 1 of AND: operand of NOT: a: no comparison operator"),
        Refusal(Q.not(Wire.QueryPredicate()), "predicate: operand of NOT: empty node (no comparison, AND, NOT, TRUEPREDICATE … it knows)"),
        Refusal(Wire.QueryPredicate(node: .notPredicate(Wire.NotPredicate())), "predicate: NOT without an operand"),
        Refusal(
            nested(17),
            "predicate: " + String(repeating: "operand of NOT: ", count: 16) + "nested deeper than 16 levels"),
        Refusal(Q.and(Array(repeating: Q.all, count: 300)), "predicate: operand 256 of AND: more than 256 nodes"),
        Refusal(
            Q.cmp("a", .in, .int64List(Wire.Int64List(values: Array(0..<1_001)))),
            "predicate: more than 1000 values in the lists of one predicate"),
        Refusal(nil, type: "", "query: invalid record type \"\""),
        Refusal(
            nil, sorts: [Q.sort("recordID")],
            "sort descriptor 1 (\"recordID\"): records cannot be sorted by recordID; sort by a field, creationDate or modificationDate"),
        Refusal(nil, sorts: [Q.sort("title"), Q.sort("a.b")], "sort descriptor 2 (\"a.b\"): key \"a.b\": key paths are not supported"),
        Refusal(nil, sorts: [Q.sort("")], "sort descriptor 1 (\"\"): empty key"),
        Refusal(
            nil, sorts: [Q.sort("creationDate", from: somewhere)],
            "sort descriptor 1 (\"creationDate\"): creationDate is not a location field; a relative location sorts a location field"),
        Refusal(
            nil, sorts: [Q.sort("at", from: Wire.Location(latitude: 0, longitude: 200))],
            "sort descriptor 1 (\"at\"): relative location (0.0, 200.0) is not a latitude and longitude"),
    ]

    // One case at a time: each opens a storage of every engine, and 40 PostgreSQL storages at
    // once would take most of the test server's connections.
    @Test(.serialized, arguments: refusals)
    func refused(_ refusal: Refusal) async throws {
        try await withQueryStore { storage, _ in
            try await storage.saveAll([item("a", [("a", .int64Value(1))])])
            let error = await storage.refusal(refusal.query)
            #expect(error?.code == .invalidArguments)
            #expect(error?.message == refusal.message)
        }
    }

    @Test func deepButSaneTreesAndLargeListsAreFine() async throws {
        try await withQueryStore { storage, _ in
            try await storage.saveAll([item("a", [("a", .int64Value(1))])])
            #expect(try await storage.names(nested(16)) == [])
            #expect(try await storage.names(nested(15)) == ["a"])
            #expect(try await storage.names(Q.cmp("a", .in, .int64List(Wire.Int64List(values: Array(0..<1_000))))) == ["a"])
            #expect(try await storage.names(Q.and(Array(repeating: Q.cmp("a", .equals, one), count: 255))) == ["a"])
        }
    }

    @Test(arguments: [0, -1, 401])
    func resultsLimitOutOfRange(limit: Int) async throws {
        try await withQueryStore { storage, _ in
            do {
                _ = try await storage.queryRecords(Q.query(), in: zoneID("_defaultZone"), of: alice, desiredKeys: nil, limit: limit)
                Issue.record("limit \(limit) accepted")
            } catch let error as StoreError {
                #expect(error.code == .invalidArguments)
                #expect(error.message == "results limit \(limit) out of range 1 ... 400")
            }
        }
    }

    @Test func aZoneOfAnotherOwnerIsNotFound() async throws {
        try await withQueryStore { storage, _ in
            do {
                _ = try await storage.queryRecords(Q.query(), in: zoneID("_defaultZone", in: bob), of: alice, desiredKeys: nil, limit: 5)
                Issue.record("bob's zone was queried in alice's database")
            } catch let error as StoreError {
                #expect(error.code == .zoneNotFound)
            }
        }
    }
}
