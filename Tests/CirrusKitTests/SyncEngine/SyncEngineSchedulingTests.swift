import CirrusKit
import CirrusTestSupport
import CirrusWire
import Foundation
import Synchronization
import Testing

/// The engine's automatic sync against a scripted server whose database change feed keeps
/// failing with an error that may pass (`serviceUnavailable`) while saves succeed.
@Suite("CKSyncEngine scheduling")
struct SyncEngineSchedulingTests {
    @Test func fetchesThatKeepFailingDoNotHoldBackTheDevicesOwnChanges() async throws {
        let peer = try await Self.scriptedPeer { open, request in Self.savingEverything(open, request) }
        defer { Task { await peer.stop() } }
        let container = CKContainer(identifier: "iCloud.test", configuration: TestCertificates.client(port: peer.port))
        let device = EngineDevice(name: "A")
        // The app's own subscription: the engine saves none of its own.
        device.start(database: container.privateCloudDatabase, subscriptionID: "app-subscription")
        let id = CKRecord.ID(recordName: "item", zoneID: CKRecordZone.ID(zoneName: "Items"))
        try device.edit(id, value: 1)

        try await eventually(timeout: .seconds(60)) {
            device.store.withLockedValue { $0.acknowledged[id] } == [1]
        }
        let kinds = peer.opens.compactMap(\.request).map { request -> String in
            switch request {
            case .fetchDatabaseChanges: "fetch"
            case .modifyRecords: "send"
            default: "other"
            }
        }
        #expect(kinds.contains("fetch"), "\(kinds)")
        #expect(kinds.firstIndex(of: "fetch").map { $0 < (kinds.firstIndex(of: "send") ?? 0) } == true, "\(kinds)")
        await device.stop()
    }

    /// A send whose operation the server registered (`Persisted`) but no longer knows when the
    /// connection comes back (`Resume` answered `unknownOperation`): its changes stay pending and
    /// go out again, never reported as failed.
    @Test func aSendTheServerForgotIsSentAgain() async throws {
        let modifies = Mutex(0)
        let peer = try await Self.scriptedPeer { open, request in
            let first = modifies.withLock { count -> Bool in
                count += 1
                return count == 1
            }
            // The first: registered, then the connection drops before anything ran.
            if first { return FakeReply(persisted: true, closeAfterEvents: 0) }
            return Self.savingEverything(open, request)
        }
        defer { Task { await peer.stop() } }
        let container = CKContainer(identifier: "iCloud.test", configuration: TestCertificates.client(port: peer.port))
        let device = EngineDevice(name: "A")
        device.start(database: container.privateCloudDatabase, subscriptionID: "app-subscription")
        let id = CKRecord.ID(recordName: "item", zoneID: CKRecordZone.ID(zoneName: "Items"))
        try device.edit(id, value: 1)

        try await eventually(timeout: .seconds(60)) {
            device.store.withLockedValue { $0.acknowledged[id] } == [1]
        }
        #expect(peer.resumes.count >= 1)
        #expect(modifies.withLock { $0 } >= 2)
        let store = device.store.withLockedValue { $0 }
        #expect(store.otherFailures.isEmpty, "\(store.otherFailures)")
        await device.stop()
    }

    /// The app edits a record again after the delegate built the batch carrying its previous
    /// value, before the engine sent it: the new value is sent too, once the batch is back.
    @Test func anEditWhileItsBatchIsBuiltIsSentAfterIt() async throws {
        let peer = try await Self.scriptedPeer { open, request in Self.savingEverything(open, request) }
        defer { Task { await peer.stop() } }
        let container = CKContainer(identifier: "iCloud.test", configuration: TestCertificates.client(port: peer.port))
        let device = EngineDevice(name: "A")
        let id = CKRecord.ID(recordName: "item", zoneID: CKRecordZone.ID(zoneName: "Items"))
        let editedAgain = Mutex(false)
        device.afterBuildingBatch.withLockedValue {
            $0 = {
                let first = editedAgain.withLock { edited -> Bool in
                    defer { edited = true }
                    return !edited
                }
                if first { try? device.edit(id, value: 2) }
            }
        }
        device.start(database: container.privateCloudDatabase, subscriptionID: "app-subscription")
        try device.edit(id, value: 1)

        try await eventually(timeout: .seconds(60)) {
            device.store.withLockedValue { $0.acknowledged[id] } == [1, 2]
        }
        #expect(device.store.withLockedValue { $0.local.isEmpty })
        #expect(try device.engine.state.pendingRecordZoneChanges.isEmpty)
        await device.stop()
    }

    /// A server whose database change feed keeps failing with `serviceUnavailable` and which
    /// answers modifies with `modify`.
    private static func scriptedPeer(
        modify: @escaping @Sendable (Wire.Open, Wire.ModifyRecordsRequest) -> FakeReply
    ) async throws -> FakePeer {
        try await FakePeer.start { open, _ in
            switch open.request {
            case .fetchUserRecordID:
                let user = Wire.RecordID(recordName: "_alice", zoneID: Wire.RecordZoneID(zoneName: "_defaultZone"))
                return FakeReply(result: .fetchUserRecordID(Wire.FetchUserRecordIDResult(userRecordID: user)))
            case .watchNotifications:
                return FakeReply(payloads: [NotificationWatchTests.live(0)], hang: true)
            case .fetchDatabaseChanges:
                return FakeReply(
                    error: Wire.OperationError(code: .serviceUnavailable, message: "try again", retryAfterSeconds: 0.05))
            case .modifyRecords(let request):
                return modify(open, request)
            default:
                return FakeReply(error: Wire.OperationError(code: .serverRejectedRequest, message: "not scripted"))
            }
        }
    }

    /// Every record of the request saved, with change tag `tag-1`.
    private static func savingEverything(_ open: Wire.Open, _ request: Wire.ModifyRecordsRequest) -> FakeReply {
        let saves = request.recordsToSave.map { record -> Wire.Event.Payload in
            var saved = record
            saved.recordChangeTag = "tag-1"
            return .modifyRecords(.init(callback: .perRecordSave(.init(recordID: record.recordID, outcome: .record(saved)))))
        }
        return FakeReply(payloads: saves, persisted: open.configuration?.isLongLived == true)
    }
}
