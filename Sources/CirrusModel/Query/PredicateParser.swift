import CirrusWire
import Foundation

/// Parses CloudKit's predicate subset into a wire tree.
///
/// Grammar (keywords case-insensitive; `NOT` binds tighter than `AND`):
/// ```
/// predicate  := and END
/// and        := unary ((AND | &&) unary)*
/// unary      := (NOT | !) unary | primary
/// primary    := "(" and ")" | TRUEPREDICATE | FALSEPREDICATE | (ANY | SOME) key (== | =) value
///             | ALL tokenize(value, 'Cdl') IN allTokens | comparison
/// comparison := operand operator operand
/// operand    := key | %K | SELF | value | distanceToLocation:fromLocation:(key, %@)
/// value      := string | number | TRUE | FALSE | YES | NO | %@ | %d | %f | "{" value ("," value)* "}"
/// operator   := == | = | != | <> | < | <= | =< | > | >= | => | BEGINSWITH | IN | CONTAINS | BETWEEN
/// ```
/// A value on the left is moved to the right with the operator mirrored (`5 < priority` is
/// `priority > 5`; `'red' IN colors` is `colors CONTAINS 'red'`).
struct PredicateParser {
    private let format: String
    private let arguments: [Any]
    private var tokens: [PredicateToken] = []
    private var index = 0
    private var argumentsUsed = 0
    private var depth = 0

    /// The deepest nesting of `NOT` and parentheses accepted. It keeps the parser's recursion
    /// bounded and the wire tree within the codec's nesting limit (64 sub-message levels,
    /// about 2 per level here) with room for the messages around a query.
    static let maximumDepth = 20

    init(format: String, arguments: [Any]) {
        self.format = format
        self.arguments = arguments
    }

    /// The wire tree of the whole format; the root's `format` is the format string.
    ///
    /// - throws: `CKPredicate.ParseError` at the first problem.
    mutating func parse() throws(CKPredicate.ParseError) -> Wire.QueryPredicate {
        var lexer = PredicateLexer(format: format)
        tokens = try lexer.tokenize()
        index = 0
        argumentsUsed = 0
        if current.kind == .end { throw fail(current, "the format is empty; expected a predicate") }
        var root = try parseAnd()
        let last = current
        switch last.kind {
        case .end: break
        case .symbol(")"): throw fail(last, "unbalanced \")\": no \"(\" opens it")
        default: throw fail(last, "expected AND or the end of the format, found \(last.quoted)")
        }
        if argumentsUsed < arguments.count {
            throw fail(last, "\(arguments.count) arguments given, but the format uses \(argumentsUsed)")
        }
        root.format = format
        return root
    }

    // MARK: - Tokens

    private var current: PredicateToken { tokens[min(index, tokens.count - 1)] }

    private var following: PredicateToken { tokens[min(index + 1, tokens.count - 1)] }

    private mutating func advance() {
        if index < tokens.count - 1 { index += 1 }
    }

    private func fail(_ token: PredicateToken, _ message: String) -> CKPredicate.ParseError {
        fail(at: token.position, message)
    }

    private func fail(at position: Int, _ message: String) -> CKPredicate.ParseError {
        CKPredicate.ParseError(format: format, position: position, message: message)
    }

    private static func keyword(_ token: PredicateToken) -> String? {
        if case .word(let word) = token.kind { return word.uppercased() }
        return nil
    }

    private static func isKeyword(_ token: PredicateToken, _ name: String) -> Bool { keyword(token) == name }

    private static let reservedWords: Set<String> = [
        "AND", "OR", "NOT", "IN", "BEGINSWITH", "ENDSWITH", "CONTAINS", "LIKE", "MATCHES", "BETWEEN",
        "ANY", "ALL", "SOME", "NONE", "TRUEPREDICATE", "FALSEPREDICATE", "TRUE", "FALSE", "YES", "NO",
        "NIL", "NULL", "SELF", "SUBQUERY", "FUNCTION",
    ]

