import CirrusKit
import CirrusModel
import CirrusServer
import CirrusStore
import Foundation
import NIOConcurrencyHelpers

/// Two devices of one user, each with a `CKSyncEngine` on automatic sync, against an
/// in-process server set up as `cirrusd` sets itself up (users, long-lived operations): an
/// edit on A is sent on add, the server pushes to B, B's engine fetches and hands it to its
/// delegate.
final class SyncEngineBench: Sendable {
    let server: CirrusServer
    let storage: SQLiteStorage
    let directory: String
    let configuration: CirrusClientConfiguration
    let a: BenchDevice
    let b: BenchDevice
    let engineA: CKSyncEngine
    let engineB: CKSyncEngine
    static let zone = CKRecordZone.ID(zoneName: "Bench")
    private let edits = NIOLockedValueBox(0)

    init(certificates: String) async throws {
        self.directory = FileManager.default.temporaryDirectory.appendingPathComponent("cirrus-bench-\(UUID().uuidString)").path
        self.storage = try SQLiteStorage(directory: self.directory)
        let users = UserDirectory(storage: self.storage)
        try await users.load()
        let executor = StorageExecutor(storage: self.storage, users: users)
        var configuration = ServerConfiguration(
            tls: .server(
                certificateChainPath: certificates + "/server.pem",
                privateKeyPath: certificates + "/server-key.pem",
                clientCATrustRootsPath: certificates + "/ca.pem",
                clientCertificateVerification: .required))
        configuration.port = 0
        configuration.users = users
        configuration.executor = executor
        configuration.longLivedOperations = LongLivedOperations(journal: self.storage, executor: executor)
        self.server = CirrusServer(configuration: configuration)
        let address = try await self.server.start()
        let client = CirrusClientConfiguration(
            host: "127.0.0.1", port: address.port ?? 0, trustRootsPath: certificates + "/ca.pem",
            certificateChainPath: certificates + "/alice.pem", privateKeyPath: certificates + "/alice-key.pem")
        let database = { CKContainer(identifier: "iCloud.bench", configuration: client).privateCloudDatabase }
        let a = BenchDevice()
        let b = BenchDevice()
        self.configuration = client
        self.a = a
        self.b = b
        self.engineA = CKSyncEngine(.init(database: database(), stateSerialization: nil, delegate: a))
        self.engineB = CKSyncEngine(.init(database: database(), stateSerialization: nil, delegate: b))
        // Both engines started (subscription saved, first fetch done), the records exist on B.
        while !(self.a.fetchedOnce.withLockedValue { $0 } && self.b.fetchedOnce.withLockedValue { $0 }) {
            try await Task.sleep(for: .milliseconds(5))
        }
        self.engineA.state.add(pendingDatabaseChanges: [.saveZone(CKRecordZone(zoneID: Self.zone))])
        for index in 0..<10 { try await self.edit(index) }
    }

    /// One edit on A (of one of 10 records, in turn), until B's delegate has it.
    func edit(_ index: Int? = nil) async throws {
        let edit = self.edits.withLockedValue { edits -> Int in
            defer { edits += 1 }
            return edits
        }
        let id = CKRecord.ID(recordName: "r\(index ?? edit % 10)", zoneID: Self.zone)
        let arrived = self.b.expect(id, value: edit)
        self.a.put(id, value: edit)
        self.engineA.state.add(pendingRecordZoneChanges: [.saveRecord(id)])
        await arrived.value
    }

    /// Saves `count` records into the zone (from device A's connection, outside the engines).
    func seed(_ count: Int) async throws {
        let database = CKContainer(identifier: "iCloud.bench", configuration: self.configuration).privateCloudDatabase
        _ = try await database.save(CKRecordZone(zoneID: Self.zone))
        for start in stride(from: 0, to: count, by: 400) {
            let records = (start..<min(start + 400, count)).map { index -> CKRecord in
                let record = CKRecord(recordType: "Item", recordID: CKRecord.ID(recordName: "seed-\(index)", zoneID: Self.zone))
                record["v"] = index
                record["title"] = "Item number \(index)"
                return record
            }
            _ = try await database.modifyRecords(saving: records, deleting: [], savePolicy: .allKeys)
        }
    }

