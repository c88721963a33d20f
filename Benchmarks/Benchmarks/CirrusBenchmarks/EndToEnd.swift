import CirrusKit
import CirrusModel
import CirrusServer
import CirrusStore
import Foundation
import NIOCore
import NIOPosix

/// CloudKit code → CirrusKit → TLS → cirrusd → SQLite (WAL, synchronous = FULL) in a
/// temporary directory, all in this process. The server runs on an event-loop group of its
/// own, so it never shares a loop with the clients (which use the singleton group).
final class EndToEndBench: Sendable {
    let server: CirrusServer
    let serverGroup: MultiThreadedEventLoopGroup
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
        self.serverGroup = MultiThreadedEventLoopGroup(numberOfThreads: System.coreCount)
        self.server = CirrusServer(configuration: configuration, group: self.serverGroup)
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

    /// Saves `count` notes in batches of 400 (names q-0…); `group` = index % 1,000, so each
    /// group value matches count / 1,000 notes.
    func seedForQueries(count: Int) async throws {
        let records = (0..<count).map { index -> CKRecord in
            let record = CKRecord(recordType: "Note", recordID: CKRecord.ID(recordName: "q-\(index)"))
            record["group"] = "g\(index % 1_000)"
            record["rank"] = index
            return record
        }
        for start in stride(from: 0, to: count, by: 400) {
            try await self.saveBatch(Array(records[start..<min(start + 400, count)]))
        }
    }

    /// A query for one group value; returns how many records matched.
    func queryGroup(_ group: Int) async throws -> Int {
        let query = CKQuery(recordType: "Note", predicate: CKPredicate(format: "group == %@", "g\(group)"))
        return try await self.container.privateCloudDatabase.records(matching: query).matchResults.count
    }

    /// Fetches every change of the default zone from the beginning; returns how many records came.
    func fetchAllChanges() async throws -> Int {
        let database = self.container.privateCloudDatabase
        var token: CKServerChangeToken?
        var count = 0
        while true {
            let batch = try await database.recordZoneChanges(inZoneWith: .default, since: token)
            count += batch.modificationResultsByID.count
            token = batch.changeToken
            if !batch.moreComing { return count }
        }
    }

    /// A second device of the same user, on its own connection.
    func secondDevice() -> CKContainer {
        CKContainer(identifier: "iCloud.bench", configuration: self.container.clientConfiguration)
    }

    func close() async {
        await self.server.shutdownGracefully()
        try? await self.serverGroup.shutdownGracefully()
        try? self.storage.close()
        try? FileManager.default.removeItem(atPath: self.directory)
    }
}

/// Device A saves, device B (same user, own connection) is told by a pushed notification.
final class PushBench: @unchecked Sendable {
    // @unchecked Sendable: `iterator` is used by one benchmark loop at a time, never concurrently.
    let bench: EndToEndBench
    let deviceB: CKContainer
    private var iterator: CKContainer.Notifications.AsyncIterator
    private var saved = 0

    init(certificates: String) async throws {
        let bench = try await EndToEndBench(certificates: certificates)
        let deviceB = bench.secondDevice()
        self.bench = bench
        self.deviceB = deviceB
        _ = try await bench.container.privateCloudDatabase.save(CKDatabaseSubscription(subscriptionID: "everything"))
        // Start from the current end of the feed; the first round trip proves the watch is live.
        var token: CKServerChangeToken?
        while true {
            let operation = CKFetchNotificationChangesOperation(previousServerChangeToken: token)
            let result = NotificationTokenBox()
            operation.fetchNotificationChangesResultBlock = { result.set($0) }
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                operation.completionBlock = { continuation.resume() }
                deviceB.add(operation)
            }
            let (next, moreComing) = try result.get()
            token = next
            if !moreComing { break }
        }
        self.iterator = deviceB.notifications(since: token).makeAsyncIterator()
        try await self.roundTrip()
    }

    /// One save on A, until B has its notification.
    func roundTrip() async throws {
        let save = self.startSave()
        try await self.nextNotification()
        try await save.value
    }

    /// Starts one save on A; the task ends when A has its answer.
    func startSave() -> Task<Void, any Error> {
        let record = CKRecord(recordType: "Note", recordID: CKRecord.ID(recordName: "push-\(self.saved)"))
        self.saved += 1
        record["title"] = "pushed"
        let database = self.bench.container.privateCloudDatabase
        return Task { _ = try await database.save(record) }
    }

    /// Waits until B has the next notification.
    func nextNotification() async throws {
        guard try await self.iterator.next() != nil else { throw CKError(.networkFailure, message: "the watch ended") }
    }

    func close() async {
        await self.bench.close()
    }
}

/// The result of a CKFetchNotificationChangesOperation, handed from its callback queue.
final class NotificationTokenBox: @unchecked Sendable {
    // @unchecked Sendable: written once on the operation's queue, read after it finished.
    private var result: Result<(serverChangeToken: CKServerChangeToken, moreComing: Bool), any Error>?

    func set(_ result: Result<(serverChangeToken: CKServerChangeToken, moreComing: Bool), any Error>) {
        self.result = result
    }

    func get() throws -> (CKServerChangeToken, Bool) {
        guard let result else { throw CKError(.internalError, message: "no result") }
        let (token, moreComing) = try result.get()
        return (token, moreComing)
    }
}
