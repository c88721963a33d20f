import CirrusKit
import CirrusModel
import CirrusStore
import CirrusTestSupport
import CirrusWire
import Foundation
import NIOConcurrencyHelpers
import Testing

/// A device of a sync app: a local copy of the private database kept current the CloudKit way —
/// database changes since its token, then zone changes of the zones that changed since theirs;
/// an expired token means: forget what that token covered and fetch it again from the start.
final class SyncDevice {
    let name: String
    let database: CKDatabase
    private(set) var records: [CKRecord.ID: CKRecord] = [:]
    private var databaseToken: CKServerChangeToken?
    private var zoneTokens: [CKRecordZone.ID: CKServerChangeToken] = [:]
    private(set) var resets = 0

    init(name: String, database: CKDatabase) {
        self.name = name
        self.database = database
    }

    /// Brings the local copy up to date with the server.
    func sync() async throws {
        var zonesToFetch: [CKRecordZone.ID] = []
        let (events, token) = try await self.databaseChanges()
        for (zoneID, deleted) in events {
            if deleted {
                self.forget(zoneID)
                zonesToFetch.removeAll { $0 == zoneID }
            } else if !zonesToFetch.contains(zoneID) {
                zonesToFetch.append(zoneID)
            }
        }
        while !zonesToFetch.isEmpty {
            let log = await fetchZoneChanges(
                self.database, Dictionary(uniqueKeysWithValues: zonesToFetch.map { ($0, self.zoneTokens[$0]) }),
                order: zonesToFetch, resultsLimit: 3)
            for (id, record) in log.records { self.records[id] = record }
            for id in log.deletedIDs { self.records[id] = nil }
            var again: [CKRecordZone.ID] = []
            for zoneID in zonesToFetch {
                if let failure = log.failures[zoneID] {
                    switch failure {
                    case .changeTokenExpired:
                        self.resets += 1
                        self.forget(zoneID)
                        again.append(zoneID)
                    case .zoneNotFound:
                        // Deleted since the database feed was read; the next sync reports it.
                        self.forget(zoneID)
                    default:
                        throw CKError(failure)
                    }
                } else if let token = log.tokens[zoneID] {
                    self.zoneTokens[zoneID] = token
                }
            }
            zonesToFetch = again
        }
        self.databaseToken = token
    }

    private func databaseChanges() async throws -> ([(CKRecordZone.ID, Bool)], CKServerChangeToken) {
        while true {
            do {
                let operation = CKFetchDatabaseChangesOperation(previousServerChangeToken: self.databaseToken)
                operation.resultsLimit = 2
                let events = NIOLockedValueBox<[(CKRecordZone.ID, Bool)]>([])
                let end = NIOLockedValueBox<Result<CKServerChangeToken, any Error>?>(nil)
                operation.recordZoneWithIDChangedBlock = { id in events.withLockedValue { $0.append((id, false)) } }
                operation.recordZoneWithIDWasDeletedBlock = { id in events.withLockedValue { $0.append((id, true)) } }
                operation.fetchDatabaseChangesResultBlock = { result in
                    end.withLockedValue { $0 = result.map(\.serverChangeToken) }
                }
                self.database.add(operation)
                await finished(operation)
                guard let result = end.withLockedValue({ $0 }) else { throw CKError(.internalError) }
                return (events.withLockedValue { $0 }, try result.get())
            } catch let error as CKError where error.code == .changeTokenExpired {
                // Start over: everything local may be stale.
                self.resets += 1
                self.databaseToken = nil
                self.zoneTokens.removeAll()
                self.records.removeAll()
            }
        }
    }

    private func forget(_ zoneID: CKRecordZone.ID) {
        self.zoneTokens[zoneID] = nil
        self.records = self.records.filter { $0.key.zoneID != zoneID }
    }

    /// One random change made from what this device knows.
    func act(using generator: inout SplitMix64, zones: [CKRecordZone.ID]) async {
        let local = self.records.keys.sorted { "\($0)" < "\($1)" }
        let value = Int.random(in: 0..<1_000_000, using: &generator)
        do {
            switch Int.random(in: 0..<100, using: &generator) {
            case let roll where roll < 40 || local.isEmpty:
                let zoneID = zones[Int.random(in: zones.indices, using: &generator)]
                _ = try await self.database.save(CKRecordZone(zoneID: zoneID))
                let record = CKRecord(
                    recordType: "Item", recordID: CKRecord.ID(recordName: "\(self.name)-\(value)", zoneID: zoneID))
                record["v"] = value
                _ = try await self.database.modifyRecords(saving: [record], deleting: [], savePolicy: .changedKeys)
            case let roll where roll < 75:
                let id = local[Int.random(in: local.indices, using: &generator)]
                let record = CKRecord(recordType: "Item", recordID: id)
                record["v"] = value
                _ = try await self.database.modifyRecords(saving: [record], deleting: [], savePolicy: .changedKeys)
            case let roll where roll < 95:
                let id = local[Int.random(in: local.indices, using: &generator)]
                _ = try await self.database.modifyRecords(saving: [], deleting: [id])
            default:
                let zoneID = zones[Int.random(in: zones.indices, using: &generator)]
                _ = try await self.database.modifyRecordZones(saving: [], deleting: [zoneID])
            }
        } catch {
            // The other device may have deleted the zone: the server's answer is the truth.
        }
    }
}

