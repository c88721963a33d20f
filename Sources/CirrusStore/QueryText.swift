import Foundation

/// Full-text search (`self CONTAINS 'words'`) over SQLite FTS5 with the
/// unicode61 tokenizer (`remove_diacritics 2`), so matching ignores case and
/// diacritics.
enum QueryText {
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

    /// An FTS5 query matching rows that hold every token: each one quoted
    /// (a string, never syntax), separated by spaces (implicit AND).
    static func matchExpression(_ tokens: [String]) -> String {
        tokens.map { "\"" + $0.replacingOccurrences(of: "\"", with: "\"\"") + "\"" }.joined(separator: " ")
    }
}
