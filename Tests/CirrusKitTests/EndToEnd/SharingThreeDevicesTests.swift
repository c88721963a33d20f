import CirrusKit
import CirrusTestSupport
import Foundation
import NIOConcurrencyHelpers
import Testing

/// A real `cirrusd` process (from this build, data in a temporary directory), three users on
/// their own connections: alice shares a zone with bob and dave (both read-write), everyone
/// edits at once, the three converge through the change feeds and pushed notifications, then
/// alice removes dave and his connection, still open, loses the zone and its notifications.
@Suite("Sharing: three devices against cirrusd", .timeLimit(.minutes(5)))
struct SharingThreeDevicesTests {
    /// `cirrusd --port 0` on a fresh data directory; stopped (and its data removed) after `body`.
    private func withCirrusd(_ body: (Int) async throws -> Void) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cirrusd-share-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let cirrusd = try await CirrusdChild.launch(["--port", "0", "--data-dir", directory, "--handshake-timeout", "60s"])
        defer { cirrusd.stop() }
        let port = cirrusd.port
        try await body(port)
    }

    @Test func threeDevicesConvergeAndARemovedOneIsCutOffOnItsOpenConnection() async throws {
        try await withCirrusd { port in
            func device(_ user: String) -> CKContainer {
                CKContainer(identifier: "iCloud.com.example.family", configuration: TestCertificates.client(port: port, user: user))
            }
            let alice = device("alice")
            let bob = device("bob")
            let dave = device("dave")
            for user in [alice, bob, dave] { _ = try await user.userRecordID() }

            // Alice shares her zone whole with bob and dave; both accept.
            let ownZone = CKRecordZone.ID(zoneName: "Family")
            _ = try await alice.privateCloudDatabase.save(CKRecordZone(zoneID: ownZone))
            let share = CKShare(recordZoneID: ownZone)
            for name in ["_bob", "_dave"] {
                let participant = try await alice.shareParticipant(for: CKUserIdentity.LookupInfo(userRecordID: CKRecord.ID(recordName: name)))
                participant.permission = .readWrite
                share.addParticipant(participant)
            }
            let saved = try #require(try await alice.privateCloudDatabase.save(share) as? CKShare)
            let url = try #require(saved.url)
            for participant in [bob, dave] {
                _ = try await participant.accept(try await participant.shareMetadata(for: url))
            }

            // Subscriptions: alice's private database, bob's and dave's shared databases.
            _ = try await alice.privateCloudDatabase.save(CKDatabaseSubscription(subscriptionID: "mine"))
            _ = try await bob.sharedCloudDatabase.save(CKDatabaseSubscription(subscriptionID: "shared"))
            _ = try await dave.sharedCloudDatabase.save(CKDatabaseSubscription(subscriptionID: "shared"))
            let logs = [PushLog(), PushLog(), PushLog()]
            var watches: [Task<(any Error)?, Never>] = []
            for (container, log) in zip([alice, bob, dave], logs) {
                watches.append(collectNotifications(of: container, since: try await currentNotificationToken(container), into: log))
            }

            // Everyone edits at once.
            let zoneID = CKRecordZone.ID(zoneName: "Family", ownerName: "_alice")
            try await withThrowingTaskGroup(of: Void.self) { group in
                for (database, zone, prefix) in [
                    (alice.privateCloudDatabase, ownZone, "a"), (bob.sharedCloudDatabase, zoneID, "b"),
                    (dave.sharedCloudDatabase, zoneID, "d"),
                ] {
                    for index in 0..<5 {
                        group.addTask {
                            let record = CKRecord(recordType: "Item", recordID: CKRecord.ID(recordName: "\(prefix)\(index)", zoneID: zone))
                            record["by"] = prefix
                            _ = try await database.save(record)
                        }
                    }
                }
                try await group.waitForAll()
            }

            // Each device is told, and each one's change feed holds all fifteen records.
            do {
                try await eventually { logs.allSatisfy { $0.count > 0 } }
            } catch {
                Issue.record("pushed notifications (alice, bob, dave): \(logs.map(\.count))")
                throw error
            }
            let expected = Set(["a", "b", "d"].flatMap { prefix in (0..<5).map { "\(prefix)\($0)" } })
            func names(_ database: CKDatabase, _ zone: CKRecordZone.ID) async throws -> Set<String> {
                let changes = try await database.recordZoneChanges(inZoneWith: zone, since: nil)
                return Set(changes.modificationResultsByID.keys.map(\.recordName)).subtracting([CKRecordNameZoneWideShare])
            }
            #expect(try await names(alice.privateCloudDatabase, ownZone) == expected)
            #expect(try await names(bob.sharedCloudDatabase, zoneID) == expected)
            #expect(try await names(dave.sharedCloudDatabase, zoneID) == expected)
            let daveDatabaseToken = try await dave.sharedCloudDatabase.databaseChanges(since: nil).changeToken

            // Alice removes dave. His connection stays open: the zone is gone for him, his
            // database changes say so, and later edits notify bob but not him.
            let current = try #require(
                try await alice.privateCloudDatabase.record(for: CKRecord.ID(recordName: CKRecordNameZoneWideShare, zoneID: ownZone))
                    as? CKShare)
            for participant in current.participants where participant.userIdentity.userRecordID?.recordName == "_dave" {
                current.removeParticipant(participant)
            }
            _ = try await alice.privateCloudDatabase.save(current)
            let daveToken = try await currentNotificationToken(dave)
            let bobBefore = logs[1].count
            let later = CKRecord(recordType: "Item", recordID: CKRecord.ID(recordName: "later", zoneID: zoneID))
            _ = try await bob.sharedCloudDatabase.save(later)
            try await eventually { logs[1].count > bobBefore }
            #expect(try await fetchNotifications(dave, since: daveToken).isEmpty, "dave was notified after his removal")
            let afterRemoval = try await dave.sharedCloudDatabase.databaseChanges(since: daveDatabaseToken)
            #expect(afterRemoval.deletions.map(\.zoneID) == [zoneID])
            do {
                _ = try await dave.sharedCloudDatabase.record(for: later.recordID)
                Issue.record("dave read a record after his removal")
            } catch let error as CKError {
                #expect(error.code == .zoneNotFound)
            }
            #expect(try await names(bob.sharedCloudDatabase, zoneID) == expected.union(["later"]))

            for watch in watches { watch.cancel() }
            for watch in watches { _ = await watch.value }
        }
    }
}