    private mutating func enterNesting(_ token: PredicateToken) throws(CKPredicate.ParseError) {
        guard depth < Self.maximumDepth else {
            throw fail(token, "NOT and parentheses nest deeper than \(Self.maximumDepth) levels")
        }
        depth += 1
    }

    // MARK: - Predicates

    private mutating func parseAnd() throws(CKPredicate.ParseError) -> Wire.QueryPredicate {
        var operands = [try parseUnary()]
        while true {
            let token = current
            if Self.isKeyword(token, "AND") || token.kind == .symbol("&&") {
                advance()
                operands.append(try parseUnary())
            } else if Self.isKeyword(token, "OR") {
                throw fail(token, "OR is not supported by CloudKit")
            } else if token.kind == .symbol("||") {
                throw fail(token, "|| (OR) is not supported by CloudKit")
            } else {
                break
            }
        }
        if operands.count == 1 { return operands[0] }
        return Wire.QueryPredicate(node: .andPredicate(Wire.AndPredicate(operands: operands)))
    }

    private mutating func parseUnary() throws(CKPredicate.ParseError) -> Wire.QueryPredicate {
        let token = current
        guard Self.isKeyword(token, "NOT") || token.kind == .symbol("!") else { return try parsePrimary() }
        try enterNesting(token)
        defer { depth -= 1 }
        advance()
        let operand = try parseUnary()
        return Wire.QueryPredicate(node: .notPredicate(Wire.NotPredicate(operand: operand)))
    }

    private mutating func parsePrimary() throws(CKPredicate.ParseError) -> Wire.QueryPredicate {
        let token = current
        switch Self.keyword(token) {
        case "TRUEPREDICATE":
            advance()
            return Wire.QueryPredicate(node: .truePredicate(Wire.TruePredicate()))
        case "FALSEPREDICATE":
            advance()
            return Wire.QueryPredicate(node: .falsePredicate(Wire.FalsePredicate()))
        case let word? where ["ANY", "SOME"].contains(word):
            return try parseAnyComparison(token)
        case "ALL":
            return try parseAllTokens(token)
        case "NONE":
            throw fail(token, "NONE is not supported by CloudKit; use \"ANY key == value\" or \"key CONTAINS value\" for list fields")
        default:
            break
        }
        guard token.kind == .symbol("(") else { return try parseComparison() }
        try enterNesting(token)
        defer { depth -= 1 }
        advance()
        let inner = try parseAnd()
        let close = current
        guard close.kind == .symbol(")") else {
            throw fail(close, "expected \")\" to close the \"(\" at position \(token.position), found \(close.quoted)")
        }
        advance()
        return inner
    }

    private mutating func parseComparison() throws(CKPredicate.ParseError) -> Wire.QueryPredicate {
        let lhs = try parseOperand()
        let comparison = try parseOperator()
        let rhs = try parseOperand()
        return try PredicateComparison(format: format, comparisonOperator: comparison).predicate(lhs, rhs)
    }

    /// `ANY key == value` (or `SOME`, `=`): the list field `key` holds `value`, the same
    /// comparison as `key CONTAINS value`. CloudKit documents only equality after `ANY`.
    private mutating func parseAnyComparison(_ quantifier: PredicateToken) throws(CKPredicate.ParseError) -> Wire.QueryPredicate {
        let word = quantifier.text.uppercased()
        advance()
        let lhs = try parseOperand()
        guard case .key = lhs else {
            throw fail(at: lhs.position, "\(word) must be followed by a list field, as in \(word) colors == 'red'")
        }
        let comparison = try parseOperator()
        guard comparison.wire == .equals else {
            throw fail(comparison.token, "\(word) key \(comparison.text) is not supported by CloudKit; only \(word) key == value is")
        }
        let rhs = try parseOperand()
        guard case .value = rhs else {
            throw fail(at: rhs.position, "expected a value after \(word) key ==")
        }
        let membership = PredicateComparison.Operator(wire: .contains, token: comparison.token)
        return try PredicateComparison(format: format, comparisonOperator: membership).predicate(lhs, rhs)
    }

