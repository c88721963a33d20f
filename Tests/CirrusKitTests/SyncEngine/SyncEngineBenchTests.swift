import CirrusKit
import CirrusTestSupport
import Foundation
import NIOConcurrencyHelpers
import Testing

/// Figures for the README, not assertions (speed is never asserted in tests): run with
/// `CIRRUS_SYNC_BENCH=1 swift test --filter SyncEngineBenchTests`; each test prints its figures.
@Suite(
    "CKSyncEngine figures", .serialized,
    .enabled(if: ProcessInfo.processInfo.environment["CIRRUS_SYNC_BENCH"] != nil, "set CIRRUS_SYNC_BENCH=1 to measure"))
struct SyncEngineBenchTests {
    /// An edit on device A until device B's delegate has it: 1,000 edits of 10 records, one at a
    /// time, both engines on automatic sync (A sends on add, B fetches on push).
    @Test func editToDelegateLatency() async throws {
        try await withStack { container in
            let a = EngineDevice(name: "A")
            let b = EngineDevice(name: "B")
            let engineA = a.start(database: container("alice").privateCloudDatabase)
            b.start(database: container("alice").privateCloudDatabase)
            var arrivals = b.fetched.makeAsyncIterator()
            try await eventually(timeout: .seconds(90), "both first fetches", every: .milliseconds(20)) {
                [a, b].allSatisfy { $0.store.withLockedValue { $0.events.contains("didFetchChanges") } }
            }
            engineA.state.add(pendingDatabaseChanges: [.saveZone(CKRecordZone(zoneID: SyncEngineEndToEndTests.zone))])
            let ids = (0..<10).map { SyncEngineEndToEndTests.id("lat\($0)") }
            for (index, id) in ids.enumerated() { try a.edit(id, value: index) }
            var seen = Set<CKRecord.ID>()
            while seen.count < ids.count, let id = await arrivals.next() { seen.insert(id) }

            let clock = ContinuousClock()
            let sentAt = NIOLockedValueBox<ContinuousClock.Instant?>(nil)
            a.whileHandlingSent.withLockedValue { $0 = { sentAt.withLockedValue { $0 = $0 ?? ContinuousClock.now } } }
            var samples: [Duration] = []
            var sends: [Duration] = []
            for edit in 0..<1_000 {
                let id = ids[edit % ids.count]
                sentAt.withLockedValue { $0 = nil }
                let start = clock.now
                try a.edit(id, value: 1_000 + edit)
                while let arrived = await arrivals.next() {
                    if arrived == id, b.store.withLockedValue({ $0.server[id]?["v"] as? Int }) == 1_000 + edit { break }
                }
                samples.append(clock.now - start)
                if let sent = sentAt.withLockedValue({ $0 }) { sends.append(sent - start) }
            }
            sends.sort()
            if !sends.isEmpty {
                print("CKSyncEngine edit on A → A's delegate has the server's answer: p50 \(sends[sends.count / 2]) (\(sends.count) samples)")
            }
            samples.sort()
            let p50 = samples[samples.count / 2]
            let p99 = samples[samples.count * 99 / 100]
            print("CKSyncEngine edit on A → B's delegate, 1,000 edits: p50 \(p50), p99 \(p99), max \(samples.last ?? .zero)")
            await a.stop()
            await b.stop()
        }
    }

    /// A new device's first fetch of a 100,000-record zone.
    @Test func initialSyncOfAHundredThousandRecords() async throws {
        try await withStack { container in
            let database = container("alice").privateCloudDatabase
            let zone = SyncEngineEndToEndTests.zone
            _ = try await database.save(CKRecordZone(zoneID: zone))
            let count = 100_000
            try await withThrowingTaskGroup(of: Void.self) { group in
                for worker in 0..<4 {
                    group.addTask {
                        for start in stride(from: worker * 400, to: count, by: 1_600) {
                            let records = (start..<min(start + 400, count)).map { index -> CKRecord in
                                let record = CKRecord(recordType: "Item", recordID: CKRecord.ID(recordName: "i\(index)", zoneID: zone))
                                record["v"] = index
                                record["title"] = "Item number \(index)"
                                return record
                            }
                            _ = try await database.modifyRecords(saving: records, deleting: [], savePolicy: .allKeys)
                        }
                    }
                }
                try await group.waitForAll()
            }
            let device = EngineDevice(name: "new")
            let engine = device.start(database: container("alice").privateCloudDatabase, automaticallySync: false)
            let clock = ContinuousClock()
            let start = clock.now
            try await engine.fetchChanges()
            let elapsed = clock.now - start
            let received = device.store.withLockedValue { $0.server.count }
            #expect(received == count)
            let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
            print("CKSyncEngine initial sync of \(received) records: \(elapsed), \(Int(Double(received) / seconds)) records/s")
        }
    }
}
