import CirrusWire
import Foundation
import Testing

@testable import CirrusModel

/// One format CloudKit refuses, its arguments, and the exact error (position and message).
struct Refusal: Sendable, CustomTestStringConvertible {
    let format: String
    let arguments: [any Sendable]
    let position: Int
    let message: String

    init(_ format: String, _ arguments: [any Sendable] = [], _ position: Int, _ message: String) {
        self.format = format
        self.arguments = arguments
        self.position = position
        self.message = message
    }

    var testDescription: String { format.isEmpty ? "(empty)" : format }
}

private let here = CKLocation(latitude: 1, longitude: 2)
private let someID = CKRecord.ID(recordName: "r")
private let distance = "distanceToLocation:fromLocation:"

@Suite("Predicate parser: refused input")
struct PredicateRefusalTests {
    static let table: [Refusal] = [
        // OR and other constructs CloudKit does not have.
        Refusal("a OR b", [], 3, "OR is not supported by CloudKit"),
        Refusal("a == 1 OR b == 2", [], 8, "OR is not supported by CloudKit"),
        Refusal("a == 1 || b == 2", [], 8, "|| (OR) is not supported by CloudKit"),
        Refusal("(a == 1 or b == 2)", [], 9, "OR is not supported by CloudKit"),
        Refusal("author.name == 'x'", [], 7, "key paths are not supported by CloudKit; use a field name"),
        Refusal("self.title == 'x'", [], 5, "key paths are not supported by CloudKit; use a field name"),
        Refusal(
            "all tags == 'x'", [], 1,
            "ALL is not supported by CloudKit except in ALL tokenize(%@, 'Cdl') IN allTokens; use \"ANY key == value\" or \"key CONTAINS value\" for list fields"),
        Refusal("ALL tokenize(%@, 'l') IN allTokens", ["a b"], 18, "tokenize options must be 'Cdl' or 'Cd': Cirrus's text search ignores case and diacritics"),
        Refusal("ALL tokenize(%@, 'Cdl') IN title", ["a b"], 28, "expected allTokens after ALL tokenize(...) IN, found title"),
        Refusal("ALL tokenize(%@ 'Cdl') IN allTokens", ["a"], 17, "expected \",\" and the options after the text of tokenize(, found \"'Cdl'\""),
        Refusal("ALL tokenize(%@, 'Cdl') == allTokens", ["a"], 25, "expected IN allTokens after tokenize(...), found \"==\""),
        Refusal("ALL tokenize(%@, 'Cdl') IN allTokens", ["  "], 14, "self CONTAINS needs at least one word"),
        Refusal("NONE tags == 'x'", [], 1, "NONE is not supported by CloudKit; use \"ANY key == value\" or \"key CONTAINS value\" for list fields"),
        Refusal("ANY tags != 'x'", [], 10, "ANY key != is not supported by CloudKit; only ANY key == value is"),
        Refusal("SOME tags BEGINSWITH 'x'", [], 11, "SOME key BEGINSWITH is not supported by CloudKit; only SOME key == value is"),
        Refusal("ANY 'x' == tags", [], 5, "ANY must be followed by a list field, as in ANY colors == 'red'"),
        Refusal("ANY tags == other", [], 13, "expected a value after ANY key =="),
        Refusal("ANY tags.name == 'x'", [], 9, "key paths are not supported by CloudKit; use a field name"),
        Refusal("name LIKE 'x*'", [], 6, "LIKE is not supported by CloudKit"),
        Refusal("name MATCHES '.*'", [], 6, "MATCHES is not supported by CloudKit"),
        Refusal("name ENDSWITH 'x'", [], 6, "ENDSWITH is not supported by CloudKit"),
        Refusal("name CONTAINS[c] 'x'", [], 14, "comparison options such as [c] or [cd] are not supported by CloudKit"),
        Refusal("name BEGINSWITH[cd] 'x'", [], 16, "comparison options such as [c] or [cd] are not supported by CloudKit"),
        Refusal("name ==[c] 'x'", [], 8, "comparison options such as [c] or [cd] are not supported by CloudKit"),
        Refusal("a NOT IN {1}", [], 3, "NOT goes before a comparison, as in NOT (key IN {...})"),
        Refusal("a ~ 1", [], 3, "unexpected character \"~\""),
        Refusal("a 1", [], 3, "expected an operator (==, !=, <, <=, >, >=, BEGINSWITH, IN, CONTAINS, BETWEEN), found \"1\""),
        Refusal("a == nil", [], 6, "NIL is not supported: CloudKit predicates cannot compare with nil"),
        Refusal("a == $x", [], 6, "variables ($name) are not supported; pass the value as an argument (%@)"),
        Refusal("a + 1 == 2", [], 3, "arithmetic (+) is not supported by CloudKit"),
        Refusal("tags.@count > 1", [], 6, "collection operators (@count, @sum …) are not supported by CloudKit"),
        Refusal("SUBQUERY(x, y) == 1", [], 1, "functions such as SUBQUERY(...) are not supported by CloudKit"),
        Refusal("SUBQUERY(x, $y, $y == 1) == 1", [], 13, "variables ($name) are not supported; pass the value as an argument (%@)"),
        Refusal("lowercase(a) == 'x'", [], 1, "functions such as lowercase(...) are not supported by CloudKit"),
        Refusal("foo:(a) == 1", [], 1, "unknown function \"foo:\"; CloudKit supports only distanceToLocation:fromLocation:"),
        // Argument counts and types.
        Refusal("a == %@", [], 6, "%@ has no argument: 0 given, and this is placeholder 1"),
        Refusal("a == %@ AND b == %@", ["x"], 18, "%@ has no argument: 1 given, and this is placeholder 2"),
        Refusal("a == %@", ["x", "y"], 8, "2 arguments given, but the format uses 1"),
        Refusal("a == 1", [1], 7, "1 arguments given, but the format uses 0"),
        Refusal("%K == 1", [5], 1, "%K needs a String (a key name), got Int"),
        Refusal("%K == 1", ["a.b"], 1, "key paths (a.b) are not supported by CloudKit; use a field name"),
        Refusal("%K == 1", ["9lives"], 1, "\"9lives\" is not a key: keys are letters, digits and underscores, not starting with a digit"),
        Refusal("%K == 1", [""], 1, "a key cannot be empty"),
        Refusal("%K == 1", ["a b"], 1, "\"a b\" is not a key: keys are letters, digits and underscores, not starting with a digit"),
        Refusal("a == %K", ["b"], 6, "expected a value; comparing two keys is not supported by CloudKit"),
        Refusal("priority > %d", [1.5], 12, "%d needs an integer, got Double"),
        Refusal("priority > %d", ["5"], 12, "%d needs an integer, got String"),
        Refusal("price > %f", [5], 9, "%f needs a floating-point number (Double or Float), got Int"),
        Refusal("a == %@", [Optional<String>.none], 6, "%@ argument: nil cannot be compared: CloudKit predicates do not support nil"),
        Refusal("a == %@", [URL(fileURLWithPath: "/x")], 6, "%@ argument: a value of type URL cannot be used in a CloudKit predicate"),
        Refusal("a == %@", [UInt64.max], 6, "%@ argument: the UInt64 value 18446744073709551615 does not fit in a 64-bit signed integer"),
        Refusal("a IN %@", [[1, 2] as [any Sendable] + ["x"]], 6, "%@ argument: a list must hold values of one type; found an integer and a string"),
        Refusal("a IN %@", [[[1], [2]]], 6, "%@ argument: a list cannot hold lists"),
        Refusal("a == %x", [], 6, "unknown format specifier \"%x\"; expected %@, %K, %d or %f"),
        Refusal("a == %", [], 6, "incomplete format specifier \"%\""),
        // Operators with the wrong kind of value.
        Refusal("name BEGINSWITH 5", [], 17, "BEGINSWITH needs a string, found an integer"),
        Refusal("name BEGINSWITH %@", [["a"]], 17, "BEGINSWITH needs a string, found a list"),
        Refusal("n BETWEEN {1, 2, 3}", [], 11, "BETWEEN needs two values {lower, upper}, found 3 values"),
        Refusal("n BETWEEN %@", [[1, 2, 3]], 11, "BETWEEN needs two values {lower, upper}, found 3 values"),
        Refusal("n BETWEEN 5", [], 11, "BETWEEN needs two values {lower, upper}, found an integer"),
        Refusal("n BETWEEN %@", [[someID, someID]], 11, "BETWEEN cannot order a reference; use strings, numbers or dates"),
        Refusal("n IN %@", ["x"], 6, "IN needs a list ({a, b} or an array), found a string"),
        Refusal("n IN 5", [], 6, "IN needs a list ({a, b} or an array), found an integer"),
        Refusal("a IN {1, 'x'}", [], 10, "a list must hold values of one type; found an integer and a string"),
        Refusal("a IN {1, {2}}", [], 10, "a list cannot hold lists"),
        Refusal("a IN {1 2}", [], 9, "expected \",\" or \"}\" to close the \"{\" at position 6, found \"2\""),
        Refusal("a == {1, 2}", [], 6, "== needs a single value, found a list; use IN to match any of several values"),
        Refusal("a < %@", [someID], 5, "< cannot order a reference; use a string, a number or a date"),
        Refusal("a > %@", [here], 5, "> cannot order a location; use a string, a number or a date"),
        Refusal("tags CONTAINS {1, 2}", [], 15, "CONTAINS needs a single value to look for in a list field, found a list"),
        Refusal("a == b", [], 6, "expected a value; comparing two keys is not supported by CloudKit"),
        Refusal("1 == 2", [], 1, "one side of a comparison must be a key; found two values"),
        Refusal("%@ BEGINSWITH name", ["x"], 1, "the left side of BEGINSWITH must be a key"),
        Refusal("{1, 2} BETWEEN n", [], 1, "the left side of BETWEEN must be a key"),
        // System keys.
        Refusal("recordID == 'x'", [], 13, "recordID is compared with a CKRecord.ID or CKRecord.Reference, found a string"),
        Refusal("recordID < %@", [someID], 10, "recordID can only be compared with ==, != or IN"),
        Refusal("recordID IN {'a'}", [], 13, "recordID is compared with a CKRecord.ID or CKRecord.Reference, found a string"),
        Refusal("creationDate > 5", [], 16, "creationDate is compared with a date, found an integer"),
        Refusal("modificationDate BEGINSWITH 'x'", [], 1, "BEGINSWITH cannot be used with modificationDate"),
        Refusal("recordID CONTAINS %@", [someID], 10, "recordID can only be compared with ==, != or IN"),
        Refusal("creationDate CONTAINS %@", [Date()], 1, "CONTAINS needs a list field; creationDate is not one"),
        Refusal("%@ IN creationDate", [Date()], 7, "IN needs a list field; creationDate is not one"),
        // SELF and distances.
        Refusal("self == 'x'", [], 1, "SELF can only be used as self CONTAINS 'text' (full-text search)"),
        Refusal("'x' IN self", [], 8, "SELF can only be used as self CONTAINS 'text' (full-text search)"),
        Refusal("self CONTAINS 5", [], 15, "self CONTAINS needs a string of words, found an integer"),
        Refusal("self CONTAINS '  '", [], 15, "self CONTAINS needs at least one word"),
        Refusal("self CONTAINS title", [], 15, "self CONTAINS needs a string of words"),
        Refusal("\(distance)(loc, %@) == 5", [here], 43, "a distance can only be compared with <, <=, > or >="),
        Refusal("\(distance)(loc, 'x') < 5", [], 39, "distanceToLocation:fromLocation: needs a CKLocation, found a string"),
        Refusal("\(distance)(loc, %@) < 'far'", [here], 45, "a distance is compared with a number of kilometers, found a string"),
        Refusal("\(distance)(loc, %@) < -1", [here], 45, "the radius must be a finite, non-negative number of kilometers"),
        Refusal("\(distance)(creationDate, %@) < 1", [here], 34, "creationDate is not a location field"),
        Refusal("\(distance)(a, b) < 1", [], 33, "distanceToLocation:fromLocation: needs a location key and a CKLocation (%@)"),
        Refusal("\(distance) a", [], 34, "expected \"(\" after distanceToLocation:fromLocation:, found a"),
        Refusal("\(distance)(loc %@) < 1", [here], 38, "expected \",\" between the key and the location, found \"%@\""),
        Refusal("\(distance)(loc, %@ < 1", [here], 42, "expected \")\" after the location, found \"<\""),
        Refusal("\(distance)(loc, %@) < 1 AND loc == 1 AND \(distance)(loc, %@)", [here, here], 105,
                "expected an operator (==, !=, <, <=, >, >=, BEGINSWITH, IN, CONTAINS, BETWEEN), found the end of the format"),
        // Literals and structure.
        Refusal("name == 'abc", [], 9, "unterminated string: the ' here is never closed"),
        Refusal("name == \"abc", [], 9, "unterminated string: the \" here is never closed"),
        Refusal("name == 'a\\", [], 9, "unterminated string: the ' here is never closed"),
        Refusal("name == 'a\\qb'", [], 11, "unknown escape \\q in a string"),
        Refusal("name == '\\u12'", [], 10, "expected four hex digits after \\u"),
        Refusal("name == '\\u0000'", [], 9, "a string value contains U+0000, which the wire cannot carry"),
        Refusal("n == 99999999999999999999", [], 6, "the integer 99999999999999999999 does not fit in 64 bits"),
        Refusal("n == 1e999", [], 6, "the number 1e999 is out of range"),
        Refusal("a == 1 b", [], 8, "expected AND or the end of the format, found b"),
        Refusal("a == 1 AND", [], 11, "expected a key or a value, found the end of the format"),
        Refusal("a == 1)", [], 7, "unbalanced \")\": no \"(\" opens it"),
        Refusal("(a == 1", [], 8, "expected \")\" to close the \"(\" at position 1, found the end of the format"),
        Refusal("a ==", [], 5, "expected a key or a value, found the end of the format"),
        Refusal("== 1", [], 1, "expected a key or a value, found \"==\""),
        Refusal("AND a == 1", [], 1, "expected a key or a value, found AND"),
        Refusal("a == IN", [], 6, "expected a key or a value, found IN"),
        Refusal("", [], 1, "the format is empty; expected a predicate"),
        Refusal("   ", [], 4, "the format is empty; expected a predicate"),
        Refusal("é == 1", [], 1, "unexpected character \"é\""),
        Refusal("ü == 1 OR x == 2", [], 1, "unexpected character \"ü\""),
        Refusal("a == 'é' OR b", [], 10, "OR is not supported by CloudKit"),
    ]

