import CirrusWire
import Foundation

/// Full-text search (`self CONTAINS 'words'`) over SQLite FTS5 with the
/// unicode61 tokenizer (`remove_diacritics 2`), so matching ignores case and
/// diacritics. Engines without FTS5 keep each record's ``words(of:)`` and look
/// for a search's ``words(of:)-(QueryTextSearch)`` among them.
package enum QueryText {
    /// The words of `text` as the tokenizer sees them: runs of letters, digits
    /// and combining marks; a run without a letter or digit is no word.
    static func tokens(of text: String) -> [String] {
        var tokens: [String] = []
        var current = String.UnicodeScalarView()
        var hasAlphanumeric = false
        func finish() {
            if hasAlphanumeric { tokens.append(String(current)) }
            current = String.UnicodeScalarView()
            hasAlphanumeric = false
        }
        for scalar in text.unicodeScalars {
            switch scalar.properties.generalCategory {
            case .uppercaseLetter, .lowercaseLetter, .titlecaseLetter, .modifierLetter, .otherLetter,
                .decimalNumber, .letterNumber, .otherNumber:
                current.append(scalar)
                hasAlphanumeric = true
            case .nonspacingMark, .spacingMark, .enclosingMark:
                current.append(scalar)
            default:
                finish()
            }
        }
        finish()
        return tokens
    }

    /// The words a search looks for in ``words(of:)-(Wire.Record)``: its tokens, folded.
    package static func words(of search: QueryTextSearch) -> [String] {
        search.tokens.flatMap { tokens(of: $0) }.map(fold)
    }

    /// The words `record`'s searchable text holds (``RecordCodec/searchableText(of:)``),
    /// ignoring case and diacritics: each token folded, once.
    package static func words(of record: Wire.Record) -> Set<String> {
        guard let text = RecordCodec.searchableText(of: record) else { return [] }
        return Set(tokens(of: text).map(fold))
    }

    /// Whether `record`'s searchable text holds every word of `search`, ignoring case and
    /// diacritics — what FTS5's unicode61 tokenizer decides for a stored record, for a record
    /// that is not (or no longer) in the index.
    package static func holds(_ search: QueryTextSearch, in record: Wire.Record) -> Bool {
        let stored = words(of: record)
        return words(of: search).allSatisfy { stored.contains($0) }
    }

    /// A token without case or diacritics.
    private static func fold(_ token: String) -> String {
        token.folding(options: [.caseInsensitive, .diacriticInsensitive], locale: nil)
    }

    /// An FTS5 query matching rows that hold every token: each one quoted
    /// (a string, never syntax), separated by spaces (implicit AND).
    static func matchExpression(_ tokens: [String]) -> String {
        tokens.map { "\"" + $0.replacingOccurrences(of: "\"", with: "\"\"") + "\"" }.joined(separator: " ")
    }
}
