import CirrusTestSupport
import CirrusWire
import Foundation
import Testing

/// This process's environment without any `CIRRUSD_*` or `PG*` variable, plus `extra`.
private func environment(_ extra: [String: String] = [:]) -> [String: String] {
    ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("CIRRUSD_") && !$0.key.hasPrefix("PG") }
        .merging(extra) { _, new in new }
}

/// `cirrusd --database`: real `cirrusd` processes on one PostgreSQL database.
@Suite("cirrusd on PostgreSQL, the real process", .serialized)
struct CirrusdPostgresTests {
    @Test func twoNodesOnOneDatabaseServeOneDataSetAndOneNodeSurvivesTheOthersSIGKILL() async throws {
        let url = try TemporaryPostgres.shared().createDatabase()
        let shared = FileManager.default.temporaryDirectory.appendingPathComponent("cirrusd-pg-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: shared) }
        let arguments = ["--data-dir", shared]
        let nodeA = try await CirrusdProcess.launch(arguments: arguments, environment: environment(["CIRRUSD_DATABASE": url]))
        let nodeB = try await CirrusdProcess.launch(arguments: arguments, environment: environment(["CIRRUSD_DATABASE": url]))
        defer { nodeB.stop() }
        let records = (0..<20).map { note("pg\($0)", title: "node A \($0)") }
        var onA = try await OperationClient.connect(port: nodeA.port, user: "alice")
        let (saves, complete) = try await onA.save(records)
        #expect(complete.error == nil && saves.count == 20)
        await nodeA.killed()
        await onA.client.close()

        var onB = try await OperationClient.connect(port: nodeB.port, user: "alice")
        let (fetched, fetchComplete) = try await onB.fetch(records.compactMap(\.recordID))
        #expect(fetchComplete.error == nil)
        #expect(fetched.compactMap { fetchedRecord($0)?.fields.first?.value?.kind } == records.map { $0.fields[0].value?.kind })
        await onB.client.close()

        // Node A comes back and sees what it acknowledged before it died.
        let again = try await CirrusdProcess.launch(arguments: arguments, environment: environment(["CIRRUSD_DATABASE": url]))
        defer { again.stop() }
        var onAgain = try await OperationClient.connect(port: again.port, user: "alice")
        let (refetched, _) = try await onAgain.fetch(records.compactMap(\.recordID))
        #expect(refetched.compactMap { fetchedRecord($0) }.count == 20)
        await onAgain.client.close()
    }

    @Test func thePasswordNeverGoesOnTheCommandLineNorIntoTheOutput() async throws {
        let server = try TemporaryPostgres.shared()
        let url = try server.createDatabase()
        let password = TemporaryPostgres.password
        let bare = url.replacingOccurrences(of: ":\(password)@", with: "@")
        #expect(bare != url)

        let refused = try await runCirrusd(["--database", url, "--port", "0"], environment: environment())
        #expect(refused.status != 0)
        #expect(refused.output.contains("every user of this machine can read"), "\(refused.output)")
        #expect(!refused.output.contains(password), "\(refused.output)")

        let printed = try await runCirrusd(["--print-config"], environment: environment(["CIRRUSD_DATABASE": url]))
        #expect(printed.status == 0, "\(printed.output)")
        #expect(printed.output.contains("\(TemporaryPostgres.user):***@"), "\(printed.output)")
        #expect(!printed.output.contains(password), "\(printed.output)")

        let malformed = try await runCirrusd(["--database", "mysql://db/x", "--port", "0"], environment: environment())
        #expect(malformed.status != 0)
        #expect(malformed.output.contains("postgres://"), "\(malformed.output)")

        // From a password file, or PGPASSWORD, with the URL on the command line.
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cirrusd-pw-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let passwordFile = directory + "/password"
        try "\(password)\n".write(toFile: passwordFile, atomically: true, encoding: .utf8)
        let log = directory + "/cirrusd.log"
        let node = try await CirrusdProcess.launch(
            arguments: ["--database", bare, "--database-password-file", passwordFile, "--data-dir", directory],
            standardErrorPath: log, environment: environment())
        var client = try await OperationClient.connect(port: node.port, user: "alice")
        let (saves, _) = try await client.save([note("from-file", title: "t")])
        #expect(saves.count == 1)
        await client.client.close()
        node.stop()
        let logged = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        #expect(logged.contains("PostgreSQL at"), "\(logged)")
        #expect(!logged.contains(password), "the log holds the password")

        let added = try await runCirrusd(
            ["users", "add", "erin", "--database", bare], environment: environment(["PGPASSWORD": password]))
        #expect(added.status == 0, "\(added.output)")
        let listed = try await runCirrusd(["users", "list"], environment: environment(["CIRRUSD_DATABASE": url]))
        #expect(listed.output.contains("_erin") && listed.output.contains("_alice"), "\(listed.output)")
        let wrong = try await runCirrusd(
            ["users", "list", "--database", bare], environment: environment(["PGPASSWORD": "not-the-password"]))
        #expect(wrong.status != 0)
        #expect(!wrong.output.contains(password))
    }

    @Test func badDatabaseSettingsAreAClearErrorBeforeAnythingStarts() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cirrusd-pgbad-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let bare = "postgres://cirrus@127.0.0.1:1/cirrus"
        let cases: [([String], String)] = [
            (["--node-id", ""], "--node-id must be 1 to 128 bytes"),
            (["--database-connections", "1"], "--database-connections must be at least 2"),
            (["--database-password-file", directory + "/pw"], "--database-password-file needs --database"),
            (["--database", bare, "--database-password-file", directory + "/none"], "cannot read"),
            (
                ["--database", bare, "--backup-dir", directory, "--metrics-address", "127.0.0.1:0"],
                "back a PostgreSQL database up with pg_dump"
            ),
        ]
        for (arguments, message) in cases {
            let run = try await runCirrusd(arguments + ["--port", "0", "--data-dir", directory], environment: environment())
            #expect(run.status != 0, "\(arguments): \(run.output)")
            #expect(run.output.contains(message), "\(arguments): \(run.output)")
        }
    }
}
