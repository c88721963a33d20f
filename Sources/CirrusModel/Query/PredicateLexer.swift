import Foundation

/// One token of a predicate format string.
struct PredicateToken: Sendable {
    enum Kind: Equatable, Sendable {
        /// A name or keyword as written (`title`, `AND`, `self` …).
        case word(String)
        /// `distanceToLocation:fromLocation:`.
        case distanceFunction
        /// A quoted string literal, escapes resolved.
        case string(String)
        case integer(Int64)
        case decimal(Double)
        case placeholder(Placeholder)
        /// An operator or punctuation: `==`, `<=`, `&&`, `(`, `{`, `,`, `.`, `[` …
        case symbol(String)
        case end
    }

    /// A `%` format specifier.
    enum Placeholder: Equatable, Sendable {
        /// `%@`: any value.
        case object
        /// `%K`: a key name.
        case key
        /// `%d`, `%i`, `%u` with any length modifier (`%ld`, `%lld`, `%lu` …).
        case integer
        /// `%f`, `%g`, `%e` (and `%lf` …).
        case floating
    }

    let kind: Kind
    /// 1-based position of the first character in the format.
    let position: Int
    /// The token as written in the format.
    let text: String

    /// The token for error messages: `"title"`, `OR`, or `the end of the format`.
    var quoted: String {
        switch kind {
        case .end: "the end of the format"
        case .word: text
        default: "\"\(text)\""
        }
    }
}

/// Splits a predicate format into tokens. Characters are grapheme clusters, so positions
/// match what a reader counts.
struct PredicateLexer {
    private let characters: [Character]
    private var index = 0
    private let format: String

    init(format: String) {
        self.format = format
        self.characters = Array(format)
    }

    /// Every token of the format, ending with `.end`.
    ///
    /// - throws: `CKPredicate.ParseError` for a character or literal that cannot start a
    ///   token (unterminated string, unknown escape or specifier, arithmetic, variables …).
    mutating func tokenize() throws(CKPredicate.ParseError) -> [PredicateToken] {
        var tokens: [PredicateToken] = []
        while true {
            skipWhitespace()
            guard index < characters.count else {
                tokens.append(PredicateToken(kind: .end, position: index + 1, text: ""))
                return tokens
            }
            tokens.append(try nextToken())
        }
    }

    private func fail(_ position: Int, _ message: String) -> CKPredicate.ParseError {
        CKPredicate.ParseError(format: format, position: position, message: message)
    }

    private func peek(_ offset: Int = 0) -> Character? {
        let at = index + offset
        return at < characters.count ? characters[at] : nil
    }

    private mutating func skipWhitespace() {
        while let c = peek(), c.isWhitespace { index += 1 }
    }

    private func text(from start: Int) -> String { String(characters[start..<index]) }

    private mutating func nextToken() throws(CKPredicate.ParseError) -> PredicateToken {
        let start = index
        guard let c = peek() else { return PredicateToken(kind: .end, position: start + 1, text: "") }
        if c.isASCII, c.isLetter || c == "_" { return try word() }
        if c.isASCII, c.isNumber { return try number() }
        if c == "-", let next = peek(1), next.isASCII, next.isNumber { return try number() }
        switch c {
        case "'", "\"": return try string(quote: c)
        case "%": return try placeholder()
        case "$":
            throw fail(start + 1, "variables ($name) are not supported; pass the value as an argument (%@)")
        case "@":
            throw fail(start + 1, "collection operators (@count, @sum …) are not supported by CloudKit")
        case "+", "-", "*", "/":
            throw fail(start + 1, "arithmetic (\(c)) is not supported by CloudKit")
        default:
            break
        }
        let two = peek(1).map { String(c) + String($0) }
        let symbols2 = ["==", "!=", "<>", "<=", "=<", ">=", "=>", "&&", "||"]
        if let two, symbols2.contains(two) {
            index += 2
            return PredicateToken(kind: .symbol(two), position: start + 1, text: two)
        }
        if "=<>!(){},.[]".contains(c) {
            index += 1
            return PredicateToken(kind: .symbol(String(c)), position: start + 1, text: String(c))
        }
        throw fail(start + 1, "unexpected character \"\(c)\"")
    }

