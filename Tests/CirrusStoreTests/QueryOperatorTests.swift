import CirrusWire
import Foundation
import Testing

@testable import CirrusStore

@Suite("Query operators and types")
struct QueryOperatorTests {
    /// Records whose field `n` holds every kind of value, and one without it.
    private func numbers(_ storage: any QueryStorageUnderTest) async throws {
        try await storage.saveAll([
            item("i1", [("n", .int64Value(1))]),
            item("i2", [("n", .int64Value(2))]),
            item("d2", [("n", .doubleValue(2.0))]),
            item("d25", [("n", .doubleValue(2.5))]),
            item("big", [("n", .int64Value(Int64.max))]),
            item("text5", [("n", .stringValue("5"))]),
            item("list12", [("n", Q.ints(1, 2))]),
            item("missing", [("other", .int64Value(1))]),
        ])
    }

    @Test func int64AndDoubleCompareNumericallyWithEachOther() async throws {
        try await withQueryStore { storage, _ in
            try await numbers(storage)
            #expect(try await storage.names(Q.cmp("n", .equals, .int64Value(2))) == ["i2", "d2"])
            #expect(try await storage.names(Q.cmp("n", .equals, .doubleValue(2))) == ["i2", "d2"])
            #expect(try await storage.names(Q.cmp("n", .equals, .doubleValue(2.5))) == ["d25"])
            #expect(try await storage.names(Q.cmp("n", .less, .doubleValue(2.5))) == ["i1", "i2", "d2"])
            #expect(try await storage.names(Q.cmp("n", .lessOrEqual, .int64Value(2))) == ["i1", "i2", "d2"])
            #expect(try await storage.names(Q.cmp("n", .greater, .int64Value(2))) == ["d25", "big"])
            #expect(try await storage.names(Q.cmp("n", .greaterOrEqual, .doubleValue(2.5))) == ["d25", "big"])
            #expect(try await storage.names(Q.cmp("n", .greater, .doubleValue(9.3e18))) == [])
            #expect(try await storage.names(Q.cmp("n", .less, .doubleValue(9.3e18))).count == 5)
        }
    }

    @Test func aValueOfAnotherTypeAListOrNoFieldMatchesNoComparison() async throws {
        try await withQueryStore { storage, _ in
            try await numbers(storage)
            #expect(try await storage.names(Q.cmp("n", .equals, .stringValue("5"))) == ["text5"])
            #expect(try await storage.names(Q.cmp("n", .equals, .int64Value(5))) == [])
            #expect(try await storage.names(Q.cmp("n", .equals, .int64Value(1))) == ["i1"], "not the list [1, 2]")
            #expect(try await storage.names(Q.cmp("n", .less, .stringValue("9"))) == ["text5"])
        }
    }

