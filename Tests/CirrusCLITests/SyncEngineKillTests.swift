import CirrusKit
import Foundation
import NIOConcurrencyHelpers
import Testing

/// A device process (`SyncEngineKillDevice`) sending through a `CKSyncEngine` to a real
/// `cirrusd`, killed with SIGKILL in the middle of its send and started again from its state
/// file: it sends exactly what the server had not acknowledged to it — nothing twice (a
/// record saved twice without its change tag would fail with `serverRecordChanged`), nothing
/// lost.
@Suite("CKSyncEngine survives SIGKILL", .serialized)
struct SyncEngineKillTests {
    static let count = 4_000

    /// The device's run against `server` with `stateFile`; it pauses after batch `pauseAfter`.
    static func device(_ server: CirrusdProcess, stateFile: String, pauseAfter: Int = 0) throws -> RunningCLI {
        try RunningCLI(
            arguments: ["\(server.port)", Paths.root + "/Certs", stateFile, "\(count)", "\(pauseAfter)"], directory: nil,
            executable: "SyncEngineKillDevice")
    }

    /// Record name → change tag, from "saved NAME TAG" lines; the failure lines.
    static func parse(_ output: String) -> (saved: [String: String], failed: [String]) {
        var saved: [String: String] = [:]
        var failed: [String] = []
        for line in output.split(separator: "\n") {
            let parts = line.split(separator: " ")
            if parts.first == "saved", parts.count == 3 { saved[String(parts[1])] = String(parts[2]) }
            if parts.first == "failed" { failed.append(String(line)) }
        }
        return (saved, failed)
    }

    @Test(arguments: [1, 3])
    func aDeviceKilledMidSendSendsExactlyWhatWasNotAcknowledged(pause: Int) async throws {
        let server = try CirrusdProcess()
        defer { server.stop() }
        let directory = try Paths.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let stateFile = directory + "/state.json"

        // First run: killed while its delegate handles batch `pause`'s outcome — the server
        // applied the batch and told the device, the state file still names it in flight.
        let first = try Self.device(server, stateFile: stateFile, pauseAfter: pause)
        defer { first.kill() }  // a paused device left behind by a failure would sleep for an hour
        try await waitForOutput(first, timeout: .seconds(120)) { $0.contains("paused\n") }
        first.kill()
        let firstRun = first.wait()
        #expect(firstRun.killed)
        #expect(!firstRun.stdout.contains("done"), "the device should have been killed mid-send")
        let state = try String(contentsOfFile: stateFile, encoding: .utf8)
        #expect(state.contains("inFlightSend"), "the state left behind should name the batch in flight")

        // Second run, from the state file the first one left.
        let second = try Self.device(server, stateFile: stateFile)
        defer { second.kill() }
        let secondRun = second.wait()
        #expect(secondRun.status == 0, "\(secondRun.stdout.suffix(500)) \(secondRun.stderr.suffix(500))")
        #expect(secondRun.stdout.hasSuffix("done\n"))

        let (savedFirst, failedFirst) = Self.parse(firstRun.stdout)
        let (savedSecond, failedSecond) = Self.parse(secondRun.stdout)
        #expect(failedFirst.isEmpty && failedSecond.isEmpty, "\(failedFirst.prefix(3)) \(failedSecond.prefix(3))")
        let reported = savedFirst.merging(savedSecond) { _, second in second }
        #expect(reported.count == Self.count)
        // The batch in flight was not sent again: its operation was resumed and reported the
        // same saves (same change tags) a second time; every other record was reported once.
        let replayed = savedFirst.filter { savedSecond[$0.key] != nil }
        #expect(replayed.count == 400, "batch \(pause), replayed")
        #expect(replayed.allSatisfy { savedSecond[$0.key] == $0.value })

        // The server has every record once, as last reported.
        let database = CKContainer(
            identifier: "iCloud.com.example.notes",
            configuration: CirrusClientConfiguration(
                host: "127.0.0.1", port: server.port, trustRootsPath: Paths.certificate("ca.pem"),
                certificateChainPath: Paths.certificate("alice.pem"), privateKeyPath: Paths.certificate("alice-key.pem"))
        ).privateCloudDatabase
        var stored: [String: String] = [:]
        var token: CKServerChangeToken?
        while true {
            let changes = try await database.recordZoneChanges(inZoneWith: CKRecordZone.ID(zoneName: "Kill"), since: token)
            for (id, result) in changes.modificationResultsByID {
                stored[id.recordName] = try result.get().record.recordChangeTag
            }
            token = changes.changeToken
            if !changes.moreComing { break }
        }
        #expect(stored.count == Self.count)
        #expect(stored == reported)
    }
}

/// Waits until the process's output satisfies `condition` (a hang guard, not a speed assertion).
private func waitForOutput(_ process: RunningCLI, timeout: Duration, _ condition: (String) -> Bool) async throws {
    let clock = ContinuousClock()
    let deadline = clock.now + timeout
    while !condition(process.outputSoFar) {
        guard clock.now < deadline, process.process.isRunning else {
            Issue.record("the device ended or timed out before the expected output: \(process.outputSoFar.suffix(300))")
            throw CancellationError()
        }
        try await Task.sleep(for: .milliseconds(5))
    }
}