    @Test("Nesting is bounded: 20 levels of NOT and parentheses parse, the 21st is refused")
    func nesting() throws {
        let deepest = String(repeating: "NOT (", count: 10) + "a == 1" + String(repeating: ")", count: 10)
        let wire = try CKPredicate(parsing: deepest).wirePredicate
        // The tree fits the codec's nesting limit inside a whole query request frame.
        let frame = Wire.Frame(
            streamID: 1,
            kind: .open(Wire.Open(request: .query(Wire.QueryRequest(start: .query(Wire.Query(recordType: "T", predicate: wire)))))))
        #expect(try Wire.Frame(serializedBytes: frame.serializedBytes()) == frame)
        let tooDeep = "NOT " + deepest
        #expect(CKPredicate(format: tooDeep).parseError?.message == "NOT and parentheses nest deeper than 20 levels")
        #expect(CKPredicate(format: tooDeep).parseError?.position == 54)
        let parentheses = String(repeating: "(", count: 100_000) + "a == 1" + String(repeating: ")", count: 100_000)
        #expect(CKPredicate(format: parentheses).parseError?.position == 21)
    }

    @Test("Each refused format gets its exact error", arguments: table)
    func refused(_ refusal: Refusal) {
        let predicate = CKPredicate(format: refusal.format, argumentArray: refusal.arguments)
        guard let error = predicate.parseError else {
            Issue.record("\(refusal.format) was accepted")
            return
        }
        #expect(error.message == refusal.message)
        #expect(error.position == refusal.position)
        #expect(error.description == "predicate \"\(refusal.format)\": position \(refusal.position): \(refusal.message)")
        #expect(error.ckError.code == .invalidArguments)
    }
}
