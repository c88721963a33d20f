import Foundation
import Testing

/// This process's environment without any `CIRRUSD_*` variable, plus `extra`.
private func environment(_ extra: [String: String] = [:]) -> [String: String] {
    ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("CIRRUSD_") }.merging(extra) { _, new in new }
}

@Suite("cirrusd configuration files and CIRRUSD_* variables, the real process", .serialized)
struct CirrusdConfigurationTests {
    let root = FileManager.default.temporaryDirectory.appendingPathComponent("cirrusd-config-\(UUID().uuidString)").path

    init() throws {
        try FileManager.default.createDirectory(atPath: self.root, withIntermediateDirectories: true)
    }

    func write(_ text: String, to name: String) -> String {
        let path = self.root + "/" + name
        _ = FileManager.default.createFile(atPath: path, contents: Data(text.utf8))
        return path
    }

    @Test func checkConfigNamesTheLineOfAnUnknownKeyAndOfABadValue() async throws {
        defer { try? FileManager.default.removeItem(atPath: self.root) }
        let good = self.write(#"{"port": 7444, "allow-tls12": true, "keepalive-interval": "45s"}"#, to: "good.json")
        let ok = try await runCirrusd(["check-config", "--config", good], environment: environment())
        #expect(ok.status == 0, "\(ok.output)")
        #expect(ok.output.contains("configuration is valid: 3 settings from the file"), "\(ok.output)")

        let bad = self.write("{\n  \"port\": 7444,\n  \"max-stream\": 4,\n  \"keepalive-interval\": \"soon\"\n}\n", to: "bad.json")
        let refused = try await runCirrusd(["check-config", "--config", bad], environment: environment())
        #expect(refused.status == 78)
        #expect(refused.output.contains("\(bad):3:3: unknown key \"max-stream\""), "\(refused.output)")
        #expect(refused.output.contains("did you mean \"max-streams\"?"), "\(refused.output)")
        // The bad value is found once the unknown key is gone.
        let fixedKey = self.write("{\n  \"port\": 7444,\n  \"keepalive-interval\": \"soon\"\n}\n", to: "value.json")
        let badValue = try await runCirrusd(["check-config", "--config", fixedKey], environment: environment())
        #expect(badValue.status == 78)
        #expect(badValue.output.contains("\(fixedKey):3:3: "), "\(badValue.output)")
        #expect(badValue.output.contains("soon"), "\(badValue.output)")

        let variable = try await runCirrusd(["check-config"], environment: environment(["CIRRUSD_MAX_STREAMS": "many"]))
        #expect(variable.status == 78)
        #expect(variable.output.contains("environment CIRRUSD_MAX_STREAMS: "), "\(variable.output)")

        let missing = try await runCirrusd(["check-config", "--config", self.root + "/none.json"], environment: environment())
        #expect(missing.status == 78)
        #expect(missing.output.contains("none.json: cannot read the configuration file"), "\(missing.output)")

        // The server itself refuses to start on the same file.
        let server = try await runCirrusd(["--config", bad, "--port", "0"], environment: environment())
        #expect(server.status == 78)
        #expect(server.output.contains("unknown key \"max-stream\""), "\(server.output)")
    }

    @Test func flagsOverrideTheEnvironmentWhichOverridesTheFile() async throws {
        defer { try? FileManager.default.removeItem(atPath: self.root) }
        let file = self.write(
            #"{"port": 7001, "max-streams": 7, "data-dir": "/from/file", "log-level": "debug"}"#, to: "c.json")
        let printed = try await runCirrusd(
            ["--print-config", "--max-streams", "9"],
            environment: environment(["CIRRUSD_CONFIG": file, "CIRRUSD_PORT": "7002", "CIRRUSD_DATA_DIR": "/from/env"]))
        #expect(printed.status == 0, "\(printed.output)")
        #expect(printed.output.contains(#""port": 7002"#), "\(printed.output)")
        #expect(printed.output.contains(#""max-streams": 9"#))
        #expect(printed.output.contains(#""data-dir": "/from/env""#))
        #expect(printed.output.contains(#""log-level": "debug""#))
        #expect(printed.output.contains(#""host": "127.0.0.1""#))
        #expect(printed.output.contains("# port: environment CIRRUSD_PORT"))
        #expect(printed.output.contains("# max-streams: command line"))
        #expect(printed.output.contains("# log-level: \(file):1:"))

        // And a real server takes the same values: the file's metrics address, the flag's port.
        let config = self.write(#"{"metrics-address": "127.0.0.1:0", "port": 1}"#, to: "server.json")
        let server = try await CirrusdProcess.launch(arguments: ["--config", config, "--port", "0"])
        defer { server.stop() }
        #expect(server.port != 1)
        #expect(try server.nextOutputLine().hasPrefix("metrics on http://127.0.0.1:"))
    }
}

@Suite("cirrusd --log-format json, the real process", .serialized)
struct CirrusdLogFormatTests {
    @Test func everyLineIsAJSONObjectAndConnectionLinesNameTheConnectionPeerAndUser() async throws {
        let log = FileManager.default.temporaryDirectory.appendingPathComponent("cirrusd-log-\(UUID().uuidString).jsonl").path
        defer { try? FileManager.default.removeItem(atPath: log) }
        let server = try await CirrusdProcess.launch(
            arguments: ["--log-format", "json", "--log-level", "debug"], standardErrorPath: log)
        let client = try await TestClient.connect(port: server.port, user: "alice")
        _ = try await client.handshake()
        await client.close()
        #expect(server.stop() == 0)

        let lines = try String(contentsOfFile: log, encoding: .utf8).split(separator: "\n").map(String.init)
        #expect(!lines.isEmpty)
        var objects: [[String: Any]] = []
        for line in lines {
            let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
            #expect(object != nil, "not a JSON object: \(line)")
            if let object { objects.append(object) }
        }
        #expect(objects.allSatisfy { $0["time"] is String && $0["level"] is String && $0["message"] is String })
        #expect(objects.contains { $0["message"] as? String == "stopped" })
        let authenticated = objects.first { ($0["message"] as? String)?.contains("authenticated as _alice") == true }
        #expect(authenticated?["user"] as? String == "_alice", "\(lines)")
        #expect(authenticated?["connection"] as? String == "1")
        #expect((authenticated?["peer"] as? String)?.hasPrefix("127.0.0.1:") == true)
    }
}
