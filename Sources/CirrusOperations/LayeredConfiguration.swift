import Foundation

/// One setting a command accepts: a flag name without the dashes, and whether it takes a
/// value (`--port 7443`) or is a switch (`--allow-tls12`).
public struct SettingDescriptor: Sendable, Equatable {
    public var name: String
    public var takesValue: Bool
    /// The default as `--help` shows it; nil when there is none.
    public var defaultValue: String?

    public init(name: String, takesValue: Bool, defaultValue: String? = nil) {
        self.name = name
        self.takesValue = takesValue
        self.defaultValue = defaultValue
    }

    /// Whether the value is secret material that `--print-config` must not show: a setting
    /// whose name says secret, password, passphrase or API key (a path to a file of secrets,
    /// such as `tokens` or `key`, is not itself secret).
    public var isSecret: Bool {
        ["secret", "password", "passphrase", "api-key"].contains { self.name.contains($0) }
    }

    /// The environment variable that sets it: `CIRRUSD_` and the name in upper case with
    /// underscores (`data-dir` → `CIRRUSD_DATA_DIR`).
    public var environmentName: String {
        LayeredConfiguration.environmentPrefix + self.name.uppercased().replacingOccurrences(of: "-", with: "_")
    }
}

/// Where an effective value came from.
public enum SettingSource: Sendable, Equatable, CustomStringConvertible {
    case defaultValue
    /// `FILE:LINE:COLUMN`.
    case file(String)
    /// The variable's name.
    case environment(String)
    case commandLine

    public var description: String {
        switch self {
        case .defaultValue: "default"
        case .file(let location): location
        case .environment(let name): "environment \(name)"
        case .commandLine: "command line"
        }
    }
}

/// One configuration value and where it came from.
public struct ConfiguredValue: Sendable, Equatable {
    public var setting: SettingDescriptor
    /// The value; "true" or "false" for a switch; nil when unset and without a default.
    public var value: String?
    public var source: SettingSource

    /// The value as `--print-config` shows it: secrets masked, and so is the password of a URL
    /// (`postgres://cirrus:***@db/cirrus`).
    public var shownValue: String? {
        guard let value = self.value else { return nil }
        if self.setting.isSecret && !value.isEmpty { return "********" }
        return Self.maskingURLPassword(in: value)
    }

    /// `value` with the password of a `SCHEME://USER:PASSWORD@…` URL replaced by `***`.
    public static func maskingURLPassword(in value: String) -> String {
        guard let scheme = value.range(of: "://") else { return value }
        let authority = value[scheme.upperBound...].prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        guard let at = authority.lastIndex(of: "@"), let colon = authority[..<at].firstIndex(of: ":") else { return value }
        return value[..<value.index(after: colon)] + "***" + value[at...]
    }
}

/// Settings from a configuration file and from `CIRRUSD_*` environment variables, beneath
/// the command line: flags win over the environment, the environment over the file, the
/// file over the defaults.
///
/// For example:
/// ```swift
/// let layers = try LayeredConfiguration(settings: settings, file: file, environment: ProcessInfo.processInfo.environment)
/// let arguments = layers.arguments + commandLine  // the command line comes last, and wins
/// ```
public struct LayeredConfiguration: Sendable {
    public static let environmentPrefix = "CIRRUSD_"

    /// Values from the file, then from the environment, each with its location.
    public private(set) var values: [ConfiguredValue] = []
    public let settings: [SettingDescriptor]

