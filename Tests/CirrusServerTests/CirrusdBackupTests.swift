import CirrusWire
import CirrusTestSupport
import Foundation
import Synchronization
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// How a test asks for a backup of a running server.
enum BackupRoute: String, CaseIterable, Sendable, CustomTestStringConvertible {
    /// `cirrusd backup --data-dir D --to FILE`, a process of its own beside the server.
    case command
    /// `POST /backup` on the server's `--metrics-address` endpoint (`--backup-dir`).
    case endpoint

    var testDescription: String { self.rawValue }
}

@Suite("cirrusd backup and restore, the real processes", .serialized)
struct CirrusdBackupTests {
    /// Saves batches of records without pause while `cirrusd backup` runs beside them, then
    /// serves the restored copy: every save acknowledged before the backup began is there, and
    /// every batch is there whole or not at all.
    @Test(arguments: BackupRoute.allCases)
    func backupUnderWriteLoadRestoresEveryAcknowledgedRecord(route: BackupRoute) async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("cirrusd-backup-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: root) }
        let dataDirectory = root + "/data"
        var backupFile = root + "/cirrus.backup"
        let restoredDirectory = root + "/restored"
        let batchSize = 20

        var arguments = ["--data-dir", dataDirectory]
        if route == .endpoint {
            arguments += ["--metrics-address", "127.0.0.1:0", "--backup-dir", root + "/backups"]
        }
        let server = try await CirrusdProcess.launch(arguments: arguments)
        // "metrics on http://127.0.0.1:PORT/metrics"
        let backupURL = route == .endpoint
            ? URL(string: try server.nextOutputLine().replacingOccurrences(of: "metrics on ", with: "")
                .replacingOccurrences(of: "/metrics", with: "/backup")) : nil
        let acknowledged = Mutex<[Int]>([])  // batch numbers, in acknowledgement order
        let stop = Atomic<Bool>(false)
        let writer = Task {
            var client = try await OperationClient.connect(port: server.port, user: "alice")
            var batch = 0
            // Bounded: at most 2,000 batches, and it stops once the backup is done.
            while !stop.load(ordering: .relaxed), batch < 2000 {
                let records = (0..<batchSize).map { note("b\(batch)-\($0)", title: "batch \(batch) record \($0)") }
                let (saves, complete) = try await client.save(records)
                guard complete.error == nil, saves.count == batchSize else {
                    throw BackupTestFailure(message: "batch \(batch) was not saved: \(String(describing: complete.error))")
                }
                acknowledged.withLock { $0.append(batch) }
                batch += 1
            }
            await client.client.close()
        }
        // Let some batches land first, so the copy has something to prove.
        let deadline = ContinuousClock.now + .seconds(60)
        while acknowledged.withLock({ $0.count }) < 10, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        let acknowledgedBeforeBackup = acknowledged.withLock { $0 }
        #expect(acknowledgedBeforeBackup.count >= 10)
        let status: Int32
        let output: String
        switch route {
        case .command:
            (status, output) = try await runCirrusd(["backup", "--data-dir", dataDirectory, "--to", backupFile])
        case .endpoint:
            var request = URLRequest(url: try #require(backupURL))
            request.httpMethod = "POST"
            request.timeoutInterval = 120
            let (data, response) = try await loopbackURLSession.data(for: request)
            status = (response as? HTTPURLResponse)?.statusCode == 200 ? 0 : 1
            output = String(decoding: data, as: UTF8.self)
            let answer = try JSONSerialization.jsonObject(with: data) as? [String: Any]
            backupFile = try #require(answer?["file"] as? String, "\(output)")
            #expect(answer?["includesServerSecret"] as? Bool == true, "\(output)")
        }
        // The backup did not hold up the writer: saves go on being acknowledged.
        let acknowledgedAtBackupEnd = acknowledged.withLock { $0.count }
        let writing = ContinuousClock.now + .seconds(60)
        while acknowledged.withLock({ $0.count }) < acknowledgedAtBackupEnd + 3, ContinuousClock.now < writing {
            try await Task.sleep(for: .milliseconds(20))
        }
        let acknowledgedAfterBackup = acknowledged.withLock { $0.count }
        stop.store(true, ordering: .relaxed)
        try await writer.value
        server.stop()
        #expect(status == 0, "\(output)")
        if route == .command {
            #expect(output.contains("with the server secret"), "\(output)")
        }
        #expect(acknowledgedAfterBackup >= acknowledgedAtBackupEnd + 3)

        let restore = try await runCirrusd(["restore", "--from", backupFile, "--data-dir", restoredDirectory])
        #expect(restore.status == 0, "\(restore.output)")
        #expect(
            FileManager.default.contents(atPath: restoredDirectory + "/server-secret")
                == FileManager.default.contents(atPath: dataDirectory + "/server-secret"))

        let restored = try await CirrusdProcess.launch(arguments: ["--data-dir", restoredDirectory])
        defer { restored.stop() }
        var client = try await OperationClient.connect(port: restored.port, user: "alice")
        let allBatches = acknowledged.withLock { $0 }
        var presentBatches = 0
        for batch in allBatches {
            let ids = (0..<batchSize).map { recordID("b\(batch)-\($0)") }
            // Batches saved after the backup began may be missing: the fetch then reports them.
            let (outcomes, _) = try await client.fetch(ids)
            let found = outcomes.compactMap { fetchedRecord($0) }.count
            // Whole or not at all.
            #expect(found == 0 || found == batchSize, "batch \(batch): \(found) of \(batchSize) records")
            if acknowledgedBeforeBackup.contains(batch) {
                #expect(found == batchSize, "batch \(batch) was acknowledged before the backup began")
            }
            if found == batchSize { presentBatches += 1 }
        }
        #expect(presentBatches >= acknowledgedBeforeBackup.count)
        await client.client.close()
    }

    @Test func backupRefusesAnExistingFileAndADirectoryWithoutStorage() async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("cirrusd-backup-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: root) }
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        let empty = try await runCirrusd(["backup", "--data-dir", root + "/nothing", "--to", root + "/a.backup"])
        #expect(empty.status != 0)
        #expect(empty.output.contains("holds no Cirrus storage"), "\(empty.output)")
        #expect(!FileManager.default.fileExists(atPath: root + "/a.backup"))

        let server = try await CirrusdProcess.launch(arguments: ["--data-dir", root + "/data"])
        server.stop()
        _ = FileManager.default.createFile(atPath: root + "/taken", contents: Data("keep me".utf8))
        let taken = try await runCirrusd(["backup", "--data-dir", root + "/data", "--to", root + "/taken"])
        #expect(taken.status != 0)
        #expect(taken.output.contains("already exists"), "\(taken.output)")
        #expect(FileManager.default.contents(atPath: root + "/taken") == Data("keep me".utf8))
    }
}

struct BackupTestFailure: Error { var message: String }

@Suite("cirrusd --backup-dir")
struct CirrusdBackupDirectoryFlagTests {
    @Test func itNeedsTheEndpointItIsAskedThrough() async throws {
        let (status, output) = try await runCirrusd(["--backup-dir", "/tmp/never-made-\(UUID().uuidString)", "--port", "0"])
        #expect(status != 0)
        #expect(output.contains("--backup-dir needs --metrics-address"), "\(output)")
    }
}
