import CirrusKit
import CirrusModel
import Foundation

/// The type of a record field, as `--field name:type` names it.
public indirect enum FieldType: Sendable, Hashable, CustomStringConvertible {
    case string
    /// A 64-bit integer.
    case int
    case double
    /// Stored as the integer 1 or 0, as CloudKit stores booleans.
    case bool
    /// ISO 8601 (`2024-05-01`, `2024-05-01T10:00:00Z`, with fractions) or seconds since 1970.
    case date
    /// Base64.
    case bytes
    /// `latitude,longitude`.
    case location
    /// The name of a record in the same zone.
    case reference
    /// A file whose content becomes a `CKAsset`.
    case asset
    /// A list (`[string]`): a JSON array, or in CSV a `;`-separated cell.
    case list(FieldType)

    /// The names `--field` accepts.
    package static let names = "string, int, double, bool, date, bytes, location, reference, asset, or a list such as [string]"

    /// Parses `string`, `int` … or `[type]`.
    package init?(name: String) {
        let name = name.trimmingCharacters(in: .whitespaces).lowercased()
        if name.hasPrefix("["), name.hasSuffix("]") {
            guard let element = FieldType(name: String(name.dropFirst().dropLast())), !element.isList else { return nil }
            self = .list(element)
            return
        }
        switch name {
        case "string", "text": self = .string
        case "int", "int64", "integer": self = .int
        case "double", "float", "number": self = .double
        case "bool", "boolean": self = .bool
        case "date", "timestamp": self = .date
        case "bytes", "data", "base64": self = .bytes
        case "location": self = .location
        case "reference", "ref": self = .reference
        case "asset": self = .asset
        default: return nil
        }
    }

    var isList: Bool {
        if case .list = self { return true }
        return false
    }

    public var description: String {
        switch self {
        case .string: "string"
        case .int: "int"
        case .double: "double"
        case .bool: "bool"
        case .date: "date"
        case .bytes: "bytes"
        case .location: "location"
        case .reference: "reference"
        case .asset: "asset"
        case .list(let element): "[\(element)]"
        }
    }
}

/// A `--field name:type` option.
public struct FieldSpecification: Sendable, Hashable, Codable {
    public var name: String
    public var type: FieldType

    /// Parses `name:type`.
    ///
    /// - throws: `CLIError` (usage) naming what is wrong.
    package init(parsing text: String) throws(CLIError) {
        guard let colon = text.lastIndex(of: ":") else {
            throw CLIError.usage("--field '\(text)': expected name:type (type: \(FieldType.names))")
        }
        let name = String(text[..<colon]).trimmingCharacters(in: .whitespaces)
        let typeName = String(text[text.index(after: colon)...])
        guard !name.isEmpty else { throw CLIError.usage("--field '\(text)': the field name is empty") }
        guard let type = FieldType(name: typeName) else {
            throw CLIError.usage("--field '\(text)': unknown type '\(typeName)' (one of: \(FieldType.names))")
        }
        self.name = name
        self.type = type
    }

    public init(name: String, type: FieldType) {
        self.name = name
        self.type = type
    }

    enum CodingKeys: String, CodingKey { case name, type }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.name = try container.decode(String.self, forKey: .name)
        let typeName = try container.decode(String.self, forKey: .type)
        guard let type = FieldType(name: typeName) else {
            throw DecodingError.dataCorruptedError(forKey: .type, in: container, debugDescription: "unknown type \(typeName)")
        }
        self.type = type
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(self.name, forKey: .name)
        try container.encode(self.type.description, forKey: .type)
    }
}