    /// A new device's first fetch: every record of the database; returns how many it got.
    func initialSync() async throws -> Int {
        let device = BenchDevice()
        var configuration = CKSyncEngine.Configuration(
            database: CKContainer(identifier: "iCloud.bench", configuration: self.configuration).privateCloudDatabase,
            stateSerialization: nil, delegate: device)
        configuration.automaticallySync = false
        let engine = CKSyncEngine(configuration)
        try await engine.fetchChanges()
        return device.recordCount
    }

    func close() async {
        await self.engineA.cancelOperations()
        await self.engineB.cancelOperations()
        await self.server.shutdownGracefully()
        try? self.storage.close()
        try? FileManager.default.removeItem(atPath: self.directory)
    }
}

/// A device's store: the last server record of each ID, and a waiter for one value.
final class BenchDevice: CKSyncEngineDelegate {
    private struct Waiter {
        var id: CKRecord.ID
        var value: Int
        var continuation: CheckedContinuation<Void, Never>
    }

    let fetchedOnce = NIOLockedValueBox(false)
    private let records = NIOLockedValueBox<[CKRecord.ID: CKRecord]>([:])
    private let local = NIOLockedValueBox<[CKRecord.ID: Int]>([:])
    private let waiter = NIOLockedValueBox<Waiter?>(nil)
    private let waiting = NIOLockedValueBox<(CKRecord.ID, Int)?>(nil)

    var recordCount: Int { self.records.withLockedValue { $0.count } }

    func put(_ id: CKRecord.ID, value: Int) {
        self.local.withLockedValue { $0[id] = value }
    }

    /// A task that ends when a fetched record `id` has `v == value`.
    func expect(_ id: CKRecord.ID, value: Int) -> Task<Void, Never> {
        self.waiting.withLockedValue { $0 = (id, value) }
        return Task {
            await withCheckedContinuation { continuation in
                let done = self.records.withLockedValue { ($0[id]?["v"] as? Int) == value }
                if done {
                    continuation.resume()
                } else {
                    self.waiter.withLockedValue { $0 = Waiter(id: id, value: value, continuation: continuation) }
                    // It may have arrived in between.
                    if self.records.withLockedValue({ ($0[id]?["v"] as? Int) == value }) { self.wake(id, value) }
                }
            }
        }
    }

    private func wake(_ id: CKRecord.ID, _ value: Int) {
        let waiter = self.waiter.withLockedValue { waiter -> Waiter? in
            guard let current = waiter, current.id == id, current.value == value else { return nil }
            waiter = nil
            return current
        }
        waiter?.continuation.resume()
    }

    func handleEvent(_ event: CKSyncEngine.Event, syncEngine: CKSyncEngine) async {
        switch event {
        case .didFetchChanges:
            self.fetchedOnce.withLockedValue { $0 = true }
        case .fetchedRecordZoneChanges(let changes):
            for modification in changes.modifications {
                let record = modification.record
                self.records.withLockedValue { $0[record.recordID] = record }
                if let value = record["v"] as? Int { self.wake(record.recordID, value) }
            }
        case .sentRecordZoneChanges(let sent):
            for record in sent.savedRecords {
                self.records.withLockedValue { $0[record.recordID] = record }
            }
            var again: [CKSyncEngine.PendingRecordZoneChange] = []
            for failure in sent.failedRecordSaves where failure.error.code == .serverRecordChanged {
                if let server = failure.error.serverRecord {
                    self.records.withLockedValue { $0[server.recordID] = server }
                    again.append(.saveRecord(server.recordID))
                }
            }
            syncEngine.state.add(pendingRecordZoneChanges: again)
        default:
            break
        }
    }

    func nextRecordZoneChangeBatch(
        _ context: CKSyncEngine.SendChangesContext, syncEngine: CKSyncEngine
    ) async -> CKSyncEngine.RecordZoneChangeBatch? {
        await CKSyncEngine.RecordZoneChangeBatch(pendingChanges: syncEngine.state.pendingRecordZoneChanges) { id in
            guard let value = self.local.withLockedValue({ $0[id] }) else { return nil }
            let record = self.records.withLockedValue { $0[id]?.copy() as? CKRecord } ?? CKRecord(recordType: "Item", recordID: id)
            record["v"] = value
            return record
        }
    }
}
