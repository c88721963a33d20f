import Foundation

/// A JSON value that keeps what the CLI needs and Foundation's parser loses: whether a number
/// was written as an integer (`3`) or not (`3.0`, `3e2`), and the order of object keys.
public enum JSONValue: Sendable, Hashable {
    case null
    case bool(Bool)
    /// A number written without fraction or exponent that fits in Int64.
    case integer(Int64)
    /// Any other number.
    case double(Double)
    case string(String)
    case array([JSONValue])
    /// Keys in the order they were written.
    case object([(String, JSONValue)])

    public static func == (lhs: JSONValue, rhs: JSONValue) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): true
        case (.bool(let a), .bool(let b)): a == b
        case (.integer(let a), .integer(let b)): a == b
        case (.double(let a), .double(let b)): a == b || (a.isNaN && b.isNaN)
        case (.string(let a), .string(let b)): a == b
        case (.array(let a), .array(let b)): a == b
        case (.object(let a), .object(let b)): a.count == b.count && zip(a, b).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
        default: false
        }
    }

    public func hash(into hasher: inout Hasher) {
        switch self {
        case .null: hasher.combine(0)
        case .bool(let v): hasher.combine(v)
        case .integer(let v): hasher.combine(v)
        case .double(let v): hasher.combine(v)
        case .string(let v): hasher.combine(v)
        case .array(let v): hasher.combine(v)
        case .object(let v):
            for (key, value) in v {
                hasher.combine(key)
                hasher.combine(value)
            }
        }
    }

    /// The value of `key` in an object.
    package subscript(key: String) -> JSONValue? {
        guard case .object(let members) = self else { return nil }
        return members.first { $0.0 == key }?.1
    }

    /// A short name of the kind of value, for error messages.
    package var kindName: String {
        switch self {
        case .null: "null"
        case .bool: "a boolean"
        case .integer: "an integer"
        case .double: "a number"
        case .string: "a string"
        case .array: "an array"
        case .object: "an object"
        }
    }
}

/// A JSON text that does not parse: what and where (1-based column in the line).
public struct JSONParseError: Error, Sendable, Hashable, CustomStringConvertible {
    public let message: String
    public let column: Int
    public var description: String { "\(self.message) at column \(self.column)" }
}

/// Parses JSON (RFC 8259) from UTF-8 bytes, nesting at most 64 deep.
public struct JSONParser {
    private let bytes: [UInt8]
    private var index = 0
    private var depth = 0
    static let maximumDepth = 64

    /// Parses `text` as exactly one JSON value (whitespace around it allowed).
    ///
    /// - throws: `JSONParseError`.
    public static func parse(_ text: some StringProtocol) throws(JSONParseError) -> JSONValue {
        var parser = JSONParser(bytes: Array(text.utf8))
        parser.skipWhitespace()
        let value = try parser.parseValue()
        parser.skipWhitespace()
        guard parser.index == parser.bytes.count else { throw parser.error("unexpected text after the value") }
        return value
    }

    private init(bytes: [UInt8]) {
        self.bytes = bytes
    }

    private func error(_ message: String) -> JSONParseError {
        JSONParseError(message: message, column: self.index + 1)
    }

    private mutating func skipWhitespace() {
        while self.index < self.bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(self.bytes[self.index]) {
            self.index += 1
        }
    }

    private var current: UInt8? { self.index < self.bytes.count ? self.bytes[self.index] : nil }

