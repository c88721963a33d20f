import CirrusKit
import CirrusModel
import CirrusStore
import CirrusTestSupport
import Foundation
import NIOConcurrencyHelpers
import Testing

@Suite("CKSyncEngine end to end", .serialized)
struct SyncEngineEndToEndTests {
    static let zone = CKRecordZone.ID(zoneName: "Items")

    static func id(_ name: String) -> CKRecord.ID { CKRecord.ID(recordName: name, zoneID: zone) }

    /// The server's records of Alice's zone "Items": name → "tag value".
    static func serverRecords(_ storage: SQLiteStorage) async throws -> [String: String] {
        try await TwoDeviceSyncTests.serverState(storage).reduce(into: [:]) { result, entry in
            let parts = entry.key.split(separator: "/", maxSplits: 1)
            if parts.first == "Items" { result[String(parts[1])] = entry.value }
        }
    }

    @Test func manualSendAndFetchCarryRecordsAndTheirDeletesBetweenDevices() async throws {
        try await withStack { container in
            let a = EngineDevice(name: "A")
            let b = EngineDevice(name: "B")
            let engineA = a.start(database: container("alice").privateCloudDatabase, automaticallySync: false)
            let engineB = b.start(database: container("alice").privateCloudDatabase, automaticallySync: false)
            engineA.state.add(pendingDatabaseChanges: [.saveZone(CKRecordZone(zoneID: Self.zone))])
            for i in 0..<450 { try a.edit(Self.id("r\(i)"), value: i) }
            try await engineA.sendChanges()
            #expect(engineA.state.pendingRecordZoneChanges.isEmpty)
            #expect(engineA.state.pendingDatabaseChanges.isEmpty)
            // 450 changes go as two batches (at most 400 items each).
            #expect(a.store.withLockedValue { $0.events.filter { $0.hasPrefix("sentRecordZoneChanges") }.count } == 2)

            try await engineB.fetchChanges()
            #expect(b.values.count == 450)
            #expect(b.values["r7"] == 7)
            let events = b.store.withLockedValue { $0.events }
            let signIn = try #require(events.firstIndex(of: "accountChange(signIn(_alice))"))
            let willFetch = try #require(events.firstIndex(of: "willFetchChanges"))
            #expect(signIn < willFetch)
            #expect(events.contains("willFetchRecordZoneChanges(Items)"))
            #expect(events.last == "didFetchChanges")

            // The server forgets each send's long-lived operation only after the delegate
            // handled its outcome (a process killed before that finds it again).
            let listed = NIOLockedValueBox<[Int]>([])
            let alice = container("alice")
            a.whileHandlingSent.withLockedValue {
                $0 = {
                    // Time for an acknowledgement sent too early to reach the server.
                    try? await Task.sleep(for: .milliseconds(300))
                    let count = (try? await alice.allLongLivedOperationIDs().count) ?? -1
                    listed.withLockedValue { $0.append(count) }
                }
            }
            try a.edit(Self.id("r1"), value: 1_001)
            try await engineA.sendChanges()
            #expect(listed.withLockedValue { $0 } == [1])
            try await eventually(timeout: .seconds(30)) { (try? await alice.allLongLivedOperationIDs().isEmpty) == true }
            a.whileHandlingSent.withLockedValue { $0 = nil }

            // A delete travels too; a fetch with nothing new reports no changes.
            engineA.state.add(pendingRecordZoneChanges: [.deleteRecord(Self.id("r3"))])
            try await engineA.sendChanges()
            // A fetch scoped to other zones leaves Items for later.
            try await engineB.fetchChanges(.init(scope: .allExcluding([Self.zone])))
            #expect(b.values["r3"] == 3)
            #expect(engineB.state.zoneIDsWithUnfetchedServerChanges == [Self.zone])
            try await engineB.fetchChanges()
            #expect(engineB.state.zoneIDsWithUnfetchedServerChanges.isEmpty)
            #expect(b.values["r3"] == nil)
            #expect(b.values["r1"] == 1_001)
            #expect(b.values.count == 449)
            let before = b.store.withLockedValue { $0.events.count }
            try await engineB.fetchChanges()
            let after = b.store.withLockedValue { Array($0.events[before...]) }
            #expect(!after.contains { $0.hasPrefix("fetchedRecordZoneChanges") })
        }
    }