    /// `ALL tokenize(text, 'Cdl') IN allTokens`, CloudKit's documented spelling of a tokenized
    /// search: the same node as `self CONTAINS text` (every word of `text` in some string field).
    /// Cirrus's text index always ignores case and diacritics, so the options must say so
    /// (`C` and `d`; `l`, locale-aware, changes nothing).
    private mutating func parseAllTokens(_ all: PredicateToken) throws(CKPredicate.ParseError) -> Wire.QueryPredicate {
        advance()
        guard case .word(let function) = current.kind, function.lowercased() == "tokenize", following.kind == .symbol("(") else {
            throw fail(
                all,
                "ALL is not supported by CloudKit except in ALL tokenize(%@, 'Cdl') IN allTokens; "
                    + "use \"ANY key == value\" or \"key CONTAINS value\" for list fields")
        }
        advance()
        advance()
        let textToken = current
        let text = try parseValue()
        guard current.kind == .symbol(",") else {
            throw fail(current, "expected \",\" and the options after the text of tokenize(, found \(current.quoted)")
        }
        advance()
        let optionsToken = current
        guard case .string(let options) = optionsToken.kind, options.contains("C"), options.contains("d"),
            options.allSatisfy({ "Cdl".contains($0) })
        else {
            throw fail(optionsToken, "tokenize options must be 'Cdl' or 'Cd': Cirrus's text search ignores case and diacritics")
        }
        advance()
        guard current.kind == .symbol(")") else { throw fail(current, "expected \")\" to close tokenize(, found \(current.quoted)") }
        advance()
        let inToken = current
        guard Self.isKeyword(inToken, "IN") else { throw fail(inToken, "expected IN allTokens after tokenize(...), found \(inToken.quoted)") }
        advance()
        guard case .word("allTokens") = current.kind else {
            throw fail(current, "expected allTokens after ALL tokenize(...) IN, found \(current.quoted)")
        }
        advance()
        let search = PredicateComparison.Operator(wire: .contains, token: inToken)
        return try PredicateComparison(format: format, comparisonOperator: search)
            .predicate(.selfKeyword(all.position), .value(text, textToken.position))
    }

    // MARK: - Operators

    private mutating func parseOperator() throws(CKPredicate.ParseError) -> PredicateComparison.Operator {
        let token = current
        let op: Wire.ComparisonOperator
        switch token.kind {
        case .symbol("=="), .symbol("="): op = .equals
        case .symbol("!="), .symbol("<>"): op = .notEquals
        case .symbol("<"): op = .less
        case .symbol("<="), .symbol("=<"): op = .lessOrEqual
        case .symbol(">"): op = .greater
        case .symbol(">="), .symbol("=>"): op = .greaterOrEqual
        case .symbol("."):
            throw fail(token, "key paths are not supported by CloudKit; use a field name")
        case .symbol("||"):
            throw fail(token, "|| (OR) is not supported by CloudKit")
        default:
            switch Self.keyword(token) {
            case "BEGINSWITH": op = .beginsWith
            case "IN": op = .in
            case "CONTAINS": op = .contains
            case "BETWEEN": op = .between
            case let word? where ["LIKE", "MATCHES", "ENDSWITH"].contains(word):
                throw fail(token, "\(word) is not supported by CloudKit")
            case "NOT":
                throw fail(token, "NOT goes before a comparison, as in NOT (key IN {...})")
            case "OR":
                throw fail(token, "OR is not supported by CloudKit")
            default:
                throw fail(
                    token,
                    "expected an operator (==, !=, <, <=, >, >=, BEGINSWITH, IN, CONTAINS, BETWEEN), found \(token.quoted)")
            }
        }
        advance()
        if current.kind == .symbol("[") {
            throw fail(current, "comparison options such as [c] or [cd] are not supported by CloudKit")
        }
        return PredicateComparison.Operator(wire: op, token: token)
    }