    private mutating func parseValue() throws(JSONParseError) -> JSONValue {
        guard let byte = self.current else { throw self.error("unexpected end of input") }
        switch byte {
        case UInt8(ascii: "{"): return try self.parseObject()
        case UInt8(ascii: "["): return try self.parseArray()
        case UInt8(ascii: "\""): return .string(try self.parseString())
        case UInt8(ascii: "t"): try self.literal("true"); return .bool(true)
        case UInt8(ascii: "f"): try self.literal("false"); return .bool(false)
        case UInt8(ascii: "n"): try self.literal("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try self.parseNumber()
        default: throw self.error("unexpected character '\(Character(UnicodeScalar(byte)))'")
        }
    }

    private mutating func literal(_ word: String) throws(JSONParseError) {
        let expected = Array(word.utf8)
        guard self.index + expected.count <= self.bytes.count,
            Array(self.bytes[self.index..<self.index + expected.count]) == expected
        else { throw self.error("invalid literal (expected \(word))") }
        self.index += expected.count
    }

    private mutating func enter() throws(JSONParseError) {
        self.depth += 1
        guard self.depth <= Self.maximumDepth else { throw self.error("nested deeper than \(Self.maximumDepth)") }
    }

    private mutating func parseObject() throws(JSONParseError) -> JSONValue {
        try self.enter()
        defer { self.depth -= 1 }
        self.index += 1
        var members: [(String, JSONValue)] = []
        self.skipWhitespace()
        if self.current == UInt8(ascii: "}") {
            self.index += 1
            return .object(members)
        }
        while true {
            self.skipWhitespace()
            guard self.current == UInt8(ascii: "\"") else { throw self.error("expected a key in quotes") }
            let key = try self.parseString()
            self.skipWhitespace()
            guard self.current == UInt8(ascii: ":") else { throw self.error("expected ':' after key \"\(key)\"") }
            self.index += 1
            self.skipWhitespace()
            let value = try self.parseValue()
            guard !members.contains(where: { $0.0 == key }) else { throw self.error("key \"\(key)\" appears twice") }
            members.append((key, value))
            self.skipWhitespace()
            switch self.current {
            case UInt8(ascii: ","): self.index += 1
            case UInt8(ascii: "}"): self.index += 1; return .object(members)
            default: throw self.error("expected ',' or '}' in object")
            }
        }
    }

    private mutating func parseArray() throws(JSONParseError) -> JSONValue {
        try self.enter()
        defer { self.depth -= 1 }
        self.index += 1
        var elements: [JSONValue] = []
        self.skipWhitespace()
        if self.current == UInt8(ascii: "]") {
            self.index += 1
            return .array(elements)
        }
        while true {
            self.skipWhitespace()
            elements.append(try self.parseValue())
            self.skipWhitespace()
            switch self.current {
            case UInt8(ascii: ","): self.index += 1
            case UInt8(ascii: "]"): self.index += 1; return .array(elements)
            default: throw self.error("expected ',' or ']' in array")
            }
        }
    }

    private mutating func parseString() throws(JSONParseError) -> String {
        self.index += 1
        // Most strings hold no escape and no control character: their bytes as they are.
        var end = self.index
        while end < self.bytes.count {
            let byte = self.bytes[end]
            if byte == UInt8(ascii: "\"") {
                let text = String(decoding: self.bytes[self.index..<end], as: UTF8.self)
                self.index = end + 1
                return text
            }
            if byte == UInt8(ascii: "\\") || byte < 0x20 { break }
            end += 1
        }
        var scalars = String.UnicodeScalarView()
        var run: [UInt8] = []
        func flush() {
            if !run.isEmpty {
                scalars.append(contentsOf: String(decoding: run, as: UTF8.self).unicodeScalars)
                run.removeAll(keepingCapacity: true)
            }
        }
        while true {
            guard let byte = self.current else { throw self.error("unterminated string") }
            self.index += 1
            switch byte {
            case UInt8(ascii: "\""):
                flush()
                return String(scalars)
            case UInt8(ascii: "\\"):
                flush()
                guard let escape = self.current else { throw self.error("unterminated string") }
                self.index += 1
                switch escape {
                case UInt8(ascii: "\""): scalars.append("\"")
                case UInt8(ascii: "\\"): scalars.append("\\")
                case UInt8(ascii: "/"): scalars.append("/")
                case UInt8(ascii: "b"): scalars.append("\u{08}")
                case UInt8(ascii: "f"): scalars.append("\u{0C}")
                case UInt8(ascii: "n"): scalars.append("\n")
                case UInt8(ascii: "r"): scalars.append("\r")
                case UInt8(ascii: "t"): scalars.append("\t")
                case UInt8(ascii: "u"):
                    var code = try self.hex4()
                    if (0xD800...0xDBFF).contains(code) {
                        guard self.current == UInt8(ascii: "\\"), self.index + 1 < self.bytes.count,
                            self.bytes[self.index + 1] == UInt8(ascii: "u")
                        else { throw self.error("unpaired surrogate") }
                        self.index += 2
                        let low = try self.hex4()
                        guard (0xDC00...0xDFFF).contains(low) else { throw self.error("unpaired surrogate") }
                        code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                    }
                    guard let scalar = Unicode.Scalar(code) else { throw self.error("invalid \\u escape") }
                    scalars.append(scalar)
                default:
                    throw self.error("invalid escape '\\\(Character(UnicodeScalar(escape)))'")
                }
            case 0x00..<0x20:
                throw self.error("control character in string")
            default:
                run.append(byte)
            }
        }
    }

    private mutating func hex4() throws(JSONParseError) -> UInt32 {
        guard self.index + 4 <= self.bytes.count,
            let value = UInt32(String(decoding: self.bytes[self.index..<self.index + 4], as: UTF8.self), radix: 16)
        else { throw self.error("invalid \\u escape") }
        self.index += 4
        return value
    }

    private mutating func parseNumber() throws(JSONParseError) -> JSONValue {
        let start = self.index
        var isInteger = true
        if self.current == UInt8(ascii: "-") { self.index += 1 }
        guard let first = self.current, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(first) else {
            throw self.error("invalid number")
        }
        if first == UInt8(ascii: "0") {
            self.index += 1
        } else {
            self.skipDigits()
        }
        if self.current == UInt8(ascii: ".") {
            isInteger = false
            self.index += 1
            guard self.skipDigits() > 0 else { throw self.error("invalid number: digits expected after '.'") }
        }
        if self.current == UInt8(ascii: "e") || self.current == UInt8(ascii: "E") {
            isInteger = false
            self.index += 1
            if self.current == UInt8(ascii: "+") || self.current == UInt8(ascii: "-") { self.index += 1 }
            guard self.skipDigits() > 0 else { throw self.error("invalid number: digits expected in exponent") }
        }
        let text = String(decoding: self.bytes[start..<self.index], as: UTF8.self)
        if isInteger, let integer = Int64(text) {
            return .integer(integer)
        }
        guard let double = Double(text), double.isFinite else { throw self.error("number out of range") }
        return .double(double)
    }

    @discardableResult
    private mutating func skipDigits() -> Int {
        var count = 0
        while let byte = self.current, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) {
            self.index += 1
            count += 1
        }
        return count
    }
}

