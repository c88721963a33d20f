import Foundation
public import Logging

/// A swift-log handler writing one JSON object a line: `time`, `level`, `label`, `message`,
/// the logger's and the call's metadata (such as `connection`, `peer` and `user` on a
/// connection's lines) and `source`, for log collectors that index fields.
///
/// For example:
/// ```swift
/// LoggingSystem.bootstrap { label in JSONLogHandler(label: label) }
/// ```
/// writes
/// `{"time":"2026-11-24T03:00:00.000Z","level":"info","label":"cirrusd","message":"…","connection":"12","user":"_alice"}`.
public struct JSONLogHandler: LogHandler {
    public var metadata: Logger.Metadata = [:]
    public var logLevel: Logger.Level = .info
    public var metadataProvider: Logger.MetadataProvider?
    private let label: String
    private let write: @Sendable (String) -> Void

    /// - parameter write: receives each line, newline included; standard error by default.
    public init(
        label: String, metadataProvider: Logger.MetadataProvider? = nil,
        write: @escaping @Sendable (String) -> Void = { line in FileHandle.standardError.write(Data(line.utf8)) }
    ) {
        self.label = label
        self.metadataProvider = metadataProvider
        self.write = write
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { self.metadata[key] }
        set { self.metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var merged = self.metadata
        if let provided = self.metadataProvider?.get() {
            merged.merge(provided) { _, new in new }
        }
        if let extra = event.metadata {
            merged.merge(extra) { _, new in new }
        }
        var line = "{\"time\":\(Self.quoted(Date().ISO8601Format(Date.ISO8601FormatStyle(includingFractionalSeconds: true))))"
        line += ",\"level\":\(Self.quoted(event.level.rawValue)),\"label\":\(Self.quoted(self.label))"
        line += ",\"message\":\(Self.quoted(event.message.description))"
        for key in merged.keys.sorted() where !Self.reserved.contains(key) {
            if let value = merged[key] {
                line += ",\(Self.quoted(key)):\(Self.json(value))"
            }
        }
        line += ",\"source\":\(Self.quoted("\(event.source) \(event.file):\(event.line)"))}\n"
        self.write(line)
    }

    /// Keys the handler writes itself; metadata under these names is left out.
    static let reserved: Set<String> = ["time", "level", "label", "message", "source"]

    static func json(_ value: Logger.Metadata.Value) -> String {
        switch value {
        case .string(let text): Self.quoted(text)
        case .stringConvertible(let convertible): Self.quoted(convertible.description)
        case .array(let values): "[" + values.map(Self.json).joined(separator: ",") + "]"
        case .dictionary(let entries):
            "{" + entries.keys.sorted().compactMap { key in entries[key].map { "\(Self.quoted(key)):\(Self.json($0))" } }
                .joined(separator: ",") + "}"
        }
    }

    /// `text` as a JSON string literal, quotes included (also used by `cirrusd --print-config`).
    public static func quoted(_ text: String) -> String {
        var result = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": result += "\\\""
            case "\\": result += "\\\\"
            case "\n": result += "\\n"
            case "\r": result += "\\r"
            case "\t": result += "\\t"
            case _ where scalar.value < 0x20: result += String(format: "\\u%04x", scalar.value)
            default: result.unicodeScalars.append(scalar)
            }
        }
        return result + "\""
    }
}