    @Test func aStaleEditReachesTheDelegateAsServerRecordChangedWithTheServerRecord() async throws {
        try await withStack { container in
            let a = EngineDevice(name: "A")
            let b = EngineDevice(name: "B")
            let engineA = a.start(database: container("alice").privateCloudDatabase, automaticallySync: false)
            let engineB = b.start(database: container("alice").privateCloudDatabase, automaticallySync: false)
            engineA.state.add(pendingDatabaseChanges: [.saveZone(CKRecordZone(zoneID: Self.zone))])
            try a.edit(Self.id("shared"), value: 1)
            try await engineA.sendChanges()
            try await engineB.fetchChanges()
            // Both edit the version they know; A is first.
            try a.edit(Self.id("shared"), value: 2)
            try await engineA.sendChanges()
            // B's edit is based on version 1: the server refuses it.
            try b.edit(Self.id("shared"), value: 3)
            try await engineB.sendChanges()
            let conflicts = b.store.withLockedValue { $0.conflicts }
            let conflict = try #require(conflicts.first)
            #expect(conflict.error.code == .serverRecordChanged)
            #expect(conflict.record["v"] as? Int == 3)
            #expect(conflict.error.serverRecord?["v"] as? Int == 2)
            // The device merged (its value on the server's record) and the engine sent it.
            #expect(engineB.state.pendingRecordZoneChanges.isEmpty)
            try await engineA.fetchChanges()
            #expect(a.values["shared"] == 3)
        }
    }

    @Test func aPushStartsAFetchAndAddedChangesAreSentWithoutAnyCall() async throws {
        try await withStack { container in
            let a = EngineDevice(name: "A")
            let b = EngineDevice(name: "B")
            let engineA = a.start(database: container("alice").privateCloudDatabase)
            b.start(database: container("alice").privateCloudDatabase)
            // Let B's engine save its subscription and open its watch before A writes.
            try await eventually(timeout: .seconds(90), "B's first fetch", every: .milliseconds(20)) { b.store.withLockedValue { $0.events.contains("didFetchChanges") } }
            engineA.state.add(pendingDatabaseChanges: [.saveZone(CKRecordZone(zoneID: Self.zone))])
            for i in 0..<5 { try a.edit(Self.id("p\(i)"), value: i) }
            try await eventually(timeout: .seconds(90), "B to receive A's records", every: .milliseconds(20)) { b.values.count == 5 }
            #expect(b.values == ["p0": 0, "p1": 1, "p2": 2, "p3": 3, "p4": 4])
            try a.edit(Self.id("p0"), value: 100)
            try await eventually(timeout: .seconds(90), "B to receive the edit", every: .milliseconds(20)) { b.values["p0"] == 100 }
            // B may have it before A handled the server's answer.
            try await eventually(timeout: .seconds(90), "A's send to end", every: .milliseconds(20)) { engineA.state.pendingRecordZoneChanges.isEmpty }
            await a.stop()
            await b.stop()
        }
    }

    @Test func aRestoredStateContinuesFromItsTokensAndPendingChanges() async throws {
        try await withStack { container in
            let a = EngineDevice(name: "A")
            let engineA = a.start(database: container("alice").privateCloudDatabase, automaticallySync: false)
            engineA.state.add(pendingDatabaseChanges: [.saveZone(CKRecordZone(zoneID: Self.zone))])
            for i in 0..<10 { try a.edit(Self.id("s\(i)"), value: i) }
            try await engineA.sendChanges()
            try await engineA.fetchChanges()
            // A change added but never sent survives the archive: the engine hands over the
            // state soon after the change is added.
            let updates = a.store.withLockedValue { $0.events.filter { $0 == "stateUpdate" }.count }
            try a.edit(Self.id("late"), value: 99)
            try await eventually(timeout: .seconds(90), "the state update", every: .milliseconds(20)) {
                a.store.withLockedValue { $0.events.filter { $0 == "stateUpdate" }.count } > updates
            }
            let saved = try #require(a.store.withLockedValue { $0.serialization })
            let data = try JSONEncoder().encode(saved)
            let restored = try JSONDecoder().decode(CKSyncEngine.State.Serialization.self, from: data)
            await a.stop()

            let again = EngineDevice(name: "A'")
            again.store.withLockedValue { $0.local = [Self.id("late"): 99] }
            let engine = again.start(database: container("alice").privateCloudDatabase, serialization: restored, automaticallySync: false)
            #expect(engine.state.pendingRecordZoneChanges == [.saveRecord(Self.id("late"))])
            try await engine.fetchChanges()
            // The tokens came along: nothing fetched again, and no new sign-in.
            let events = again.store.withLockedValue { $0.events }
            #expect(!events.contains { $0.hasPrefix("fetchedRecordZoneChanges") || $0.hasPrefix("accountChange") })
            try await engine.sendChanges()
            #expect(engine.state.pendingRecordZoneChanges.isEmpty)
            #expect(again.store.withLockedValue { $0.acknowledged[Self.id("late")] } == [99])
        }
    }