    // MARK: - Operands

    private mutating func parseOperand() throws(CKPredicate.ParseError) -> PredicateOperand {
        let token = current
        switch token.kind {
        case .word(let word):
            return try parseWord(word, token)
        case .distanceFunction:
            return try parseDistance()
        case .placeholder(.key):
            advance()
            let argument = try nextArgument(for: token)
            guard let name = PredicateArgument.key(argument) else {
                throw fail(token, "%K needs a String (a key name), got \(PredicateArgument.typeName(argument))")
            }
            return .key(try key(name, token), token.position)
        default:
            return .value(try parseValue(), token.position)
        }
    }

    private mutating func parseWord(_ word: String, _ token: PredicateToken) throws(CKPredicate.ParseError) -> PredicateOperand {
        let upper = word.uppercased()
        switch upper {
        case "SELF":
            advance()
            if current.kind == .symbol(".") { throw fail(current, "key paths are not supported by CloudKit; use a field name") }
            return .selfKeyword(token.position)
        case "TRUE", "YES", "FALSE", "NO":
            return .value(try parseValue(), token.position)
        case "NIL", "NULL":
            throw fail(token, "\(upper) is not supported: CloudKit predicates cannot compare with nil")
        default:
            break
        }
        if following.kind == .symbol("(") {
            throw fail(token, "functions such as \(word)(...) are not supported by CloudKit")
        }
        if Self.reservedWords.contains(upper) {
            throw fail(token, "expected a key or a value, found \(word)")
        }
        advance()
        if current.kind == .symbol(".") {
            throw fail(current, "key paths are not supported by CloudKit; use a field name")
        }
        return .key(try key(word, token), token.position)
    }

    private mutating func parseDistance() throws(CKPredicate.ParseError) -> PredicateOperand {
        let function = current
        advance()
        let open = current
        guard open.kind == .symbol("(") else {
            throw fail(open, "expected \"(\" after distanceToLocation:fromLocation:, found \(open.quoted)")
        }
        advance()
        let first = try parseOperand()
        let comma = current
        guard comma.kind == .symbol(",") else {
            throw fail(comma, "expected \",\" between the key and the location, found \(comma.quoted)")
        }
        advance()
        let second = try parseOperand()
        let close = current
        guard close.kind == .symbol(")") else {
            throw fail(close, "expected \")\" after the location, found \(close.quoted)")
        }
        advance()
        let key: String
        let keyPosition: Int
        let locationOperand: PredicateOperand
        switch (first, second) {
        case (.key(let name, let position), .value):
            (key, keyPosition, locationOperand) = (name, position, second)
        case (.value, .key(let name, let position)):
            (key, keyPosition, locationOperand) = (name, position, first)
        default:
            throw fail(open, "distanceToLocation:fromLocation: needs a location key and a CKLocation (%@)")
        }
        guard case .value(let value, _) = locationOperand, case .scalar(.location(let location)) = value else {
            throw fail(
                at: locationOperand.position,
                "distanceToLocation:fromLocation: needs a CKLocation, found \(Self.describe(locationOperand))")
        }
        if PredicateKey.systemKeys[key] != nil {
            throw fail(at: keyPosition, "\(key) is not a location field")
        }
        return .distance(key: key, from: location, position: function.position)
    }

