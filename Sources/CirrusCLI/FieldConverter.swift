import CirrusKit
import CirrusModel
import Foundation

/// A cell or JSON value that cannot become the field value asked for.
package struct FieldConversionError: Error, Sendable, Hashable, CustomStringConvertible {
    package let field: String
    package let message: String
    package var description: String { "field '\(self.field)': \(self.message)" }
}

/// Turns CSV cells and JSON values into record field values, by declared or inferred type.
/// Not thread-safe (it keeps date formatters); one per import.
package final class FieldConverter {
    private let iso = ISO8601DateFormatter()
    private let isoFractional: ISO8601DateFormatter = {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter
    }()
    private let isoDate: ISO8601DateFormatter = {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withFullDate]
        return formatter
    }()
    /// Where references point and relative asset paths start.
    let zoneID: CKRecordZone.ID
    let baseDirectory: URL

    package init(zoneID: CKRecordZone.ID, baseDirectory: URL = URL(fileURLWithPath: FileManager.default.currentDirectoryPath)) {
        self.zoneID = zoneID
        self.baseDirectory = baseDirectory
    }

    // MARK: - Text

    /// A date in ISO 8601 (date only, seconds, or fractions), or nil.
    package func date(from text: String) -> Date? {
        self.isoFractional.date(from: text) ?? self.iso.date(from: text) ?? self.isoDate.date(from: text)
    }

    /// A date as export writes it (UTC, milliseconds).
    package func text(of date: Date) -> String {
        self.isoFractional.string(from: date)
    }

    /// The type a whole CSV column suggests: int, double, bool, date, or string. Empty cells
    /// are ignored; a column of only empty cells is string.
    package func inferType(ofColumn cells: some Sequence<String>) -> FieldType {
        var candidates: Set<FieldType> = [.int, .double, .bool, .date]
        var sawValue = false
        for cell in cells where !cell.isEmpty {
            sawValue = true
            if candidates.contains(.int), Int64(cell) == nil { candidates.remove(.int) }
            if candidates.contains(.double), Double(cell).map({ $0.isFinite }) != true || cell.lowercased().contains("n") {
                candidates.remove(.double)
            }
            if candidates.contains(.bool), !["true", "false"].contains(cell.lowercased()) { candidates.remove(.bool) }
            if candidates.contains(.date), self.date(from: cell) == nil { candidates.remove(.date) }
            if candidates.isEmpty { return .string }
        }
        guard sawValue else { return .string }
        for type in [FieldType.int, .double, .bool, .date] where candidates.contains(type) {
            return type
        }
        return .string
    }

    /// The value of CSV cell `cell` as `type`; nil for an empty cell (the field is left unset).
    package func value(cell: String, as type: FieldType, field: String) throws(FieldConversionError) -> (any CKRecordValue)? {
        if cell.isEmpty { return nil }
        if case .list(let element) = type {
            let parts = cell.split(separator: ";", omittingEmptySubsequences: false).map {
                $0.trimmingCharacters(in: .whitespaces)
            }
            return try self.list(parts.map { JSONValue.string($0) }, of: element, field: field)
        }
        return try self.scalar(.string(cell), as: type, field: field)
    }

    // MARK: - JSON

    /// The value of JSON `value`, as `type` when given, else as its JSON type suggests
    /// (integers → int, other numbers → double, booleans → bool, strings → string, arrays →
    /// lists, `{"$date": …}`-style tagged objects → their type). nil for JSON null.
    package func value(json value: JSONValue, as declaredType: FieldType?, field: String) throws(FieldConversionError) -> (any CKRecordValue)? {
        if case .null = value { return nil }
        let type: FieldType
        if let declared = declaredType {
            type = declared
        } else {
            type = try self.inferType(of: value, field: field)
        }
        if case .list(let element) = type {
            guard case .array(let elements) = value else {
                throw FieldConversionError(field: field, message: "\(value.kindName) is not a list (\(type))")
            }
            return try self.list(elements, of: element, field: field)
        }
        if case .array = value {
            throw FieldConversionError(field: field, message: "a list where \(type) was asked for")
        }
        return try self.scalar(value, as: type, field: field)
    }

    private func inferType(of value: JSONValue, field: String) throws(FieldConversionError) -> FieldType {
        switch value {
        case .null, .string: return .string
        case .bool: return .bool
        case .integer: return .int
        case .double: return .double
        case .object(let members):
            guard members.count >= 1, let tag = Self.tags[members[0].0] else {
                throw FieldConversionError(
                    field: field,
                    message: "an object is not a field value (use a tagged value such as {\"$date\": …} or --field \(field):TYPE)")
            }
            return tag
        case .array(let elements):
            guard let first = elements.first(where: { $0 != .null }) else { return .list(.string) }
            var type = try self.inferType(of: first, field: field)
            for element in elements where element != .null {
                let other = try self.inferType(of: element, field: field)
                if other == type { continue }
                if Set([type, other]) == [.int, .double] {
                    type = .double
                    continue
                }
                throw FieldConversionError(field: field, message: "a list mixes \(type) and \(other) values")
            }
            guard !type.isList else { throw FieldConversionError(field: field, message: "lists cannot nest") }
            return .list(type)
        }
    }

    /// The tags of typed values in JSON Lines (what export writes).
    static let tags: [String: FieldType] = [
        "$date": .date, "$bytes": .bytes, "$location": .location, "$reference": .reference, "$asset": .asset,
        "$double": .double, "$int": .int,
    ]

    private func list(_ elements: [JSONValue], of element: FieldType, field: String) throws(FieldConversionError) -> any CKRecordValue {
        func each<T>(_ convert: (JSONValue) throws(FieldConversionError) -> T) throws(FieldConversionError) -> [T] {
            var values: [T] = []
            values.reserveCapacity(elements.count)
            for value in elements {
                if case .null = value {
                    throw FieldConversionError(field: field, message: "a list cannot hold null")
                }
                values.append(try convert(value))
            }
            return values
        }
        switch element {
        case .string: return try each { (v) throws(FieldConversionError) in try self.string(v, field: field) }
        case .int: return try each { (v) throws(FieldConversionError) in try self.int(v, field: field) }
        case .double: return try each { (v) throws(FieldConversionError) in try self.double(v, field: field) }
        case .bool: return try each { (v) throws(FieldConversionError) in try self.bool(v, field: field) ? Int64(1) : Int64(0) }
        case .date: return try each { (v) throws(FieldConversionError) in try self.date(v, field: field) }
        case .bytes: return try each { (v) throws(FieldConversionError) in try self.bytes(v, field: field) }
        case .location: return try each { (v) throws(FieldConversionError) in try self.location(v, field: field) }
        case .reference: return try each { (v) throws(FieldConversionError) in try self.reference(v, field: field) }
        case .asset: return try each { (v) throws(FieldConversionError) in try self.asset(v, field: field) }
        case .list: throw FieldConversionError(field: field, message: "lists cannot nest")
        }
    }

    private func scalar(_ value: JSONValue, as type: FieldType, field: String) throws(FieldConversionError) -> any CKRecordValue {
        switch type {
        case .string: return try self.string(value, field: field)
        case .int: return try self.int(value, field: field)
        case .double: return try self.double(value, field: field)
        case .bool: return try self.bool(value, field: field)
        case .date: return try self.date(value, field: field)
        case .bytes: return try self.bytes(value, field: field)
        case .location: return try self.location(value, field: field)
        case .reference: return try self.reference(value, field: field)
        case .asset: return try self.asset(value, field: field)
        case .list: throw FieldConversionError(field: field, message: "lists cannot nest")
        }
    }

    /// The content of a tagged object `{"$tag": content}`, or the value itself.
    private func untagged(_ value: JSONValue, _ tag: String) -> JSONValue {
        if case .object(let members) = value, let first = members.first, first.0 == tag { return first.1 }
        return value
    }

    private func fail(_ field: String, _ value: JSONValue, _ type: FieldType) -> FieldConversionError {
        let shown: String
        switch value {
        case .string(let text): shown = "\"\(text.count > 40 ? text.prefix(40) + "…" : text)\""
        default: shown = String(value.jsonText.prefix(40))
        }
        return FieldConversionError(field: field, message: "\(shown) is not \(type == .int ? "an" : "a") \(type)")
    }

    private func string(_ value: JSONValue, field: String) throws(FieldConversionError) -> String {
        switch value {
        case .string(let text): return text
        case .integer(let number): return String(number)
        case .double(let number): return "\(number)"
        case .bool(let flag): return flag ? "true" : "false"
        default: throw self.fail(field, value, .string)
        }
    }

    private func int(_ value: JSONValue, field: String) throws(FieldConversionError) -> Int64 {
        switch self.untagged(value, "$int") {
        case .integer(let number): return number
        case .double(let number) where number == number.rounded() && abs(number) < 9.2e18: return Int64(number)
        case .bool(let flag): return flag ? 1 : 0
        case .string(let text):
            if let number = Int64(text.trimmingCharacters(in: .whitespaces)) { return number }
        default: break
        }
        throw self.fail(field, value, .int)
    }

    private func double(_ value: JSONValue, field: String) throws(FieldConversionError) -> Double {
        switch self.untagged(value, "$double") {
        case .integer(let number): return Double(number)
        case .double(let number): return number
        case .string(let text):
            if let number = Double(text.trimmingCharacters(in: .whitespaces)), number.isFinite { return number }
        default: break
        }
        throw self.fail(field, value, .double)
    }

    private func bool(_ value: JSONValue, field: String) throws(FieldConversionError) -> Bool {
        switch value {
        case .bool(let flag): return flag
        case .integer(0): return false
        case .integer(1): return true
        case .string(let text):
            switch text.trimmingCharacters(in: .whitespaces).lowercased() {
            case "true", "yes", "1": return true
            case "false", "no", "0": return false
            default: break
            }
        default: break
        }
        throw self.fail(field, value, .bool)
    }

    private func date(_ value: JSONValue, field: String) throws(FieldConversionError) -> Date {
        switch self.untagged(value, "$date") {
        case .string(let text):
            if let date = self.date(from: text.trimmingCharacters(in: .whitespaces)) { return date }
            if let seconds = Double(text), seconds.isFinite { return Date(timeIntervalSince1970: seconds) }
        case .integer(let seconds): return Date(timeIntervalSince1970: Double(seconds))
        case .double(let seconds): return Date(timeIntervalSince1970: seconds)
        default: break
        }
        throw self.fail(field, value, .date)
    }

    private func bytes(_ value: JSONValue, field: String) throws(FieldConversionError) -> Data {
        if case .string(let text) = self.untagged(value, "$bytes"), let data = Data(base64Encoded: text) {
            return data
        }
        throw FieldConversionError(field: field, message: "not base64 bytes")
    }

    private func location(_ value: JSONValue, field: String) throws(FieldConversionError) -> CKLocation {
        let content = self.untagged(value, "$location")
        var pair: (Double, Double)?
        switch content {
        case .string(let text):
            let parts = text.split(separator: ",").map { Double($0.trimmingCharacters(in: .whitespaces)) }
            if parts.count == 2, let latitude = parts[0], let longitude = parts[1] { pair = (latitude, longitude) }
        case .object:
            let latitude = try? self.double(content["latitude"] ?? .null, field: field)
            let longitude = try? self.double(content["longitude"] ?? .null, field: field)
            if let latitude, let longitude { pair = (latitude, longitude) }
        default: break
        }
        guard let (latitude, longitude) = pair, (-90...90).contains(latitude), (-180...180).contains(longitude) else {
            throw FieldConversionError(
                field: field, message: "not a location (latitude,longitude with latitude in -90…90, longitude in -180…180)")
        }
        return CKLocation(latitude: latitude, longitude: longitude)
    }

    private func reference(_ value: JSONValue, field: String) throws(FieldConversionError) -> CKRecord.Reference {
        var action = CKRecord.ReferenceAction.none
        if case .object = value, let name = value["$reference"] {
            if case .string(let actionName)? = value["action"] {
                guard let parsed = ["none": CKRecord.ReferenceAction.none, "deleteSelf": .deleteSelf][actionName] else {
                    throw FieldConversionError(field: field, message: "unknown reference action '\(actionName)' (none, deleteSelf)")
                }
                action = parsed
            }
            guard case .string(let recordName) = name, !recordName.isEmpty else { throw self.fail(field, value, .reference) }
            return CKRecord.Reference(recordID: CKRecord.ID(recordName: recordName, zoneID: self.zoneID), action: action)
        }
        guard case .string(let recordName) = value, !recordName.isEmpty else { throw self.fail(field, value, .reference) }
        return CKRecord.Reference(recordID: CKRecord.ID(recordName: recordName, zoneID: self.zoneID), action: action)
    }

    private func asset(_ value: JSONValue, field: String) throws(FieldConversionError) -> CKAsset {
        guard case .string(let path) = self.untagged(value, "$asset"), !path.isEmpty else {
            throw self.fail(field, value, .asset)
        }
        let url = path.hasPrefix("/") ? URL(fileURLWithPath: path) : self.baseDirectory.appendingPathComponent(path)
        guard FileManager.default.isReadableFile(atPath: url.path) else {
            throw FieldConversionError(field: field, message: "asset file \(url.path) cannot be read")
        }
        return CKAsset(fileURL: url)
    }
}
