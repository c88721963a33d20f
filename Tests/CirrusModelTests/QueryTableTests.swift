import Foundation
import Testing

@testable import CirrusModel

/// The README's table of what CloudKit and Cirrus accept ("Queries"): every example predicate
/// in it parses or is refused as its Cirrus column says.
@Suite("README: the query table matches the parser")
struct QueryTableTests {
    struct Row: CustomTestStringConvertible, Sendable {
        let predicate: String
        let accepted: Bool
        var testDescription: String { predicate }
    }

    /// The rows of the table: each example predicate (code spans of the Example column outside
    /// parentheses) with whether Cirrus accepts it.
    static func rows() throws -> [Row] {
        let readme = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("README.md")
        let text = try String(contentsOf: readme, encoding: .utf8)
        guard let start = text.range(of: "### What CloudKit accepts, what Cirrus accepts") else { return [] }
        var rows: [Row] = []
        for line in text[start.upperBound...].split(separator: "\n", omittingEmptySubsequences: false).drop(while: { !$0.hasPrefix("|") }) {
            guard line.hasPrefix("|") else { break }
            let cells = line.split(separator: "|", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
            guard cells.count >= 5, cells[4].hasPrefix("accepted") || cells[4].hasPrefix("refused") else { continue }
            for predicate in Self.codeSpansOutsideParentheses(cells[2]) {
                rows.append(Row(predicate: predicate, accepted: cells[4].hasPrefix("accepted")))
            }
        }
        return rows
    }

    static func codeSpansOutsideParentheses(_ cell: String) -> [String] {
        var spans: [String] = []
        var depth = 0
        var span: String?
        for character in cell {
            if var open = span {
                if character == "`" {
                    if depth == 0 { spans.append(open) }
                    span = nil
                } else {
                    open.append(character)
                    span = open
                }
            } else if character == "`" {
                span = ""
            } else if character == "(" {
                depth += 1
            } else if character == ")" {
                depth -= 1
            }
        }
        return spans
    }

    @Test func theTableIsThereAndCoversBothColumns() throws {
        let rows = try Self.rows()
        #expect(rows.count >= 25)
        #expect(rows.contains { $0.accepted } && rows.contains { !$0.accepted })
    }

    @Test(arguments: try QueryTableTests.rows())
    func eachExampleIsTreatedAsTheTableSays(_ row: Row) {
        let here = CKLocation(latitude: 47.37, longitude: 8.54)
        let format = row.predicate.replacingOccurrences(of: "$HERE", with: "%@")
        let arguments: [Any] = format == row.predicate ? [] : [here]
        let parsed = CKPredicate(format: format, argumentArray: arguments)
        if row.accepted {
            #expect(parsed.parseError == nil, "\(row.predicate): \(parsed.parseError.map { "\($0)" } ?? "")")
        } else {
            #expect(parsed.parseError != nil, "\(row.predicate) was accepted")
        }
    }
}
