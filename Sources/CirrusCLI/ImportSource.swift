import CirrusKit
import CirrusModel
import Foundation

/// The formats `cirrus import` reads.
public enum ImportFormat: String, Sendable, Codable, CaseIterable {
    /// One JSON object per line (`.jsonl`, `.ndjson`, `.json`).
    case jsonl
    /// A header row of field names, then one record per row (`.csv`).
    case csv

    /// The format a file name suggests, or nil.
    package init?(path: String) {
        switch URL(fileURLWithPath: path).pathExtension.lowercased() {
        case "jsonl", "ndjson", "json": self = .jsonl
        case "csv": self = .csv
        default: return nil
        }
    }
}

/// How rows become records; kept in the import state so a resume reads the file the same way.
public struct ImportOptions: Sendable, Codable, Hashable {
    /// Used for rows without `$recordType`.
    public var recordType: String?
    package var zoneName: String = CKRecordZone.ID.defaultZoneName
    /// `private` or `public`.
    package var database: String = "private"
    public var format: ImportFormat = .jsonl
    public var fields: [FieldSpecification] = []
    /// The field whose value names each record; nil = `$recordName` or import ID + line.
    public var idField: String?
    /// Records per `CKModifyRecordsOperation` (1…400).
    package var batchSize = 400
    /// `skip` or `fail`.
    package var onError = "fail"

    public init() {}
}

/// A row that cannot become a record.
package struct BadRow: Sendable, Hashable, Codable, CustomStringConvertible {
    package var line: Int
    package var message: String
    package var description: String { "line \(self.line): \(self.message)" }
}

/// One good row of the input: where it is, and the record type and fields it holds, converted
/// (and so checked) when the file was read.
public struct SourceRow: Sendable {
    package var line: Int
    package var recordName: String
    var recordType: String
    var fields: [(String, any CKRecordValue)]
}

/// The input file read into rows: the good ones in file order, the bad ones with their line.
public struct ImportSource {
    public let rows: [SourceRow]
    package let badRows: [BadRow]
    let columnTypes: [String: FieldType]
    let zoneID: CKRecordZone.ID

