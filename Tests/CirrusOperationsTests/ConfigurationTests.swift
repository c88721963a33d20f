import Testing

@testable import CirrusOperations

private let settings = [
    SettingDescriptor(name: "port", takesValue: true, defaultValue: "7443"),
    SettingDescriptor(name: "data-dir", takesValue: true, defaultValue: "./cirrus-data"),
    SettingDescriptor(name: "allow-tls12", takesValue: false),
    SettingDescriptor(name: "admin-secret", takesValue: true),
]

@Suite("Configuration files and environment variables")
struct ConfigurationTests {
    @Test func aFileParsesWithTheLineOfEachKey() throws {
        let file = try ConfigurationFile(
            parsing: """
                {
                  "port": 7444,
                  "data-dir": "/var/lib/cirrus \\"main\\" \\u00e9",
                  "allow-tls12": true
                }
                """, path: "c.json")
        #expect(
            file.entries == [
                .init(key: "port", value: .number("7444"), line: 2, column: 3),
                .init(key: "data-dir", value: .string("/var/lib/cirrus \"main\" é"), line: 3, column: 3),
                .init(key: "allow-tls12", value: .bool(true), line: 4, column: 3),
            ])
        #expect(try ConfigurationFile(parsing: " {} ", path: "c.json").entries.isEmpty)
    }

    @Test(arguments: [
        ("", "c.json:1:1: expected a JSON object ('{'), found the end of the file"),
        ("[1]", "c.json:1:1: expected a JSON object ('{'), found '['"),
        ("{\n  \"port\": 1,\n  \"port\": 2\n}", "c.json:3:3: \"port\" is given twice (first on line 2)"),
        ("{\n  \"port\" 1\n}", "c.json:2:10: expected ':' after \"port\", found '1'"),
        ("{\"port\": null}", "c.json:1:10: \"port\": null is not a value; leave the key out for the default"),
        ("{\"port\": {}}", "c.json:1:10: \"port\" must be a string, a number or a boolean, not an array or object"),
        ("{\"port\": 1,}", "c.json:1:12: expected a key in double quotes, found '}'"),
        ("{\"port\": 1} x", "c.json:1:13: unexpected text after the object"),
        ("{\"port\": \"abc}", "c.json:1:10: a string is not closed"),
        ("{\"port\": 1-2}", "c.json:1:10: \"port\": 1-2 is not a number"),
        ("{\n\n  port: 1}", "c.json:3:3: expected a key in double quotes, found 'p'"),
    ])
    func badFilesAreRefusedWithTheirLocation(text: String, expected: String) {
        #expect(throws: ConfigurationProblem.self) { try ConfigurationFile(parsing: text, path: "c.json") }
        do {
            _ = try ConfigurationFile(parsing: text, path: "c.json")
        } catch {
            #expect(error.description == expected)
        }
    }

    @Test func theEnvironmentOverridesTheFileAndTheCommandLineBoth() throws {
        let file = try ConfigurationFile(parsing: #"{"port": 1000, "data-dir": "/from/file", "allow-tls12": true}"#, path: "c.json")
        let layers = try LayeredConfiguration(
            settings: settings, file: ("c.json", file),
            environment: ["CIRRUSD_PORT": "2000", "CIRRUSD_CONFIG": "c.json", "HOME": "/root"],
            reservedEnvironment: ["CIRRUSD_CONFIG"])
        // The command line comes last, so ArgumentParser takes its value.
        #expect(layers.arguments == ["--port", "1000", "--data-dir", "/from/file", "--allow-tls12", "--port", "2000"])
        let effective = layers.effective(commandLine: ["--data-dir=/from/flag"])
        let byName = Dictionary(uniqueKeysWithValues: effective.map { ($0.setting.name, $0) })
        #expect(byName["port"]?.value == "2000")
        #expect(byName["port"]?.source == .environment("CIRRUSD_PORT"))
        #expect(byName["data-dir"]?.value == "/from/flag")
        #expect(byName["data-dir"]?.source == .commandLine)
        #expect(byName["allow-tls12"]?.value == "true")
        #expect(byName["allow-tls12"]?.source == .file("c.json:1:42"))
        #expect(byName["admin-secret"]?.value == nil)
        #expect(layers.effective(commandLine: ["--port", "3000"]).first?.value == "3000")
    }

    @Test func unknownKeysAndVariablesAndWrongKindsAreAllReported() throws {
        let file = try ConfigurationFile(parsing: "{\n  \"prot\": 1,\n  \"allow-tls12\": \"yes\",\n  \"port\": true\n}", path: "c.json")
        do {
            _ = try LayeredConfiguration(
                settings: settings, file: ("c.json", file),
                environment: ["CIRRUSD_DATADIR": "/x", "CIRRUSD_ALLOW_TLS12": "maybe"])
            Issue.record("accepted")
        } catch {
            #expect(
                error.problems.map(\.description) == [
                    "c.json:2:3: unknown key \"prot\" (not a cirrusd setting); did you mean \"port\"?",
                    "c.json:3:3: \"allow-tls12\" must be true or false, not yes",
                    "c.json:4:3: \"port\" must be a string or a number, not true",
                    "environment CIRRUSD_ALLOW_TLS12: 'maybe' is not true or false (or 1, 0, yes, no, on, off)",
                    "environment CIRRUSD_DATADIR: unknown variable (not a cirrusd setting); did you mean \"data-dir\"?",
                ])
        }
    }

    @Test func secretsAreMaskedAndSwitchesReadFromTheEnvironment() throws {
        let layers = try LayeredConfiguration(
            settings: settings, environment: ["CIRRUSD_ADMIN_SECRET": "hunter2", "CIRRUSD_ALLOW_TLS12": "off"])
        let effective = layers.effective(commandLine: [])
        #expect(effective.first { $0.setting.name == "admin-secret" }?.shownValue == "********")
        #expect(effective.first { $0.setting.name == "admin-secret" }?.value == "hunter2")
        #expect(effective.first { $0.setting.name == "allow-tls12" }?.value == "false")
        #expect(!layers.arguments.contains("--allow-tls12"))
        #expect(effective.first { $0.setting.name == "port" }?.shownValue == "7443")
    }

    @Test func aURLsPasswordIsMaskedButNotTheRestOfIt() {
        let mask = ConfiguredValue.maskingURLPassword(in:)
        #expect(mask("postgres://cirrus:s3cr@t@db:5432/cirrus?sslmode=require") == "postgres://cirrus:***@db:5432/cirrus?sslmode=require")
        #expect(mask("postgres://cirrus@db/cirrus") == "postgres://cirrus@db/cirrus")
        #expect(mask("postgres://db/cirrus?note=a:b@c") == "postgres://db/cirrus?note=a:b@c")
        #expect(mask("./cirrus-data") == "./cirrus-data")
        let value = ConfiguredValue(
            setting: SettingDescriptor(name: "database", takesValue: true), value: "postgres://u:pw@h/d", source: .environment("CIRRUSD_DATABASE"))
        #expect(value.shownValue == "postgres://u:***@h/d")
        #expect(value.value == "postgres://u:pw@h/d")
    }
}