    private mutating func parseValue() throws(CKPredicate.ParseError) -> PredicateValue {
        let token = current
        switch token.kind {
        case .string(let string):
            advance()
            return .scalar(.string(string))
        case .integer(let integer):
            advance()
            return .scalar(.int64(integer))
        case .decimal(let decimal):
            advance()
            return .scalar(.double(decimal))
        case .word:
            switch Self.keyword(token) {
            case "TRUE", "YES":
                advance()
                return .scalar(.int64(1))
            case "FALSE", "NO":
                advance()
                return .scalar(.int64(0))
            default:
                throw fail(token, "expected a value, found \(token.quoted)")
            }
        case .placeholder(let placeholder):
            advance()
            let argument = try nextArgument(for: token)
            return try argumentValue(argument, placeholder, token)
        case .symbol("{"):
            return try parseAggregate()
        default:
            throw fail(token, "expected a key or a value, found \(token.quoted)")
        }
    }

    private mutating func parseAggregate() throws(CKPredicate.ParseError) -> PredicateValue {
        let open = current
        advance()
        var elements: [FieldValue] = []
        if current.kind == .symbol("}") {
            advance()
            return .list([])
        }
        while true {
            let token = current
            if token.kind == .symbol("{") { throw fail(token, "a list cannot hold lists") }
            guard case .scalar(let element) = try parseValue() else {
                throw fail(token, "a list cannot hold lists")
            }
            if let first = elements.first, first.kindDescription != element.kindDescription {
                throw fail(
                    token, "a list must hold values of one type; found \(first.kindDescription) and \(element.kindDescription)")
            }
            elements.append(element)
            let separator = current
            if separator.kind == .symbol(",") {
                advance()
            } else if separator.kind == .symbol("}") {
                advance()
                return .list(elements)
            } else {
                throw fail(
                    separator,
                    "expected \",\" or \"}\" to close the \"{\" at position \(open.position), found \(separator.quoted)")
            }
        }
    }

    // MARK: - Arguments and keys

    private mutating func nextArgument(for token: PredicateToken) throws(CKPredicate.ParseError) -> Any {
        guard argumentsUsed < arguments.count else {
            throw fail(token, "\(token.text) has no argument: \(arguments.count) given, and this is placeholder \(argumentsUsed + 1)")
        }
        defer { argumentsUsed += 1 }
        return arguments[argumentsUsed]
    }

    private func argumentValue(
        _ argument: Any,
        _ placeholder: PredicateToken.Placeholder,
        _ token: PredicateToken
    ) throws(CKPredicate.ParseError) -> PredicateValue {
        switch placeholder {
        case .object:
            do {
                return try PredicateArgument.value(argument)
            } catch {
                throw fail(token, "\(token.text) argument: \(error.message)")
            }
        case .integer:
            guard let value = PredicateArgument.integer(argument) else {
                throw fail(token, "\(token.text) needs an integer, got \(PredicateArgument.typeName(argument))")
            }
            return .scalar(.int64(value))
        case .floating:
            guard let value = PredicateArgument.floating(argument) else {
                throw fail(
                    token, "\(token.text) needs a floating-point number (Double or Float), got \(PredicateArgument.typeName(argument))")
            }
            return .scalar(.double(value))
        case .key:
            throw fail(token, "%K stands for a key and cannot be used as a value")
        }
    }

    private static func describe(_ operand: PredicateOperand) -> String {
        switch operand {
        case .value(let value, _): value.kindDescription
        case .key(let key, _): "the key \(key)"
        case .selfKeyword: "SELF"
        case .distance: "a distance"
        }
    }

    private func key(_ name: String, _ token: PredicateToken) throws(CKPredicate.ParseError) -> String {
        switch PredicateKey.canonical(name) {
        case .success(let key): return key
        case .failure(let problem): throw fail(token, problem.message)
        }
    }
}

/// One side of a comparison.
enum PredicateOperand {
    case key(String, Int)
    case selfKeyword(Int)
    case value(PredicateValue, Int)
    case distance(key: String, from: CKLocation, position: Int)

    var position: Int {
        switch self {
        case .key(_, let position), .selfKeyword(let position), .value(_, let position): position
        case .distance(_, _, let position): position
        }
    }
}