    /// - parameter reservedEnvironment: `CIRRUSD_*` variables that are not settings (such as
    ///   `CIRRUSD_CONFIG`, the file's path) and so are not refused as unknown.
    /// - throws: ``ConfigurationProblems`` listing every unknown key or variable and every
    ///   value of the wrong kind, each with its location.
    public init(
        settings: [SettingDescriptor], file: (path: String, contents: ConfigurationFile)? = nil,
        environment: [String: String] = [:], reservedEnvironment: Set<String> = []
    ) throws(ConfigurationProblems) {
        self.settings = settings
        let byName = Dictionary(settings.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        var problems: [ConfigurationProblem] = []
        if let (path, contents) = file {
            for entry in contents.entries {
                let location = "\(path):\(entry.line):\(entry.column)"
                guard let setting = byName[entry.key] else {
                    problems.append(ConfigurationProblem(location: location, message: Self.unknown("key \"\(entry.key)\"", entry.key, in: settings)))
                    continue
                }
                switch (setting.takesValue, entry.value) {
                case (true, .bool), (false, .string), (false, .number):
                    let expected = setting.takesValue ? "a string or a number" : "true or false"
                    problems.append(ConfigurationProblem(location: location, message: "\"\(entry.key)\" must be \(expected), not \(entry.value)"))
                case (_, let value):
                    self.values.append(ConfiguredValue(setting: setting, value: value.description, source: .file(location)))
                }
            }
        }
        let byVariable = Dictionary(settings.map { ($0.environmentName, $0) }, uniquingKeysWith: { first, _ in first })
        for (name, value) in environment.sorted(by: { $0.key < $1.key })
        where name.hasPrefix(Self.environmentPrefix) && !reservedEnvironment.contains(name) {
            guard let setting = byVariable[name] else {
                let key = name.dropFirst(Self.environmentPrefix.count).lowercased().replacingOccurrences(of: "_", with: "-")
                problems.append(ConfigurationProblem(location: "environment \(name)", message: Self.unknown("variable", key, in: settings)))
                continue
            }
            if setting.takesValue {
                self.values.append(ConfiguredValue(setting: setting, value: value, source: .environment(name)))
            } else if let flag = Self.boolean(value) {
                self.values.append(ConfiguredValue(setting: setting, value: flag ? "true" : "false", source: .environment(name)))
            } else {
                problems.append(ConfigurationProblem(location: "environment \(name)", message: "'\(value)' is not true or false (or 1, 0, yes, no, on, off)"))
            }
        }
        guard problems.isEmpty else { throw ConfigurationProblems(problems: problems) }
    }

    /// The file's and environment's values as command-line arguments, file first; put the
    /// real command line after them so that it wins (a later option replaces an earlier one).
    public var arguments: [String] {
        self.values.flatMap { Self.arguments(for: $0) }
    }

    /// The arguments that set `value`: `--name VALUE`, `--name` for a switch that is on,
    /// nothing for one that is off.
    public static func arguments(for value: ConfiguredValue) -> [String] {
        guard let text = value.value else { return [] }
        if value.setting.takesValue { return ["--\(value.setting.name)", text] }
        return text == "true" ? ["--\(value.setting.name)"] : []
    }

    /// Every setting's effective value with its source, given the real command line.
    public func effective(commandLine: [String]) -> [ConfiguredValue] {
        self.settings.map { setting in
            var result = ConfiguredValue(setting: setting, value: setting.takesValue ? setting.defaultValue : "false", source: .defaultValue)
            for value in self.values where value.setting.name == setting.name {
                result = value
            }
            var index = 0
            while index < commandLine.count {
                let argument = commandLine[index]
                if argument == "--\(setting.name)" {
                    if setting.takesValue, index + 1 < commandLine.count {
                        result = ConfiguredValue(setting: setting, value: commandLine[index + 1], source: .commandLine)
                        index += 1
                    } else if !setting.takesValue {
                        result = ConfiguredValue(setting: setting, value: "true", source: .commandLine)
                    }
                } else if setting.takesValue, argument.hasPrefix("--\(setting.name)=") {
                    result = ConfiguredValue(
                        setting: setting, value: String(argument.dropFirst(setting.name.count + 3)), source: .commandLine)
                }
                index += 1
            }
            return result
        }
    }

    static func boolean(_ text: String) -> Bool? {
        switch text.lowercased() {
        case "true", "1", "yes", "on": true
        case "false", "0", "no", "off": false
        default: nil
        }
    }

    /// "unknown key "prot"; did you mean "port"?"
    private static func unknown(_ what: String, _ key: String, in settings: [SettingDescriptor]) -> String {
        let closest = settings.min { Self.distance($0.name, key) < Self.distance($1.name, key) }
        if let closest, Self.distance(closest.name, key) <= 2 {
            return "unknown \(what) (not a cirrusd setting); did you mean \"\(closest.name)\"?"
        }
        return "unknown \(what) (not a cirrusd setting)"
    }

    /// Levenshtein distance, for the suggestion.
    private static func distance(_ a: String, _ b: String) -> Int {
        let a = Array(a), b = Array(b)
        guard !a.isEmpty else { return b.count }
        var previous = Array(0...b.count)
        for i in 1...a.count {
            var current = [i] + Array(repeating: 0, count: b.count)
            for j in stride(from: 1, through: b.count, by: 1) {
                current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
            }
            previous = current
        }
        return previous[b.count]
    }
}

/// Everything wrong with a configuration, each with its location.
public struct ConfigurationProblems: Error, Sendable, Equatable, CustomStringConvertible {
    public var problems: [ConfigurationProblem]

    public init(problems: [ConfigurationProblem]) {
        self.problems = problems
    }

    public var description: String {
        self.problems.map(\.description).joined(separator: "\n")
    }
}
