/// A configuration file: one JSON object whose keys are flag names without the dashes and
/// whose values are strings, numbers or booleans, each remembered with its line and column
/// so that a refusal can point at it.
///
/// For example:
/// ```json
/// { "port": 7443, "data-dir": "/var/lib/cirrus", "allow-tls12": false }
/// ```
public struct ConfigurationFile: Sendable, Equatable {
    /// A value as the file spells it.
    public enum Value: Sendable, Equatable, CustomStringConvertible {
        case string(String)
        /// A number, as written (so `4194304` stays an integer).
        case number(String)
        case bool(Bool)

        public var description: String {
            switch self {
            case .string(let text): text
            case .number(let text): text
            case .bool(let flag): flag ? "true" : "false"
            }
        }
    }

    /// One key and its value, with where the key stands.
    public struct Entry: Sendable, Equatable {
        public var key: String
        public var value: Value
        public var line: Int
        public var column: Int
    }

    /// The entries in file order.
    public var entries: [Entry]

    /// Parses `text`; `path` only names the file in errors.
    ///
    /// - throws: ``ConfigurationProblem`` at the line and column of the first thing that is not
    ///   a flat JSON object of strings, numbers and booleans, or of a key given twice.
    public init(parsing text: String, path: String) throws(ConfigurationProblem) {
        var scanner = JSONScanner(bytes: Array(text.utf8), path: path)
        self.entries = try scanner.flatObject()
    }
}

/// Something wrong with the configuration, and where: `FILE:LINE:COLUMN` or an environment
/// variable's name.
public struct ConfigurationProblem: Error, Sendable, Equatable, CustomStringConvertible {
    public var location: String
    public var message: String

    public init(location: String, message: String) {
        self.location = location
        self.message = message
    }

    public var description: String { "\(self.location): \(self.message)" }
}

/// A one-pass reader of the little JSON a configuration file may hold.
private struct JSONScanner {
    let bytes: [UInt8]
    let path: String
    var index = 0
    var line = 1
    var lineStart = 0

    init(bytes: [UInt8], path: String) {
        self.bytes = bytes
        self.path = path
    }

    var column: Int { self.index - self.lineStart + 1 }

    func problem(_ message: String, line: Int? = nil, column: Int? = nil) -> ConfigurationProblem {
        ConfigurationProblem(location: "\(self.path):\(line ?? self.line):\(column ?? self.column)", message: message)
    }

    mutating func skipWhitespace() {
        while self.index < self.bytes.count {
            switch self.bytes[self.index] {
            case UInt8(ascii: "\n"):
                self.index += 1
                self.line += 1
                self.lineStart = self.index
            case UInt8(ascii: " "), UInt8(ascii: "\t"), UInt8(ascii: "\r"):
                self.index += 1
            default:
                return
            }
        }
    }

    mutating func expect(_ byte: UInt8, _ what: String) throws(ConfigurationProblem) {
        self.skipWhitespace()
        guard self.index < self.bytes.count, self.bytes[self.index] == byte else {
            throw self.problem("expected \(what)\(self.found)")
        }
        self.index += 1
    }

    var found: String {
        guard self.index < self.bytes.count else { return ", found the end of the file" }
        return ", found '\(String(decoding: [self.bytes[self.index]], as: UTF8.self))'"
    }

    mutating func flatObject() throws(ConfigurationProblem) -> [ConfigurationFile.Entry] {
        try self.expect(UInt8(ascii: "{"), "a JSON object ('{')")
        var entries: [ConfigurationFile.Entry] = []
        var seen: [String: Int] = [:]
        self.skipWhitespace()
        if self.index < self.bytes.count, self.bytes[self.index] == UInt8(ascii: "}") {
            self.index += 1
        } else {
            while true {
                self.skipWhitespace()
                let (line, column) = (self.line, self.column)
                guard self.index < self.bytes.count, self.bytes[self.index] == UInt8(ascii: "\"") else {
                    throw self.problem("expected a key in double quotes\(self.found)")
                }
                let key = try self.string()
                if let first = seen[key] {
                    throw self.problem("\"\(key)\" is given twice (first on line \(first))", line: line, column: column)
                }
                seen[key] = line
                try self.expect(UInt8(ascii: ":"), "':' after \"\(key)\"")
                let value = try self.value(for: key)
                entries.append(ConfigurationFile.Entry(key: key, value: value, line: line, column: column))
                self.skipWhitespace()
                guard self.index < self.bytes.count else { throw self.problem("expected ',' or '}'\(self.found)") }
                if self.bytes[self.index] == UInt8(ascii: ",") {
                    self.index += 1
                    continue
                }
                try self.expect(UInt8(ascii: "}"), "',' or '}'")
                break
            }
        }
        self.skipWhitespace()
        guard self.index == self.bytes.count else { throw self.problem("unexpected text after the object") }
        return entries
    }