    private mutating func word() throws(CKPredicate.ParseError) -> PredicateToken {
        let start = index
        while let c = peek(), c.isASCII, c.isLetter || c.isNumber || c == "_" { index += 1 }
        let name = text(from: start)
        guard peek() == ":" else { return PredicateToken(kind: .word(name), position: start + 1, text: name) }
        let function = "distanceToLocation:fromLocation:"
        let rest = String(characters[start..<min(characters.count, start + function.count)])
        guard rest.lowercased() == function.lowercased() else {
            throw fail(start + 1, "unknown function \"\(name):\"; CloudKit supports only distanceToLocation:fromLocation:")
        }
        index = start + function.count
        return PredicateToken(kind: .distanceFunction, position: start + 1, text: rest)
    }

    private mutating func digits() {
        while let c = peek(), c.isASCII, c.isNumber { index += 1 }
    }

    private mutating func number() throws(CKPredicate.ParseError) -> PredicateToken {
        let start = index
        if peek() == "-" { index += 1 }
        digits()
        var isDecimal = false
        if peek() == ".", let next = peek(1), next.isASCII, next.isNumber {
            isDecimal = true
            index += 1
            digits()
        }
        if let e = peek(), e == "e" || e == "E" {
            var look = 1
            if let sign = peek(1), sign == "+" || sign == "-" { look = 2 }
            if let d = peek(look), d.isASCII, d.isNumber {
                isDecimal = true
                index += look
                digits()
            }
        }
        let literal = text(from: start)
        if isDecimal {
            guard let value = Double(literal), value.isFinite else {
                throw fail(start + 1, "the number \(literal) is out of range")
            }
            return PredicateToken(kind: .decimal(value), position: start + 1, text: literal)
        }
        guard let value = Int64(literal) else {
            throw fail(start + 1, "the integer \(literal) does not fit in 64 bits")
        }
        return PredicateToken(kind: .integer(value), position: start + 1, text: literal)
    }

    private mutating func string(quote: Character) throws(CKPredicate.ParseError) -> PredicateToken {
        let start = index
        index += 1
        var value = ""
        while let c = peek() {
            index += 1
            if c == quote {
                return PredicateToken(kind: .string(value), position: start + 1, text: text(from: start))
            }
            guard c == "\\" else {
                value.append(c)
                continue
            }
            let escapePosition = index
            guard let escaped = peek() else { break }
            index += 1
            switch escaped {
            case "\\", "'", "\"": value.append(escaped)
            case "n": value.append("\n")
            case "t": value.append("\t")
            case "r": value.append("\r")
            case "u":
                let hex = String(characters[index..<min(characters.count, index + 4)])
                guard hex.count == 4, let scalarValue = UInt32(hex, radix: 16),
                    let scalar = Unicode.Scalar(scalarValue)
                else {
                    throw fail(escapePosition, "expected four hex digits after \\u")
                }
                index += 4
                value.unicodeScalars.append(scalar)
            default:
                throw fail(escapePosition, "unknown escape \\\(escaped) in a string")
            }
        }
        throw fail(start + 1, "unterminated string: the \(quote) here is never closed")
    }

    private mutating func placeholder() throws(CKPredicate.ParseError) -> PredicateToken {
        let start = index
        index += 1
        var modifiers = ""
        while let c = peek(), "hlqz".contains(c), modifiers.count < 2 {
            modifiers.append(c)
            index += 1
        }
        guard let conversion = peek() else {
            throw fail(start + 1, "incomplete format specifier \"\(text(from: start))\"")
        }
        index += 1
        let kind: PredicateToken.Placeholder
        switch (conversion, modifiers) {
        case ("@", ""): kind = .object
        case ("K", ""): kind = .key
        case ("d", _), ("i", _), ("u", _): kind = .integer
        case ("f", ""), ("g", ""), ("e", ""), ("f", "l"), ("g", "l"), ("e", "l"): kind = .floating
        default:
            throw fail(start + 1, "unknown format specifier \"\(text(from: start))\"; expected %@, %K, %d or %f")
        }
        return PredicateToken(kind: .placeholder(kind), position: start + 1, text: text(from: start))
    }
}
