import Foundation

/// Reads bearer tokens for `ServerConfiguration.bearerTokens` from a text file: one
/// `TOKEN USER_RECORD_NAME` pair per line; blank lines and lines starting with `#` are skipped.
///
/// For example, a file holding `s3cret-token _alice` lets a client that sends that token in
/// `Hello` act as `_alice`.
public enum BearerTokenFile {
    public struct FormatError: Error, CustomStringConvertible {
        public var path: String
        public var line: Int
        public var reason: String
        public var description: String { "\(path):\(line): \(reason)" }
    }

    /// - throws: `FormatError` naming the line that is wrong, or the file system's error.
    public static func load(path: String) throws -> [String: String] {
        let text = try String(contentsOfFile: path, encoding: .utf8)
        return try parse(text, path: path)
    }

    /// - throws: `FormatError` naming the line that is wrong.
    public static func parse(_ text: String, path: String = "<tokens>") throws -> [String: String] {
        var tokens: [String: String] = [:]
        for (index, rawLine) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = rawLine.trimmingCharacters(in: .whitespaces)
            if line.isEmpty || line.hasPrefix("#") { continue }
            let parts = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
            guard parts.count == 2 else {
                throw FormatError(path: path, line: index + 1, reason: "expected 'TOKEN USER_RECORD_NAME'")
            }
            let user = String(parts[1])
            guard user.hasPrefix("_"), ClientIdentity.isValidName(String(user.dropFirst())) else {
                throw FormatError(path: path, line: index + 1, reason: "user record name must look like _alice")
            }
            guard tokens.updateValue(user, forKey: String(parts[0])) == nil else {
                throw FormatError(path: path, line: index + 1, reason: "token listed twice")
            }
        }
        return tokens
    }
}