    mutating func value(for key: String) throws(ConfigurationProblem) -> ConfigurationFile.Value {
        self.skipWhitespace()
        guard self.index < self.bytes.count else { throw self.problem("expected a value for \"\(key)\"\(self.found)") }
        let start = self.index
        switch self.bytes[self.index] {
        case UInt8(ascii: "\""):
            return .string(try self.string())
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            self.index += 1
            while self.index < self.bytes.count,
                Self.numberBytes.contains(self.bytes[self.index])
            {
                self.index += 1
            }
            let text = String(decoding: self.bytes[start..<self.index], as: UTF8.self)
            guard Double(text) != nil else { throw self.problem("\"\(key)\": \(text) is not a number", column: start - self.lineStart + 1) }
            return .number(text)
        case UInt8(ascii: "t"), UInt8(ascii: "f"), UInt8(ascii: "n"):
            while self.index < self.bytes.count, (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(self.bytes[self.index]) {
                self.index += 1
            }
            switch String(decoding: self.bytes[start..<self.index], as: UTF8.self) {
            case "true": return .bool(true)
            case "false": return .bool(false)
            case "null":
                throw self.problem("\"\(key)\": null is not a value; leave the key out for the default", column: start - self.lineStart + 1)
            case let word:
                throw self.problem("\"\(key)\": \(word) is not a JSON value", column: start - self.lineStart + 1)
            }
        case UInt8(ascii: "["), UInt8(ascii: "{"):
            throw self.problem("\"\(key)\" must be a string, a number or a boolean, not an array or object")
        default:
            throw self.problem("expected a value for \"\(key)\"\(self.found)")
        }
    }

    static let numberBytes = Set("0123456789+-.eE".utf8)

    /// A JSON string starting at the current quote; escapes are decoded.
    mutating func string() throws(ConfigurationProblem) -> String {
        let (line, column) = (self.line, self.column)
        self.index += 1
        var scalars = String.UnicodeScalarView()
        var raw: [UInt8] = []
        func flush() {
            scalars.append(contentsOf: String(decoding: raw, as: UTF8.self).unicodeScalars)
            raw.removeAll()
        }
        while self.index < self.bytes.count {
            let byte = self.bytes[self.index]
            self.index += 1
            switch byte {
            case UInt8(ascii: "\""):
                flush()
                return String(scalars)
            case UInt8(ascii: "\n"):
                throw self.problem("a string may not span lines", line: line, column: column)
            case UInt8(ascii: "\\"):
                guard self.index < self.bytes.count else { break }
                let escaped = self.bytes[self.index]
                self.index += 1
                let simple: [UInt8: UInt8] = [
                    UInt8(ascii: "\""): UInt8(ascii: "\""), UInt8(ascii: "\\"): UInt8(ascii: "\\"),
                    UInt8(ascii: "/"): UInt8(ascii: "/"), UInt8(ascii: "n"): UInt8(ascii: "\n"),
                    UInt8(ascii: "t"): UInt8(ascii: "\t"), UInt8(ascii: "r"): UInt8(ascii: "\r"),
                    UInt8(ascii: "b"): 8, UInt8(ascii: "f"): 12,
                ]
                if let replacement = simple[escaped] {
                    raw.append(replacement)
                } else if escaped == UInt8(ascii: "u"), self.index + 4 <= self.bytes.count,
                    let code = UInt32(String(decoding: self.bytes[self.index..<self.index + 4], as: UTF8.self), radix: 16),
                    let scalar = Unicode.Scalar(code)
                {
                    self.index += 4
                    flush()
                    scalars.append(scalar)
                } else {
                    throw self.problem("an unknown escape in a string", column: self.column - 2)
                }
            default:
                raw.append(byte)
            }
        }
        throw self.problem("a string is not closed", line: line, column: column)
    }
}
