import ArgumentParser
import CirrusOperations
import Foundation

extension Cirrusd {
    /// The server's flags that a configuration file or `CIRRUSD_*` variable may not set.
    static let notConfigurable: Set<String> = ["help", "config", "print-config"]
    /// The variable naming the configuration file when `--config` is not given.
    static let configEnvironmentName = LayeredConfiguration.environmentPrefix + "CONFIG"

    /// Every option and switch of the server, as ArgumentParser describes the command (what
    /// `--experimental-dump-help` prints), so the configuration keys are the flags themselves.
    static let settings: [SettingDescriptor] = {
        struct Dump: Decodable {
            struct Command: Decodable { var arguments: [Argument]? }
            struct Argument: Decodable {
                struct Name: Decodable {
                    var kind: String
                    var name: String
                }
                var kind: String
                var names: [Name]?
                var defaultValue: String?
            }
            var command: Command
        }
        let text: String
        do {
            _ = try Cirrusd.parseAsRoot(["--experimental-dump-help"])
            return []
        } catch {
            text = Cirrusd.fullMessage(for: error)
        }
        guard let dump = try? JSONDecoder().decode(Dump.self, from: Data(text.utf8)) else { return [] }
        return (dump.command.arguments ?? []).compactMap { argument in
            guard argument.kind == "option" || argument.kind == "flag",
                let name = argument.names?.first(where: { $0.kind == "long" })?.name, !Self.notConfigurable.contains(name)
            else { return nil }
            return SettingDescriptor(name: name, takesValue: argument.kind == "option", defaultValue: argument.defaultValue)
        }
    }()

    /// The configuration file (`--config`, else `CIRRUSD_CONFIG`) and the `CIRRUSD_*`
    /// variables, checked key by key and value by value.
    ///
    /// - throws: ``ConfigurationProblems`` with every problem found and its location.
    static func configurationLayers(commandLine: [String], environment: [String: String]) throws(ConfigurationProblems)
        -> LayeredConfiguration
    {
        var path = environment[Self.configEnvironmentName]
        for (index, argument) in commandLine.enumerated() {
            if argument == "--config", index + 1 < commandLine.count {
                path = commandLine[index + 1]
            } else if argument.hasPrefix("--config=") {
                path = String(argument.dropFirst("--config=".count))
            }
        }
        var file: (path: String, contents: ConfigurationFile)?
        if let path {
            guard let data = FileManager.default.contents(atPath: path) else {
                throw ConfigurationProblems(problems: [ConfigurationProblem(location: path, message: "cannot read the configuration file")])
            }
            do {
                file = (path, try ConfigurationFile(parsing: String(decoding: data, as: UTF8.self), path: path))
            } catch {
                throw ConfigurationProblems(problems: [error])
            }
        }
        let layers = try LayeredConfiguration(
            settings: Self.settings, file: file, environment: environment, reservedEnvironment: [Self.configEnvironmentName])
        // Each value alone through the same parser as the flags: a bad one is named at its location.
        var problems: [ConfigurationProblem] = []
        for value in layers.values {
            do {
                _ = try Cirrusd.parseAsRoot(LayeredConfiguration.arguments(for: value))
            } catch {
                problems.append(ConfigurationProblem(location: value.source.description, message: Cirrusd.message(for: error)))
            }
        }
        guard problems.isEmpty else { throw ConfigurationProblems(problems: problems) }
        return layers
    }

    /// The effective configuration as a configuration file (JSON, secrets masked), and where
    /// each value that is not a default came from, one `# NAME: SOURCE` line each.
    static func renderConfiguration(_ values: [ConfiguredValue]) -> (json: String, sources: String) {
        var lines: [String] = []
        var sources: [String] = []
        for value in values {
            guard let shown = value.shownValue else { continue }
            let json: String
            if !value.setting.takesValue {
                json = shown
            } else if Int(shown) != nil {
                json = shown
            } else {
                json = JSONLogHandler.quoted(shown)
            }
            lines.append("  \(JSONLogHandler.quoted(value.setting.name)): \(json)")
            if value.source != .defaultValue {
                sources.append("\(value.setting.name): \(value.source)")
            }
        }
        return ("{\n" + lines.joined(separator: ",\n") + "\n}\n", sources.map { "# \($0)\n" }.joined())
    }
}

/// `cirrusd check-config`: the configuration file and environment checked without starting.
struct CheckConfig: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check-config",
        abstract: "Check a configuration file and the CIRRUSD_* environment variables without starting the server.",
        usage: "cirrusd check-config [--config <file>]",
        discussion: "Every unknown key or bad value is reported with its file, line and column or its variable; the exit status is 78 when any is found."
    )

    @Option(help: "The configuration file (JSON). Default: $CIRRUSD_CONFIG.")
    var config: String?

    func run() throws {
        let commandLine = self.config.map { ["--config", $0] } ?? []
        do {
            let layers = try Cirrusd.configurationLayers(commandLine: commandLine, environment: ProcessInfo.processInfo.environment)
            // Values that are fine alone may still clash (a check across flags).
            do {
                _ = try Cirrusd.parseAsRoot(layers.arguments + commandLine)
            } catch {
                throw ConfigurationProblems(problems: [ConfigurationProblem(location: "configuration", message: Cirrusd.message(for: error))])
            }
            let fromFile = layers.values.filter { if case .file = $0.source { true } else { false } }.count
            print("configuration is valid: \(fromFile) settings from the file, \(layers.values.count - fromFile) from the environment")
        } catch let problems as ConfigurationProblems {
            Cirrusd.report(problems)
            throw ExitCode(Cirrusd.configurationErrorStatus)
        }
    }
}

extension Cirrusd {
    /// `EX_CONFIG` (sysexits.h): the configuration is wrong.
    static let configurationErrorStatus: Int32 = 78

    static func report(_ problems: ConfigurationProblems) {
        for problem in problems.problems {
            FileHandle.standardError.write(Data("error: \(problem)\n".utf8))
        }
    }
}