extension JSONValue {
    /// Compact JSON text: keys in order, doubles always with a fraction or exponent so they
    /// read back as doubles.
    public var jsonText: String {
        var output = ""
        self.write(to: &output)
        return output
    }

    private func write(to output: inout String) {
        switch self {
        case .null: output += "null"
        case .bool(let value): output += value ? "true" : "false"
        case .integer(let value): output += String(value)
        case .double(let value):
            if !value.isFinite {
                output += "null"
            } else if value == value.rounded(), abs(value) < 1e15 {
                output += String(format: "%.1f", value)
            } else {
                output += "\(value)"
            }
        case .string(let value): Self.writeString(value, to: &output)
        case .array(let values):
            output += "["
            for (index, value) in values.enumerated() {
                if index > 0 { output += "," }
                value.write(to: &output)
            }
            output += "]"
        case .object(let members):
            output += "{"
            for (index, (key, value)) in members.enumerated() {
                if index > 0 { output += "," }
                Self.writeString(key, to: &output)
                output += ":"
                value.write(to: &output)
            }
            output += "}"
        }
    }

    private static func writeString(_ value: String, to output: inout String) {
        output += "\""
        for scalar in value.unicodeScalars {
            switch scalar {
            case "\"": output += "\\\""
            case "\\": output += "\\\\"
            case "\n": output += "\\n"
            case "\r": output += "\\r"
            case "\t": output += "\\t"
            case "\u{00}"..."\u{1F}": output += String(format: "\\u%04x", scalar.value)
            default: output.unicodeScalars.append(scalar)
            }
        }
        output += "\""
    }
}