    @Test func aDeviceOfflinePastTheTombstoneRetentionRefetchesFromScratch() async throws {
        let clock = ManualClock()
        try await withStack(clock: clock, tombstoneRetentionSeconds: 60) { container, internals in
            let a = EngineDevice(name: "A")
            let b = EngineDevice(name: "B")
            let engineA = a.start(database: container("alice").privateCloudDatabase, automaticallySync: false)
            let engineB = b.start(database: container("alice").privateCloudDatabase, automaticallySync: false)
            let gone = CKRecordZone.ID(zoneName: "Gone")
            engineA.state.add(pendingDatabaseChanges: [.saveZone(CKRecordZone(zoneID: Self.zone)), .saveZone(CKRecordZone(zoneID: gone))])
            for i in 0..<6 { try a.edit(Self.id("t\(i)"), value: i) }
            try a.edit(CKRecord.ID(recordName: "g", zoneID: gone), value: 1)
            try await engineA.sendChanges()
            try await engineB.fetchChanges()
            #expect(b.values.count == 7)

            // While B is away: a delete, a zone delete, then the tombstones are pruned.
            engineA.state.add(pendingRecordZoneChanges: [.deleteRecord(Self.id("t0"))])
            engineA.state.add(pendingDatabaseChanges: [.deleteZone(gone)])
            try a.edit(Self.id("t1"), value: 11)
            try await engineA.sendChanges()
            clock.advance(seconds: 120)
            try await internals.maintenance.runOnce()

            try await engineB.fetchChanges()
            #expect(b.store.withLockedValue { $0.expiredZones } >= 1, "the zone token must have expired")
            let server = try await Self.serverRecords(internals.storage)
            #expect(b.tagged == server)
            #expect(b.values["t0"] == nil && b.values["g"] == nil && b.values["t1"] == 11)
            let events = b.store.withLockedValue { $0.events }
            #expect(events.contains("didFetchRecordZoneChanges(Items, change token expired)"))
            #expect(events.last == "didFetchChanges")
        }
    }

    @Test func aSaveIntoAMissingZoneIsReportedAsZoneNotFoundAndSucceedsOnceTheZoneIsQueued() async throws {
        try await withStack { container in
            let a = EngineDevice(name: "A", createsMissingZones: false)
            let engine = a.start(database: container("alice").privateCloudDatabase, automaticallySync: false)
            try a.edit(Self.id("orphan"), value: 1)
            try await engine.sendChanges()
            let failures = a.store.withLockedValue { $0.otherFailures }
            #expect(failures.map(\.code) == [.zoneNotFound])
            // A failure that will not pass leaves the state: the app decides.
            #expect(engine.state.pendingRecordZoneChanges.isEmpty)
            engine.state.add(pendingDatabaseChanges: [.saveZone(CKRecordZone(zoneID: Self.zone))])
            engine.state.add(pendingRecordZoneChanges: [.saveRecord(Self.id("orphan"))])
            try await engine.sendChanges()
            #expect(engine.state.pendingRecordZoneChanges.isEmpty && engine.state.pendingDatabaseChanges.isEmpty)
            #expect(a.store.withLockedValue { $0.acknowledged[Self.id("orphan")] } == [1])
            let events = a.store.withLockedValue { $0.events }
            #expect(events.contains("sentDatabaseChanges(1 saved, 0 failed, 0 deleted, 0 failed)"))
        }
    }

    @Test func changesAddedWhileTheNetworkIsDownAreSentByThemselvesWhenItReturns() async throws {
        try await withStack(clock: nil) { container, internals in
            let proxy = try await CuttingProxy.start(targetPort: internals.port) { nil }
            let a = EngineDevice(name: "A")
            let engine = a.start(
                database: CKContainer(
                    identifier: "iCloud.com.example.notes", configuration: TestCertificates.client(port: proxy.port, user: "alice")
                ).privateCloudDatabase)
            try await eventually(timeout: .seconds(90), "the first fetch", every: .milliseconds(20)) { a.store.withLockedValue { $0.events.contains("didFetchChanges") } }
            proxy.refuseConnections(true)
            proxy.cutAll()
            engine.state.add(pendingDatabaseChanges: [.saveZone(CKRecordZone(zoneID: Self.zone))])
            try a.edit(Self.id("offline"), value: 5)
            // Attempts fail while the network is down (a fetch the cut asked for may come first
            // and keep failing, so the send itself need not have started), and the change stays
            // pending.
            try await eventually(timeout: .seconds(90), "a failed attempt", every: .milliseconds(20)) { proxy.acceptedCount >= 1 }
            #expect(engine.state.pendingRecordZoneChanges == [.saveRecord(Self.id("offline"))])
            proxy.refuseConnections(false)
            try await eventually(timeout: .seconds(90), "the retried send", every: .milliseconds(20)) { engine.state.pendingRecordZoneChanges.isEmpty }
            #expect(a.store.withLockedValue { $0.acknowledged[Self.id("offline")] } == [5])
            let server = try await Self.serverRecords(internals.storage)
            #expect(server["offline"]?.hasSuffix(" 5") == true)
            await a.stop()
            await proxy.stop()
        }
    }
}
