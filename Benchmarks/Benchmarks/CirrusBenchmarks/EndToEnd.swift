import CirrusKit
import CirrusModel
import CirrusServer
import CirrusStore
import Foundation

/// CloudKit code → CirrusKit → TLS → cirrusd → SQLite (WAL, synchronous = FULL) in a
/// temporary directory, all in this process.
final class EndToEndBench: Sendable {
    let server: CirrusServer
    let storage: SQLiteStorage
    let container: CKContainer
    let directory: String

    init(certificates: String) async throws {
        self.directory = FileManager.default.temporaryDirectory.appendingPathComponent("cirrus-bench-\(UUID().uuidString)").path
        self.storage = try SQLiteStorage(directory: self.directory)
        var configuration = ServerConfiguration(
            tls: .server(
                certificateChainPath: certificates + "/server.pem",
                privateKeyPath: certificates + "/server-key.pem",
                clientCATrustRootsPath: certificates + "/ca.pem",
                clientCertificateVerification: .required
            )
        )
        configuration.port = 0
        configuration.executor = StorageExecutor(storage: self.storage)
        self.server = CirrusServer(configuration: configuration)
        let address = try await self.server.start()
        self.container = CKContainer(
            identifier: "iCloud.bench",
            configuration: CirrusClientConfiguration(
                host: "127.0.0.1",
                port: address.port ?? 0,
                trustRootsPath: certificates + "/ca.pem",
                certificateChainPath: certificates + "/alice.pem",
                privateKeyPath: certificates + "/alice-key.pem"
            )
        )
    }

    static func records(_ count: Int, prefix: String) -> [CKRecord] {
        (0..<count).map { index in
            let record = CKRecord(recordType: "Note", recordID: CKRecord.ID(recordName: "\(prefix)-\(index)"))
            record["title"] = "Note number \(index)"
            record["count"] = index
            return record
        }
    }

    /// One operation saving `records` (new IDs each time).
    func saveBatch(_ records: [CKRecord]) async throws {
        _ = try await self.container.privateCloudDatabase.modifyRecords(saving: records, deleting: [], savePolicy: .allKeys)
    }

    /// `count` single-record saves with `inFlight` operations outstanding at a time.
    func saveSingles(_ records: [CKRecord], inFlight: Int) async throws {
        let database = self.container.privateCloudDatabase
        try await withThrowingTaskGroup(of: Void.self) { group in
            var next = 0
            for _ in 0..<min(inFlight, records.count) {
                let record = records[next]
                next += 1
                group.addTask { _ = try await database.save(record) }
            }
            while try await group.next() != nil {
                if next < records.count {
                    let record = records[next]
                    next += 1
                    group.addTask { _ = try await database.save(record) }
                }
            }
        }
    }

    func close() async {
        await self.server.shutdownGracefully()
        try? self.storage.close()
        try? FileManager.default.removeItem(atPath: self.directory)
    }
}
