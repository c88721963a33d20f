import CirrusWire
import Foundation
import Testing

@testable import CirrusModel

/// Expected wire trees, written compactly.
enum Tree {
    static func cmp(_ key: String, _ op: Wire.ComparisonOperator, _ kind: Wire.FieldValue.Kind) -> Wire.QueryPredicate {
        Wire.QueryPredicate(
            node: .comparison(Wire.ComparisonPredicate(key: key, comparisonOperator: op, value: Wire.FieldValue(kind: kind))))
    }
    static func and(_ operands: Wire.QueryPredicate...) -> Wire.QueryPredicate {
        Wire.QueryPredicate(node: .andPredicate(Wire.AndPredicate(operands: operands)))
    }
    static func not(_ operand: Wire.QueryPredicate) -> Wire.QueryPredicate {
        Wire.QueryPredicate(node: .notPredicate(Wire.NotPredicate(operand: operand)))
    }
    static let truePredicate = Wire.QueryPredicate(node: .truePredicate(Wire.TruePredicate()))
    static let falsePredicate = Wire.QueryPredicate(node: .falsePredicate(Wire.FalsePredicate()))
    static func text(_ text: String) -> Wire.QueryPredicate {
        Wire.QueryPredicate(node: .textSearch(Wire.TextSearchPredicate(text: text)))
    }
    static func distance(_ key: String, _ from: CKLocation, _ meters: Double, _ op: Wire.ComparisonOperator) -> Wire.QueryPredicate {
        Wire.QueryPredicate(
            node: .distance(
                Wire.DistancePredicate(key: key, fromLocation: from.wireLocation, radiusMeters: meters, comparisonOperator: op)))
    }
    static func string(_ value: String) -> Wire.FieldValue.Kind { .stringValue(value) }
    static func int(_ value: Int64) -> Wire.FieldValue.Kind { .int64Value(value) }
    static func double(_ value: Double) -> Wire.FieldValue.Kind { .doubleValue(value) }
    static func date(_ value: Date) -> Wire.FieldValue.Kind { .dateValue(value.wireTimestamp) }
    static func reference(_ name: String, zone: CKRecordZone.ID = .default) -> Wire.FieldValue.Kind {
        .referenceValue(CKRecord.Reference(recordID: CKRecord.ID(recordName: name, zoneID: zone), action: .none).wireReference)
    }
}

/// The wire tree of a valid format, with the root's `format` checked and then cleared so trees
/// compare by structure.
func tree(_ format: String, _ arguments: Any...) throws -> Wire.QueryPredicate {
    let predicate = try CKPredicate(parsing: format, argumentArray: arguments)
    var wire = try predicate.wirePredicate
    #expect(wire.format == format)
    #expect(predicate.predicateFormat == format)
    wire.format = ""
    return wire
}

@Suite("Predicate parser: supported forms")
struct PredicateParserTests {
    static let weekAgo = Date(timeIntervalSince1970: 1_700_000_000)
    static let zurich = CKLocation(latitude: 47.3769, longitude: 8.5417)

    @Test("The sample: category == %@ AND createdAt > %@")
    func sample() throws {
        let predicate = CKPredicate(format: "category == %@ AND createdAt > %@", "work", Self.weekAgo)
        #expect(predicate.parseError == nil)
        let wire = try predicate.wirePredicate
        #expect(wire.format == "category == %@ AND createdAt > %@")
        var expected = Tree.and(
            Tree.cmp("category", .equals, Tree.string("work")), Tree.cmp("createdAt", .greater, Tree.date(Self.weekAgo)))
        expected.format = "category == %@ AND createdAt > %@"
        #expect(wire == expected)
        #expect(wire.node.map { if case .andPredicate(let and) = $0 { and.operands.allSatisfy { $0.format.isEmpty } } else { false } } == true)
        #expect(try tree("priority > %d", 5) == Tree.cmp("priority", .greater, Tree.int(5)))
    }

    @Test(
        "Every comparison operator spelling",
        arguments: [
            ("==", Wire.ComparisonOperator.equals), ("=", .equals), ("!=", .notEquals), ("<>", .notEquals),
            ("<", .less), ("<=", .lessOrEqual), ("=<", .lessOrEqual), (">", .greater), (">=", .greaterOrEqual),
            ("=>", .greaterOrEqual),
        ])
    func operators(spelling: String, op: Wire.ComparisonOperator) throws {
        #expect(try tree("n \(spelling) 3") == Tree.cmp("n", op, Tree.int(3)))
        #expect(try tree("n\(spelling)3") == Tree.cmp("n", op, Tree.int(3)))
    }

