import CirrusKit
import CirrusPostgres
import CirrusTestSupport
import Foundation
import NIOConcurrencyHelpers
import Testing

/// `cirrusd --database url` (this build) on the shared `dataDirectory`, as node `nodeID`.
private func launchNode(database url: String, dataDirectory: String, nodeID: String) async throws -> CirrusdChild {
    try await CirrusdChild.launch(
        [
            "--port", "0", "--data-dir", dataDirectory, "--node-id", nodeID, "--handshake-timeout", "60s",
            "--database-connections", "6",
        ],
        environment: ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("CIRRUSD_") }
            .merging(["CIRRUSD_DATABASE": url]) { _, new in new })
}

/// Real `cirrusd` nodes on one PostgreSQL database: the node running a long-lived operation is
/// SIGKILLed in its middle; another node takes it over from the journal, and the client, failing
/// over to that node, gets every callback once, in order.
@Suite("cirrusd nodes on PostgreSQL: a node killed mid-operation", .serialized, .timeLimit(.minutes(15)))
struct ClusterFailoverTests {
    @Test func aTenThousandRecordLongLivedModifySurvivesItsNodesSIGKILL() async throws {
        let url = try TemporaryPostgres.shared().createDatabase()
        let shared = FileManager.default.temporaryDirectory.appendingPathComponent("cirrus-nodes-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: shared) }
        let nodeA = try await launchNode(database: url, dataDirectory: shared, nodeID: "node-a")
        defer { nodeA.kill() }
        let nodeB = try await launchNode(database: url, dataDirectory: shared, nodeID: "node-b")
        defer { nodeB.stop() }

        var configuration = TestCertificates.client(port: nodeA.port, user: "alice")
        configuration.failoverServers = [CirrusClientConfiguration.Server(host: "127.0.0.1", port: nodeB.port)]
        let database = CKContainer(identifier: "iCloud.com.example.notes", configuration: configuration).privateCloudDatabase
        let records = LongLivedEndToEndTests.notes(10_000, prefix: "kill-")
        let operation = CKModifyRecordsOperation(recordsToSave: records, recordIDsToDelete: nil)
        operation.configuration.isLongLived = true
        let saved = NIOLockedValueBox<[String]>([])
        let result = NIOLockedValueBox<Result<Void, any Error>?>(nil)
        operation.perRecordSaveBlock = { id, _ in saved.withLockedValue { $0.append(id.recordName) } }
        operation.modifyRecordsResultBlock = { outcome in result.withLockedValue { $0 = outcome } }
        database.add(operation)

        // Mid-way: node A has reported some of the records, not all.
        try await eventually(timeout: .seconds(600), "node A reported a first part") {
            saved.withLockedValue { $0.count } >= 500
        }
        let before = saved.withLockedValue { $0.count }
        nodeA.kill()
        #expect(before < records.count, "node A died before the operation's end (\(before) reported)")

        await finished(operation)
        #expect(throws: Never.self) { try result.withLockedValue { $0 }?.get() }
        let names = saved.withLockedValue { $0 }
        #expect(names.count == records.count, "\(names.count) callbacks")
        #expect(names == records.map(\.recordID.recordName), "every record once, in order")

        // The store holds every record once.
        let storage = try await PostgresStorage(url: PostgresURL(url), maximumConnections: 2)
        #expect(try await storage.rowCount(of: "records") == records.count)
        await storage.close()
    }
}