    @Test func notEqualsNeedsTheFieldButNotMatchesWhatTheComparisonDoesNot() async throws {
        try await withQueryStore { storage, _ in
            try await numbers(storage)
            #expect(try await storage.names(Q.cmp("n", .notEquals, .int64Value(2))) == ["i1", "d25", "big"])
            #expect(
                try await storage.names(Q.not(Q.cmp("n", .equals, .int64Value(2))))
                    == ["i1", "d25", "big", "text5", "list12", "missing"])
            #expect(try await storage.names(Q.not(Q.not(Q.cmp("n", .equals, .int64Value(2))))) == ["i2", "d2"])
            #expect(try await storage.names(Q.not(Q.cmp("n", .notEquals, .int64Value(2)))) == ["i2", "d2", "text5", "list12", "missing"])
        }
    }

    @Test func stringsCompareByteWiseAndCaseSensitively() async throws {
        try await withQueryStore { storage, _ in
            try await storage.saveAll([
                item("lower", [("s", .stringValue("apple"))]),
                item("upper", [("s", .stringValue("Apple"))]),
                item("accent", [("s", .stringValue("épée"))]),
                item("decomposed", [("s", .stringValue("e\u{301}pée"))]),
                item("empty", [("s", .stringValue(""))]),
                item("max", [("s", .stringValue("a\u{10FFFF}z"))]),
            ])
            #expect(try await storage.names(Q.cmp("s", .equals, .stringValue("apple"))) == ["lower"])
            #expect(try await storage.names(Q.cmp("s", .equals, .stringValue("épée"))) == ["accent"], "no Unicode folding")
            #expect(try await storage.names(Q.cmp("s", .less, .stringValue("apple"))) == ["upper", "empty"])
            #expect(try await storage.names(Q.cmp("s", .greater, .stringValue("apple"))) == ["accent", "decomposed", "max"])
            #expect(try await storage.names(Q.cmp("s", .beginsWith, .stringValue("ap"))) == ["lower"])
            #expect(try await storage.names(Q.cmp("s", .beginsWith, .stringValue("A"))) == ["upper"])
            #expect(try await storage.names(Q.cmp("s", .beginsWith, .stringValue("é"))) == ["accent"])
            #expect(try await storage.names(Q.cmp("s", .beginsWith, .stringValue("a\u{10FFFF}"))) == ["max"])
            #expect(try await storage.names(Q.cmp("s", .beginsWith, .stringValue(""))).count == 6)
            #expect(try await storage.names(Q.cmp("s", .between, Q.strings("A", "b"))) == ["lower", "upper", "max"])
            #expect(try await storage.names(Q.cmp("s", .in, Q.strings("Apple", "épée", "nope"))) == ["upper", "accent"])
        }
    }

    @Test func datesCompareWithDates() async throws {
        try await withQueryStore { storage, _ in
            try await storage.saveAll([
                item("d100", [("when", Q.date(100))]),
                item("d200", [("when", .dateValue(Wire.Timestamp(seconds: 200, nanos: 5)))]),
                item("d300", [("when", Q.date(300))]),
                item("int200", [("when", .int64Value(200))]),
            ])
            #expect(try await storage.names(Q.cmp("when", .equals, Q.date(100))) == ["d100"])
            #expect(try await storage.names(Q.cmp("when", .greater, Q.date(200))) == ["d200", "d300"], "5 ns later")
            #expect(try await storage.names(Q.cmp("when", .lessOrEqual, Q.date(200))) == ["d100"])
            #expect(try await storage.names(Q.cmp("when", .between, Q.dates(100, 300))) == ["d100", "d200", "d300"])
            #expect(try await storage.names(Q.cmp("when", .in, Q.dates(100, 300))) == ["d100", "d300"])
            #expect(try await storage.names(Q.cmp("when", .notEquals, Q.date(100))) == ["d200", "d300"])
            #expect(try await storage.names(Q.cmp("when", .equals, .int64Value(200))) == ["int200"], "an int is no date")
        }
    }

    @Test func inMatchesSingleValuesContainsMatchesListElements() async throws {
        try await withQueryStore { storage, _ in
            try await storage.saveAll([
                item("red", [("color", .stringValue("red")), ("tags", Q.strings("warm", "bright"))]),
                item("blue", [("color", .stringValue("blue")), ("tags", Q.strings("cold"))]),
                item("lists", [("color", Q.strings("red", "blue")), ("nums", Q.ints(1, 2, 3))]),
                item("doubles", [("nums", Q.doubles(2.0, 7.5))]),
                item("empty", [("tags", Q.strings())]),
            ])
            #expect(try await storage.names(Q.cmp("color", .in, Q.strings("red", "green"))) == ["red"])
            #expect(try await storage.names(Q.cmp("color", .in, Q.strings())) == [])
            #expect(try await storage.names(Q.cmp("tags", .contains, .stringValue("warm"))) == ["red"])
            #expect(try await storage.names(Q.cmp("color", .contains, .stringValue("red"))) == ["lists"], "lists only")
            #expect(try await storage.names(Q.cmp("nums", .contains, .int64Value(2))) == ["lists", "doubles"])
            #expect(try await storage.names(Q.cmp("nums", .contains, .doubleValue(7.5))) == ["doubles"])
            #expect(try await storage.names(Q.not(Q.cmp("tags", .contains, .stringValue("cold")))) == ["red", "lists", "doubles", "empty"])
        }
    }

    @Test func betweenIsInclusiveAndEmptyWhenReversed() async throws {
        try await withQueryStore { storage, _ in
            try await storage.saveAll((1...5).map { item("n\($0)", [("n", .int64Value(Int64($0)))]) })
            #expect(try await storage.names(Q.cmp("n", .between, Q.ints(2, 4))) == ["n2", "n3", "n4"])
            #expect(try await storage.names(Q.cmp("n", .between, Q.doubles(1.5, 2.5))) == ["n2"])
            #expect(try await storage.names(Q.cmp("n", .between, Q.ints(4, 2))) == [])
        }
    }

    @Test func bytesCompareForEquality() async throws {
        try await withQueryStore { storage, _ in
            try await storage.saveAll([
                item("a", [("b", .bytesValue([1, 2]))]),
                item("b", [("b", .bytesValue([1, 2, 3]))]),
                item("l", [("bl", .bytesList(Wire.BytesList(values: [[9], [1, 2]])))]),
            ])
            #expect(try await storage.names(Q.cmp("b", .equals, .bytesValue([1, 2]))) == ["a"])
            #expect(try await storage.names(Q.cmp("b", .notEquals, .bytesValue([1, 2]))) == ["b"])
            #expect(try await storage.names(Q.cmp("b", .in, .bytesList(Wire.BytesList(values: [[1, 2, 3], [7]])))) == ["b"])
            #expect(try await storage.names(Q.cmp("bl", .contains, .bytesValue([1, 2]))) == ["l"])
        }
    }

    @Test func referencesMatchByRecordNameInTheSameZone() async throws {
        try await withQueryStore { storage, _ in
            try await storage.createZone("Other")
            try await storage.saveAll([
                item("plain", [("owner", reference(recordID("target"), deleteSelf: false))]),
                item("elsewhere", [("owner", reference(recordID("other-target"), deleteSelf: false))]),
                item("string", [("owner", .stringValue("target"))]),
                item("list", [("owners", .referenceList(Wire.ReferenceList(values: [
                    Wire.Reference(recordID: recordID("x"), action: .none),
                    Wire.Reference(recordID: recordID("target"), action: .none),
                ])))]),
            ])
            let target = reference(recordID("target"), deleteSelf: false)
            #expect(try await storage.names(Q.cmp("owner", .equals, target)) == ["plain"])
            #expect(try await storage.names(Q.cmp("owner", .notEquals, target)) == ["elsewhere"])
            #expect(try await storage.names(Q.cmp("owner", .equals, .stringValue("target"))) == ["string"], "a string is no reference")
            #expect(try await storage.names(Q.cmp("owners", .contains, target)) == ["list"])
            let zoneless = Wire.FieldValue.Kind.referenceValue(Wire.Reference(recordID: Wire.RecordID(recordName: "target")))
            #expect(try await storage.names(Q.cmp("owner", .equals, zoneless)) == ["plain"], "no zone = the queried zone")
            // A reference to "target" in another zone is another record: it matches no reference
            // stored here (and none can be stored: a reference stays in its record's zone).
            let both = Wire.FieldValue.Kind.referenceList(Wire.ReferenceList(values: [
                Wire.Reference(recordID: recordID("target", zone: "Other")), Wire.Reference(recordID: recordID("other-target")),
            ]))
            #expect(try await storage.names(Q.cmp("owner", .in, both)) == ["elsewhere"])
            let otherZone = reference(recordID("target", zone: "Other"), deleteSelf: false)
            #expect(try await storage.names(Q.cmp("owner", .equals, otherZone)) == [])
        }
    }

    @Test func systemFields() async throws {
        try await withQueryStore(clock: SteppingClock(start: 1_000).clock) { storage, _ in
            try await storage.saveAll([item("first", in: publicDB)], in: publicDB, by: "_alice")  // created at 1000
            try await storage.saveAll([item("second", in: publicDB)], in: publicDB, by: "_bob")  // 1001
            try await storage.saveAll([item("third", in: publicDB)], in: publicDB, by: "_alice")  // 1002
            let names = { (predicate: Wire.QueryPredicate) in try await storage.names(predicate, in: publicDB) }
            let user = { (name: String) in
                Wire.FieldValue.Kind.referenceValue(Wire.Reference(recordID: Wire.RecordID(
                    recordName: name, zoneID: Wire.RecordZoneID(zoneName: "_defaultZone", ownerName: "__defaultOwner__"))))
            }
            #expect(try await names(Q.cmp("creatorUserRecordID", .equals, user("_alice"))) == ["first", "third"])
            #expect(try await names(Q.cmp("creatorUserRecordID", .notEquals, user("_alice"))) == ["second"])
            #expect(try await names(Q.cmp("lastModifiedUserRecordID", .equals, user("_bob"))) == ["second"])
            #expect(try await names(Q.cmp("creationDate", .greater, Q.date(1_000))) == ["second", "third"])
            #expect(try await names(Q.cmp("creationDate", .between, Q.dates(1_000, 1_001))) == ["first", "second"])
            #expect(try await names(Q.cmp("modificationDate", .lessOrEqual, Q.date(1_001))) == ["first", "second"])
            let id = { (name: String) in Wire.Reference(recordID: recordID(name, in: publicDB)) }
            #expect(try await names(Q.cmp("recordID", .equals, .referenceValue(id("second")))) == ["second"])
            #expect(try await names(Q.cmp("recordID", .notEquals, .referenceValue(id("second")))) == ["first", "third"])
            let otherZone = Wire.Reference(recordID: Wire.RecordID(recordName: "second", zoneID: Wire.RecordZoneID(zoneName: "Z")))
            #expect(try await names(Q.cmp("recordID", .equals, .referenceValue(otherZone))) == [])
            #expect(try await names(Q.cmp("recordID", .notEquals, .referenceValue(otherZone))) == ["first", "second", "third"])
            #expect(
                try await names(Q.cmp("recordID", .in, .referenceList(Wire.ReferenceList(values: [id("third"), id("first")]))))
                    == ["first", "third"])
            // Alice saves her record again: modified later than everything else.
            let third = try #require(try await storage.fetch(recordID("third", in: publicDB), in: publicDB).record)
            _ = try await storage.modifyRecords(
                RecordModification(saving: [third], savePolicy: .allKeys), in: publicDB, by: "_alice")
            #expect(try await names(Q.cmp("modificationDate", .greater, Q.date(1_002))) == ["third"])
        }
    }

    @Test func theQueryLooksAtOneRecordTypeInOneZoneAndSkipsEncryptedFields() async throws {
        try await withQueryStore { storage, _ in
            try await storage.createZone("Z")
            var secret = item("secret", [("n", .int64Value(1))])
            secret.fields[0].isEncrypted = true
            try await storage.saveAll([
                item("note", [("n", .int64Value(1))]), item("task", type: "Task", [("n", .int64Value(1))]),
                item("inZ", zone: "Z", [("n", .int64Value(1))]), secret,
            ])
            #expect(try await storage.names(Q.cmp("n", .equals, .int64Value(1))) == ["note"])
            #expect(try await storage.names(Q.cmp("n", .equals, .int64Value(1)), type: "Task") == ["task"])
            #expect(try await storage.names(Q.cmp("n", .equals, .int64Value(1)), zone: "Z") == ["inZ"])
            #expect(try await storage.names(nil, in: bob) == [])
        }
    }

    @Test func constantsAndConjunctions() async throws {
        try await withQueryStore { storage, _ in
            try await storage.saveAll((1...6).map {
                item("n\($0)", [("n", .int64Value(Int64($0))), ("even", .int64Value($0 % 2 == 0 ? 1 : 0))])
            })
            #expect(try await storage.names(Q.all).count == 6)
            #expect(try await storage.names(Q.none) == [])
            #expect(try await storage.names(Q.not(Q.none)).count == 6)
            #expect(try await storage.names(Q.and()).count == 6)
            #expect(try await storage.names(Q.and(Q.all, Q.none)) == [])
            let evenAbove2 = Q.and(Q.cmp("n", .greater, .int64Value(2)), Q.cmp("even", .equals, .int64Value(1)))
            #expect(try await storage.names(evenAbove2) == ["n4", "n6"])
            let nested = Q.and(Q.cmp("n", .greater, .int64Value(1)), Q.and(Q.not(Q.cmp("n", .equals, .int64Value(4))), Q.cmp("even", .equals, .int64Value(1))))
            #expect(try await storage.names(nested) == ["n2", "n6"])
            #expect(try await storage.names(Q.not(evenAbove2)) == ["n1", "n2", "n3", "n5"])
        }
    }

    @Test func anEmptyDefaultZoneAndAMissingZone() async throws {
        try await withQueryStore { storage, _ in
            let names = try await storage.names(Q.all)
            #expect(names == [], "the default zone of a database nobody wrote to")
            let error = await storage.refusal(Q.query(Q.all), zone: "Missing")
            #expect(error?.code == .zoneNotFound)
        }
    }

    @Test func desiredKeysRestrictTheFieldsNotTheMatch() async throws {
        try await withQueryStore { storage, _ in
            try await storage.saveAll([item("a", [("n", .int64Value(1)), ("s", .stringValue("x"))])])
            let records = try await storage.queryAll(Q.query(Q.cmp("n", .equals, .int64Value(1))), desiredKeys: ["s"])
            #expect(records.map(\.keys) == [["s"]])
            let none = try await storage.queryAll(Q.query(Q.cmp("n", .equals, .int64Value(1))), desiredKeys: [])
            #expect(none.first?.fields.isEmpty == true)
            #expect(none.first?.recordChangeTag.isEmpty == false)
        }
    }
}