    @Test("String literals in either quote, with escapes; BEGINSWITH")
    func strings() throws {
        #expect(try tree(#"title BEGINSWITH 'it\'s'"#) == Tree.cmp("title", .beginsWith, Tree.string("it's")))
        #expect(try tree(#"title == "say \"hi\"\n\t\\ \u00e9""#) == Tree.cmp("title", .equals, Tree.string("say \"hi\"\n\t\\ é")))
        #expect(try tree(#"title == "it's""#) == Tree.cmp("title", .equals, Tree.string("it's")))
        #expect(try tree("title beginswith %@", "Sh") == Tree.cmp("title", .beginsWith, Tree.string("Sh")))
        #expect(try tree("title == ''") == Tree.cmp("title", .equals, Tree.string("")))
    }

    @Test("Number and boolean literals")
    func numbers() throws {
        #expect(try tree("n == -5") == Tree.cmp("n", .equals, Tree.int(-5)))
        #expect(try tree("n == 2.5") == Tree.cmp("n", .equals, Tree.double(2.5)))
        #expect(try tree("n == -0.25") == Tree.cmp("n", .equals, Tree.double(-0.25)))
        #expect(try tree("n == 1e3") == Tree.cmp("n", .equals, Tree.double(1000)))
        #expect(try tree("n == 9223372036854775807") == Tree.cmp("n", .equals, Tree.int(.max)))
        #expect(try tree("done == TRUE") == Tree.cmp("done", .equals, Tree.int(1)))
        #expect(try tree("done == yes") == Tree.cmp("done", .equals, Tree.int(1)))
        #expect(try tree("done == false") == Tree.cmp("done", .equals, Tree.int(0)))
        #expect(try tree("done == NO") == Tree.cmp("done", .equals, Tree.int(0)))
    }