@Suite("Two devices of one user converge", .serialized)
struct TwoDeviceSyncTests {
    static let zones = ["Inbox", "Work", "Home"].map { CKRecordZone.ID(zoneName: $0) }

    /// The server's records of Alice's private database, read from the store: zone/name → change tag and value.
    static func serverState(_ storage: SQLiteStorage) async throws -> [String: String] {
        let database = DatabaseKey.private(container: "iCloud.com.example.notes", user: "_alice")
        var state: [String: String] = [:]
        for zone in try await storage.fetchAllZones(in: database) {
            guard let zoneID = zone.zoneID else { continue }
            var since: Int64 = 0
            while true {
                let batch = try await storage.recordChanges(in: zoneID, of: database, since: since, limit: 400, desiredKeys: nil)
                for record in batch.changed {
                    var value = "-"
                    if case .int64Value(let v) = record.fields.first(where: { $0.key == "v" })?.value?.kind { value = "\(v)" }
                    state["\(zoneID.zoneName)/\(record.recordID?.recordName ?? "")"] = "\(record.recordChangeTag) \(value)"
                }
                since = batch.lastSeq
                if !batch.moreComing { break }
            }
        }
        return state
    }

    static func localState(_ device: SyncDevice) -> [String: String] {
        var state: [String: String] = [:]
        for (id, record) in device.records {
            let value = (record["v"] as? Int).map { "\($0)" } ?? "-"
            state["\(id.zoneID.zoneName)/\(id.recordName)"] = "\(record.recordChangeTag ?? "") \(value)"
        }
        return state
    }

    @Test(arguments: Array(1...8) as [UInt64])
    func randomInterleavingsConverge(seed: UInt64) async throws {
        let clock = ManualClock()
        let retention: Int64 = 3600
        try await withStack(clock: clock, tombstoneRetentionSeconds: retention) { container, internals in
            // Two containers of one user: two connections, two devices.
            let a = SyncDevice(name: "A", database: container("alice").privateCloudDatabase)
            let b = SyncDevice(name: "B", database: container("alice").privateCloudDatabase)
            var generator = SplitMix64(seed: seed)
            var expiries = 0
            for _ in 0..<120 {
                switch Int.random(in: 0..<100, using: &generator) {
                case 0..<35: await a.act(using: &generator, zones: Self.zones)
                case 35..<70: await b.act(using: &generator, zones: Self.zones)
                case 70..<82: try await a.sync()
                case 82..<94: try await b.sync()
                default:
                    // Everything deleted so far is past retention: tokens older than now expire.
                    clock.advance(seconds: retention + 1)
                    try await internals.maintenance.runOnce()
                    expiries += 1
                }
                clock.advance(seconds: 1)
            }
            try await a.sync()
            try await b.sync()
            let server = try await Self.serverState(internals.storage)
            #expect(Self.localState(a) == server, "seed \(seed): device A differs from the server")
            #expect(Self.localState(b) == server, "seed \(seed): device B differs from the server")
            #expect(!server.isEmpty, "seed \(seed): the run should leave some records")
            // A synced device that syncs again sees nothing new.
            let before = Self.localState(a)
            try await a.sync()
            #expect(Self.localState(a) == before)
        }
    }

    @Test func anExpiredDeviceCatchesUpWithDeletesAndZoneDeletes() async throws {
        let clock = ManualClock()
        try await withStack(clock: clock, tombstoneRetentionSeconds: 60) { container, internals in
            let a = SyncDevice(name: "A", database: container("alice").privateCloudDatabase)
            let b = SyncDevice(name: "B", database: container("alice").privateCloudDatabase)
            let work = Self.zones[1]
            let home = Self.zones[2]
            _ = try await a.database.modifyRecordZones(saving: [CKRecordZone(zoneID: work), CKRecordZone(zoneID: home)], deleting: [])
            let records = (0..<6).map { i -> CKRecord in
                let record = CKRecord(recordType: "Item", recordID: CKRecord.ID(recordName: "r\(i)", zoneID: i < 3 ? work : home))
                record["v"] = i
                return record
            }
            _ = try await a.database.modifyRecords(saving: records, deleting: [])
            try await b.sync()
            #expect(b.records.count == 6)

            // While B is away: a delete, a zone delete, and both pruned past retention.
            _ = try await a.database.deleteRecord(withID: records[0].recordID)
            _ = try await a.database.deleteRecordZone(withID: home)
            clock.advance(seconds: 120)
            try await internals.maintenance.runOnce()
            try await b.sync()
            #expect(b.resets > 0, "B's tokens must have expired")
            #expect(Set(b.records.keys.map(\.recordName)) == ["r1", "r2"])
            #expect(Self.localState(b) == (try await Self.serverState(internals.storage)))
        }
    }
}