    /// Reads `text` as `options.format`; record names without an ID field are
    /// `<importID>-<line>`.
    public init(text: String, options: ImportOptions, importID: String, baseDirectory: URL) {
        let zoneID = CKRecordZone.ID(zoneName: options.zoneName)
        let converter = FieldConverter(zoneID: zoneID, baseDirectory: baseDirectory)
        self.zoneID = zoneID
        let declared = Dictionary(options.fields.map { ($0.name, $0.type) }, uniquingKeysWith: { $1 })
        var rows: [SourceRow] = []
        var bad: [BadRow] = []
        var names: [String: Int] = [:]
        var header: [String] = []
        var columnTypes: [String: FieldType] = declared

        /// Keeps a row whose fields converted, unless its name is empty or taken.
        func accept(line: Int, recordName: String, _ convert: () throws -> (String, [(String, any CKRecordValue)])) {
            let converted: (type: String, fields: [(String, any CKRecordValue)])
            do {
                converted = try convert()
            } catch {
                bad.append(BadRow(line: line, message: "\(error)"))
                return
            }
            accept(SourceRow(line: line, recordName: recordName, recordType: converted.type, fields: converted.fields))
        }
        func accept(_ row: SourceRow) {
            if row.recordName.isEmpty {
                bad.append(BadRow(line: row.line, message: "the record name is empty"))
            } else if let first = names[row.recordName] {
                bad.append(BadRow(line: row.line, message: "record name '\(row.recordName)' was already used on line \(first)"))
            } else {
                names[row.recordName] = row.line
                rows.append(row)
            }
        }

        switch options.format {
        case .jsonl:
            // Split on the byte, not the Character: "\r\n" is one Character, and bytes are faster.
            let lines = text.utf8.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false)
            // Lines are read and converted on every core (the server waits meanwhile), each part
            // with a converter of its own; names are then checked in file order.
            let declaredTypes = columnTypes
            let read = Self.readConcurrently(count: lines.count) { range in
                let converter = FieldConverter(zoneID: zoneID, baseDirectory: baseDirectory)
                return range.map { index in
                    Self.readJSONLine(
                        Substring(lines[index]), line: index + 1, importID: importID, options: options, converter: converter,
                        columnTypes: declaredTypes)
                }
            }
            for line in read {
                switch line {
                case .blank: continue
                case .bad(let row): bad.append(row)
                case .row(let row): accept(row)
                }
            }
        case .csv:
            let parsed = CSVParser.rows(text)
            var records: [CSVRow] = []
            for result in parsed {
                switch result {
                case .success(let row) where header.isEmpty:
                    header = row.cells.map { $0.trimmingCharacters(in: .whitespaces) }
                    if let empty = header.firstIndex(where: \.isEmpty) {
                        bad.append(BadRow(line: row.line, message: "header column \(empty + 1) has no name"))
                    }
                    var seen = Set<String>()
                    for name in header where !name.isEmpty && !seen.insert(name).inserted {
                        bad.append(BadRow(line: row.line, message: "header names column '\(name)' twice"))
                    }
                case .success(let row):
                    records.append(row)
                case .failure(let error):
                    bad.append(BadRow(line: error.line, message: "malformed CSV: \(error.message)"))
                }
            }
            if let idField = options.idField, !header.isEmpty, !header.contains(idField) {
                bad.append(BadRow(line: 1, message: "the header has no column '\(idField)' (--id-field)"))
            }
            if bad.contains(where: { $0.line <= 1 }) || header.isEmpty {
                if header.isEmpty { bad.append(BadRow(line: 1, message: "no header row")) }
                self.rows = []
                self.badRows = bad
                self.columnTypes = columnTypes
                return
            }
            let wellFormed = records.filter { $0.cells.count == header.count }
            for (index, name) in header.enumerated() where declared[name] == nil {
                columnTypes[name] = converter.inferType(ofColumn: wellFormed.lazy.map { $0.cells[index] })
            }
            let idIndex = options.idField.flatMap { header.firstIndex(of: $0) }
            let recordNameIndex = header.firstIndex(of: "$recordName")
            for record in records {
                guard record.cells.count == header.count else {
                    bad.append(BadRow(line: record.line, message: "\(record.cells.count) cells where the header has \(header.count)"))
                    continue
                }
                var name = "\(importID)-\(record.line)"
                if let index = idIndex ?? recordNameIndex { name = record.cells[index] }
                accept(line: record.line, recordName: name) {
                    try Self.fieldsCSV(record.cells, converter: converter, options: options, header: header, columnTypes: columnTypes)
                }
            }
        }
        self.rows = rows
        self.badRows = bad.sorted { $0.line < $1.line }
        self.columnTypes = columnTypes
    }

    /// What one line of JSON Lines holds.
    enum JSONLine: Sendable {
        /// Nothing but whitespace.
        case blank
        case bad(BadRow)
        /// A row whose fields converted; its name is not checked yet.
        case row(SourceRow)
    }

    /// Reads line number `line` of a JSON Lines file.
    static func readJSONLine(
        _ rawLine: Substring, line: Int, importID: String, options: ImportOptions, converter: FieldConverter,
        columnTypes: [String: FieldType]
    ) -> JSONLine {
        let trimmed = Self.trimmed(rawLine)
        if trimmed.isEmpty { return .blank }
        let value: JSONValue
        do {
            value = try JSONParser.parse(trimmed)
        } catch {
            return .bad(BadRow(line: line, message: "malformed JSON: \(error)"))
        }
        guard case .object(let members) = value else {
            return .bad(BadRow(line: line, message: "a line must hold a JSON object, not \(value.kindName)"))
        }
        var name = "\(importID)-\(line)"
        if let idField = options.idField {
            switch value[idField] {
            case .string(let text)?: name = text
            case .integer(let number)?: name = String(number)
            default: return .bad(BadRow(line: line, message: "no string or integer '\(idField)' (--id-field)"))
            }
        } else if case .string(let text)? = value["$recordName"] {
            name = text
        }
        do {
            let (type, fields) = try Self.fieldsJSON(members, converter: converter, options: options, columnTypes: columnTypes)
            return .row(SourceRow(line: line, recordName: name, recordType: type, fields: fields))
        } catch {
            return .bad(BadRow(line: line, message: "\(error)"))
        }
    }

    /// `read` over `0..<count` in contiguous parts, one per core (one part for a short input),
    /// joined in order.
    package static func readConcurrently<Item: Sendable>(count: Int, _ read: @Sendable (Range<Int>) -> [Item]) -> [Item] {
        let parts = min(ProcessInfo.processInfo.activeProcessorCount, 8, count / Self.linesPerPart)
        guard parts > 1 else { return read(0..<count) }
        let results = Locked([[Item]](repeating: [], count: parts))
        DispatchQueue.concurrentPerform(iterations: parts) { part in
            let items = read((count * part / parts)..<(count * (part + 1) / parts))
            results.withLock { $0[part] = items }
        }
        return results.withLock { $0.flatMap { $0 } }
    }

    /// The fewest lines worth a part of their own.
    package static let linesPerPart = 1_000

    /// The record type and fields of a JSON object.
    private static func fieldsJSON(
        _ members: [(String, JSONValue)], converter: FieldConverter, options: ImportOptions, columnTypes: [String: FieldType]
    ) throws -> (String, [(String, any CKRecordValue)]) {
        var type = options.recordType
        var fields: [(String, any CKRecordValue)] = []
        for (key, value) in members {
            if key == "$recordType" {
                guard case .string(let name) = value, !name.isEmpty else {
                    throw FieldConversionError(field: key, message: "must be a non-empty string")
                }
                type = name
                continue
            }
            if key.hasPrefix("$") { continue }
            if let converted = try converter.value(json: value, as: columnTypes[key], field: key) {
                fields.append((key, converted))
            }
        }
        guard let type else { throw ImportRowError("no $recordType and no --record-type") }
        return (type, fields)
    }

    private static func fieldsCSV(
        _ cells: [String], converter: FieldConverter, options: ImportOptions, header: [String], columnTypes: [String: FieldType]
    ) throws -> (String, [(String, any CKRecordValue)]) {
        var type = options.recordType
        var fields: [(String, any CKRecordValue)] = []
        for (index, name) in header.enumerated() {
            if name == "$recordType" {
                if !cells[index].isEmpty { type = cells[index] }
                continue
            }
            if name.hasPrefix("$") { continue }
            if let value = try converter.value(cell: cells[index], as: columnTypes[name] ?? .string, field: name) {
                fields.append((name, value))
            }
        }
        guard let type else { throw ImportRowError("no $recordType column value and no --record-type") }
        return (type, fields)
    }

    /// The record of `row`.
    public func record(for row: SourceRow) -> CKRecord {
        CKRecord(recordType: row.recordType, recordID: CKRecord.ID(recordName: row.recordName, zoneID: self.zoneID), fields: row.fields)
    }

    /// The types the CSV columns were given (declared or inferred).
    public var inferredTypes: [String: FieldType] { self.columnTypes }
}

struct ImportRowError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

extension ImportSource {
    /// `line` without the whitespace and newlines around it: most lines have none, and
    /// Foundation's `trimmingCharacters` (through `NSString`) took 8 % of an import's CPU.
    static func trimmed(_ line: Substring) -> String {
        if let first = line.utf8.first, let last = line.utf8.last,
            Self.isPlainEdge(first), Self.isPlainEdge(last)
        {
            return String(line)
        }
        return line.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// An ASCII byte that is neither whitespace nor a control character: nothing to trim there.
    private static func isPlainEdge(_ byte: UInt8) -> Bool {
        byte > 0x20 && byte < 0x7F
    }
}