    @Test("IN with aggregates and arrays; an empty list matches nothing")
    func inLists() throws {
        #expect(try tree("n IN {1, 2, 3}") == Tree.cmp("n", .in, .int64List(Wire.Int64List(values: [1, 2, 3]))))
        #expect(try tree("c IN %@", ["a", "b"]) == Tree.cmp("c", .in, .stringList(Wire.StringList(values: ["a", "b"]))))
        #expect(try tree("c IN {'a'}") == Tree.cmp("c", .in, .stringList(Wire.StringList(values: ["a"]))))
        #expect(try tree("n IN {1.5, 2.0}") == Tree.cmp("n", .in, .doubleList(Wire.DoubleList(values: [1.5, 2]))))
        #expect(try tree("n in {%d, %d}", 4, 5) == Tree.cmp("n", .in, .int64List(Wire.Int64List(values: [4, 5]))))
        #expect(try tree("n IN {}") == Tree.falsePredicate)
        #expect(try tree("n IN %@", [String]()) == Tree.falsePredicate)
        #expect(try tree("NOT n IN {}") == Tree.not(Tree.falsePredicate))
        let dates = [Self.weekAgo, Self.weekAgo.addingTimeInterval(60)]
        #expect(
            try tree("d IN %@", dates)
                == Tree.cmp("d", .in, .dateList(Wire.TimestampList(values: dates.map(\.wireTimestamp)))))
        let set = try tree("c IN %@", Set(["only"]))
        #expect(set == Tree.cmp("c", .in, .stringList(Wire.StringList(values: ["only"]))))
    }

    @Test("CONTAINS on a list field, and the value-IN-key form normalized to it")
    func contains() throws {
        #expect(try tree("tags CONTAINS 'red'") == Tree.cmp("tags", .contains, Tree.string("red")))
        #expect(try tree("tags contains %@", 7) == Tree.cmp("tags", .contains, Tree.int(7)))
        #expect(try tree("'red' IN tags") == Tree.cmp("tags", .contains, Tree.string("red")))
        #expect(try tree("%@ IN %K", "red", "tags") == Tree.cmp("tags", .contains, Tree.string("red")))
    }

    @Test("ANY and SOME with == on a list field are the CONTAINS comparison (CloudKit's documented list forms)")
    func anyAndSome() throws {
        let red = Tree.cmp("favoriteColors", .contains, Tree.string("red"))
        #expect(try tree("ANY favoriteColors = 'red'") == red)
        #expect(try tree("any favoriteColors == 'red'") == red)
        #expect(try tree("SOME favoriteColors == %@", "red") == red)
        #expect(try tree("ANY %K == %@", "favoriteColors", "red") == red)
        #expect(try tree("favoriteColors CONTAINS 'red'") == red)
        #expect(try tree("'red' IN favoriteColors") == red)
        #expect(try tree("%K CONTAINS %@", "favoriteColors", "red") == red)
        #expect(
            try tree("ANY tags == 'a' AND NOT (SOME tags == 'b')")
                == Tree.and(Tree.cmp("tags", .contains, Tree.string("a")), Tree.not(Tree.cmp("tags", .contains, Tree.string("b")))))
    }

    @Test("BETWEEN with an aggregate or a two-element array")
    func between() throws {
        #expect(try tree("n BETWEEN {1, 10}") == Tree.cmp("n", .between, .int64List(Wire.Int64List(values: [1, 10]))))
        let range = [Self.weekAgo, Self.weekAgo.addingTimeInterval(3600)]
        #expect(
            try tree("creationDate BETWEEN %@", range)
                == Tree.cmp("creationDate", .between, .dateList(Wire.TimestampList(values: range.map(\.wireTimestamp)))))
    }

    @Test("AND, &&, NOT, !, parentheses and their nesting")
    func compounds() throws {
        let a = Tree.cmp("a", .equals, Tree.int(1))
        let b = Tree.cmp("b", .equals, Tree.int(2))
        let c = Tree.cmp("c", .equals, Tree.int(3))
        #expect(try tree("a == 1 AND b == 2 AND c == 3") == Tree.and(a, b, c))
        #expect(try tree("a == 1 && b == 2 and c == 3") == Tree.and(a, b, c))
        #expect(try tree("(a == 1 AND b == 2) AND c == 3") == Tree.and(Tree.and(a, b), c))
        #expect(try tree("((a == 1))") == a)
        #expect(try tree("NOT a == 1") == Tree.not(a))
        #expect(try tree("!a == 1") == Tree.not(a))
        #expect(try tree("NOT (a == 1 AND b == 2)") == Tree.not(Tree.and(a, b)))
        #expect(try tree("NOT a == 1 AND b == 2") == Tree.and(Tree.not(a), b))
        #expect(try tree("not not a == 1") == Tree.not(Tree.not(a)))
        #expect(try tree("a == 1 AND NOT (b == 2)") == Tree.and(a, Tree.not(b)))
    }

    @Test("TRUEPREDICATE, FALSEPREDICATE and init(value:)")
    func constants() throws {
        #expect(try tree("TRUEPREDICATE") == Tree.truePredicate)
        #expect(try tree("falsepredicate") == Tree.falsePredicate)
        #expect(try tree("TRUEPREDICATE AND a == 1") == Tree.and(Tree.truePredicate, Tree.cmp("a", .equals, Tree.int(1))))
        let all = CKPredicate(value: true)
        #expect(all.predicateFormat == "TRUEPREDICATE")
        #expect(try all.wirePredicate == Wire.QueryPredicate(format: "TRUEPREDICATE", node: .truePredicate(Wire.TruePredicate())))
        let none = CKPredicate(value: false)
        #expect(none.predicateFormat == "FALSEPREDICATE")
        #expect(try none.wirePredicate.node == .falsePredicate(Wire.FalsePredicate()))
        #expect(all != none)
        #expect(all == CKPredicate(value: true))
        #expect(all.description == "TRUEPREDICATE")
    }

    @Test("Tokenized full-text search: self CONTAINS")
    func textSearch() throws {
        #expect(try tree("self CONTAINS 'bob smith'") == Tree.text("bob smith"))
        // CloudKit's documented "all tokens" form is the same search.
        #expect(try tree("ALL tokenize(%@, 'Cdl') IN allTokens", "bob smith") == Tree.text("bob smith"))
        #expect(try tree("all TOKENIZE('bob smith', 'dC') in allTokens AND n == 1") == Tree.and(Tree.text("bob smith"), Tree.cmp("n", .equals, Tree.int(1))))
        #expect(try tree("SELF contains %@", "café") == Tree.text("café"))
        #expect(try tree("self CONTAINS 'x' AND n == 1") == Tree.and(Tree.text("x"), Tree.cmp("n", .equals, Tree.int(1))))
    }

    @Test("distanceToLocation:fromLocation: with the radius in kilometers, sent in meters")
    func distance() throws {
        let here = Self.zurich
        let f = "distanceToLocation:fromLocation:"
        #expect(try tree("\(f)(location, %@) < 5", here) == Tree.distance("location", here, 5000, .less))
        #expect(try tree("\(f)(location, %@) <= %f", here, 2.5) == Tree.distance("location", here, 2500, .lessOrEqual))
        #expect(try tree("\(f)(location, %@) > %@", here, 1) == Tree.distance("location", here, 1000, .greater))
        #expect(try tree("\(f)(%K, %@) >= 0.5", "spot", here) == Tree.distance("spot", here, 500, .greaterOrEqual))
        #expect(try tree("\(f)(%@, location) < 5", here) == Tree.distance("location", here, 5000, .less))
        #expect(try tree("10 > \(f)(location, %@)", here) == Tree.distance("location", here, 10_000, .less))
        #expect(try tree("DISTANCETOLOCATION:FROMLOCATION:(location, %@) < 1", here) == Tree.distance("location", here, 1000, .less))
    }

    @Test("A value on the left is moved to the right with the operator mirrored")
    func valueOnTheLeft() throws {
        #expect(try tree("5 < priority") == Tree.cmp("priority", .greater, Tree.int(5)))
        #expect(try tree("5 <= priority") == Tree.cmp("priority", .greaterOrEqual, Tree.int(5)))
        #expect(try tree("5 > priority") == Tree.cmp("priority", .less, Tree.int(5)))
        #expect(try tree("5 >= priority") == Tree.cmp("priority", .lessOrEqual, Tree.int(5)))
        #expect(try tree("%@ == name", "x") == Tree.cmp("name", .equals, Tree.string("x")))
        #expect(try tree("'x' != name") == Tree.cmp("name", .notEquals, Tree.string("x")))
    }

    @Test("Keywords are case-insensitive; keys are not")
    func caseInsensitiveKeywords() throws {
        #expect(
            try tree("Name BeginsWith 'a' aNd NoT n In {1}")
                == Tree.and(
                    Tree.cmp("Name", .beginsWith, Tree.string("a")),
                    Tree.not(Tree.cmp("n", .in, .int64List(Wire.Int64List(values: [1]))))))
    }

    @Test("System keys: recordID and the user IDs take references, the dates take dates")
    func systemKeys() throws {
        let id = CKRecord.ID(recordName: "r1", zoneID: CKRecordZone.ID(zoneName: "Z"))
        let reference = CKRecord.Reference(recordID: id, action: .deleteSelf)
        #expect(try tree("recordID == %@", id) == Tree.cmp("recordID", .equals, Tree.reference("r1", zone: id.zoneID)))
        #expect(
            try tree("recordID != %@", reference)
                == Tree.cmp("recordID", .notEquals, .referenceValue(reference.wireReference)))
        #expect(try tree("creatorUserRecordID == %@", id) == Tree.cmp("creatorUserRecordID", .equals, Tree.reference("r1", zone: id.zoneID)))
        #expect(
            try tree("recordID IN %@", [id])
                == Tree.cmp(
                    "recordID", .in,
                    .referenceList(Wire.ReferenceList(values: [CKRecord.Reference(recordID: id, action: .none).wireReference]))))
        #expect(try tree("modificationDate < %@", Self.weekAgo) == Tree.cmp("modificationDate", .less, Tree.date(Self.weekAgo)))
        // CKRecord.SystemFieldKey spellings name the same keys.
        #expect(
            try tree("%K > %@", CKRecord.SystemFieldKey.creationDate, Self.weekAgo)
                == Tree.cmp("creationDate", .greater, Tree.date(Self.weekAgo)))
        #expect(
            try tree("%K == %@", CKRecord.SystemFieldKey.recordID, id) == Tree.cmp("recordID", .equals, Tree.reference("r1", zone: id.zoneID)))
    }

    @Test("%K names a key, including one spelled like a keyword")
    func keySubstitution() throws {
        #expect(try tree("%K == %@", "title", "x") == Tree.cmp("title", .equals, Tree.string("x")))
        #expect(try tree("%K == 1", "in") == Tree.cmp("in", .equals, Tree.int(1)))
        #expect(try tree("_private_2 == 1") == Tree.cmp("_private_2", .equals, Tree.int(1)))
    }

    @Test("init(format:) never throws: the error is kept and becomes CKError(.invalidArguments)")
    func deferredError() throws {
        let predicate = CKPredicate(format: "a OR b")
        let error = try #require(predicate.parseError)
        #expect(error.position == 3)
        #expect(error.message == "OR is not supported by CloudKit")
        #expect(error.format == "a OR b")
        #expect(error.description == #"predicate "a OR b": position 3: OR is not supported by CloudKit"#)
        #expect(error.localizedDescription == error.description)
        #expect(throws: CKPredicate.ParseError.self) { try predicate.wirePredicate }
        #expect(throws: error) { try CKPredicate(parsing: "a OR b") }
        let ckError = error.ckError
        #expect(ckError.code == .invalidArguments)
        #expect(ckError.message == error.description)
        #expect(ckError.userInfo[NSUnderlyingErrorKey] as? CKPredicate.ParseError == error)
        #expect(predicate != CKPredicate(format: "a OR c"))
        #expect(CKPredicate(format: "n == %d", 1) != CKPredicate(format: "n == %d", 2))
        #expect(CKPredicate(format: "n == %d", 1) == CKPredicate(format: "n == %d", 1))
    }

    @Test("init(wire:) keeps the tree; an absent node is TRUEPREDICATE")
    func fromWire() throws {
        var wire = Tree.cmp("a", .equals, Tree.int(1))
        wire.format = "a == 1"
        let predicate = CKPredicate(wire: wire)
        #expect(predicate.predicateFormat == "a == 1")
        #expect(try predicate.wirePredicate == wire)
        #expect(try CKPredicate(wire: Wire.QueryPredicate()).wirePredicate.node == .truePredicate(Wire.TruePredicate()))
    }
}
