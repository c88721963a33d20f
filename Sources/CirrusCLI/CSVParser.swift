/// One CSV record: its cells and the line it starts on (1-based; a quoted cell may span lines).
public struct CSVRow: Sendable, Hashable {
    package var line: Int
    public var cells: [String]
}

/// A CSV text that does not parse.
public struct CSVParseError: Error, Sendable, Hashable, CustomStringConvertible {
    public let line: Int
    public let message: String
    public var description: String { "line \(self.line): \(self.message)" }
}

/// RFC 4180 CSV: comma-separated cells, `"…"` quoting with `""` for a quote, CRLF or LF line
/// ends, quoted cells may hold commas and line breaks. A UTF-8 byte-order mark is skipped.
/// Blank lines are skipped.
public enum CSVParser {
    /// Each record of `text` in order, or the first error; a record's result fails alone
    /// when only it is malformed (the parser carries on at the next line).
    public static func rows(_ text: String) -> [Result<CSVRow, CSVParseError>] {
        var results: [Result<CSVRow, CSVParseError>] = []
        var scalars = Array(text.unicodeScalars)
        if scalars.first == "\u{FEFF}" { scalars.removeFirst() }
        var index = 0
        var line = 1
        while index < scalars.count {
            let startLine = line
            var cells: [String] = []
            var cell = String.UnicodeScalarView()
            var inQuotes = false
            var wasQuoted = false
            var failure: String?
            var endOfRecord = false
            while index < scalars.count, !endOfRecord {
                let scalar = scalars[index]
                index += 1
                if inQuotes {
                    if scalar == "\"" {
                        if index < scalars.count, scalars[index] == "\"" {
                            cell.append("\"")
                            index += 1
                        } else {
                            inQuotes = false
                        }
                    } else {
                        if scalar == "\n" { line += 1 }
                        cell.append(scalar)
                    }
                    continue
                }
                switch scalar {
                case "\"":
                    if cell.isEmpty && !wasQuoted {
                        inQuotes = true
                        wasQuoted = true
                    } else if failure == nil {
                        failure = "a quote inside an unquoted cell (quote the whole cell and double the quote)"
                    }
                case ",":
                    cells.append(String(cell))
                    cell = String.UnicodeScalarView()
                    wasQuoted = false
                case "\r" where index < scalars.count && scalars[index] == "\n":
                    break
                case "\n", "\r":
                    line += 1
                    endOfRecord = true
                default:
                    if wasQuoted, failure == nil {
                        failure = "text after the closing quote of a cell"
                    }
                    cell.append(scalar)
                }
            }
            if inQuotes {
                results.append(.failure(CSVParseError(line: startLine, message: "a quoted cell is not closed")))
                break
            }
            cells.append(String(cell))
            if let failure {
                results.append(.failure(CSVParseError(line: startLine, message: failure)))
            } else if !(cells.count == 1 && cells[0].isEmpty && !wasQuoted) {
                results.append(.success(CSVRow(line: startLine, cells: cells)))
            }
        }
        return results
    }

    /// One cell as CSV writes it: quoted when it holds a comma, quote or line break.
    public static func escape(_ cell: String) -> String {
        guard cell.contains(where: { $0 == "," || $0 == "\"" || $0 == "\n" || $0 == "\r" }) else { return cell }
        return "\"" + cell.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }
}

import Foundation
