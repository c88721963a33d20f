import CirrusKit
import CirrusModel
import CirrusServer
import CirrusTestSupport
import Foundation
import MetricsTestKit
import NIOConcurrencyHelpers
import Testing

/// What a device's notification stream delivered, in order.
final class PushLog: Sendable {
    private let notifications = NIOLockedValueBox<[CKNotification]>([])

    func append(_ notification: CKNotification) { notifications.withLockedValue { $0.append(notification) } }

    var all: [CKNotification] { notifications.withLockedValue { $0 } }

    /// The record names of its query notifications, in order.
    var recordNames: [String] {
        all.compactMap { ($0 as? CKQueryNotification)?.recordID?.recordName }
    }

    var count: Int { notifications.withLockedValue { $0.count } }
}

/// Iterates `container.notifications(since:)` into a log until cancelled.
func collectNotifications(
    of container: CKContainer, since token: CKServerChangeToken?, into log: PushLog
) -> Task<(any Error)?, Never> {
    Task {
        do {
            for try await notification in container.notifications(since: token) { log.append(notification) }
            return nil
        } catch {
            return error
        }
    }
}

/// The current end of the caller's notification feed (what an app does before it watches).
func currentNotificationToken(_ container: CKContainer) async throws -> CKServerChangeToken {
    var token: CKServerChangeToken?
    while true {
        let operation = CKFetchNotificationChangesOperation(previousServerChangeToken: token)
        let result = NIOLockedValueBox<Result<(serverChangeToken: CKServerChangeToken, moreComing: Bool), any Error>?>(nil)
        operation.fetchNotificationChangesResultBlock = { outcome in result.withLockedValue { $0 = outcome } }
        container.add(operation)
        await finished(operation)
        let (next, moreComing) = try #require(result.withLockedValue { $0 }).get()
        token = next
        if !moreComing { return next }
    }
}

/// Every notification of the caller after `token`, with CKFetchNotificationChangesOperation.
func fetchNotifications(_ container: CKContainer, since token: CKServerChangeToken?) async throws -> [CKNotification] {
    let operation = CKFetchNotificationChangesOperation(previousServerChangeToken: token)
    let collected = NIOLockedValueBox<[CKNotification]>([])
    let failure = NIOLockedValueBox<(any Error)?>(nil)
    operation.notificationChangedBlock = { notification in collected.withLockedValue { $0.append(notification) } }
    operation.fetchNotificationChangesResultBlock = { result in
        if case .failure(let error) = result { failure.withLockedValue { $0 = error } }
    }
    container.add(operation)
    await finished(operation)
    if let error = failure.withLockedValue({ $0 }) { throw error }
    return collected.withLockedValue { $0 }
}

@Suite("Subscriptions and pushed notifications, end to end")
struct SubscriptionsEndToEndTests {
    static let notes = CKRecordZone.ID(zoneName: "Notes")

    static func note(_ name: String, _ priority: Int = 1) -> CKRecord {
        let record = CKRecord(recordType: "Note", recordID: CKRecord.ID(recordName: name, zoneID: notes))
        record["title"] = name
        record["priority"] = priority
        return record
    }

    @Test func aChangeOnOneDeviceIsPushedToTheOtherWhichThenConverges() async throws {
        try await withStack { container in
            let deviceA = container("alice")
            let deviceB = container("alice")
            let databaseA = deviceA.privateCloudDatabase
            let databaseB = deviceB.privateCloudDatabase
            _ = try await databaseA.save(CKRecordZone(zoneID: Self.notes))
            let subscription = CKRecordZoneSubscription(zoneID: Self.notes, subscriptionID: "notes-zone")
            subscription.notificationInfo = CKSubscription.NotificationInfo()
            subscription.notificationInfo?.shouldSendContentAvailable = true
            _ = try await databaseB.save(subscription)

            let pushed = PushLog()
            let watch = collectNotifications(of: deviceB, since: try await currentNotificationToken(deviceB), into: pushed)
            var zoneToken: CKServerChangeToken?
            var local: [CKRecord.ID: CKRecord] = [:]
            for round in 0..<3 {
                _ = try await databaseA.modifyRecords(
                    saving: [Self.note("n\(round)-a"), Self.note("n\(round)-b")], deleting: round == 2 ? [CKRecord.ID(recordName: "n0-a", zoneID: Self.notes)] : [])
                try await eventually { pushed.count == round + 1 }
                let notification = try #require(pushed.all.last as? CKRecordZoneNotification)
                #expect(notification.recordZoneID == Self.notes)
                #expect(notification.subscriptionID == "notes-zone")
                #expect(notification.databaseScope == .private)
                // B reacts to the push by fetching the zone's changes.
                let changes = try await databaseB.recordZoneChanges(inZoneWith: Self.notes, since: zoneToken)
                for (id, result) in changes.modificationResultsByID {
                    local[id] = try result.get().record
                }
                for deletion in changes.deletions { local[deletion.recordID] = nil }
                zoneToken = changes.changeToken
            }
            let server = try await databaseA.records(
                matching: CKQuery(recordType: "Note", predicate: CKPredicate(value: true)), inZoneWith: Self.notes)
            let serverNames = Set(server.matchResults.map(\.0.recordName))
            #expect(Set(local.keys.map(\.recordName)) == serverNames)
            #expect(serverNames == ["n0-b", "n1-a", "n1-b", "n2-a", "n2-b"])
            watch.cancel()
            let ending = await watch.value
            #expect(ending == nil || ending is CancellationError || (ending as? CKError)?.code == .operationCancelled)
        }
    }

    @Test func eachLivePushRecordsItsDeliveryLag() async throws {
        let testMetrics = TestMetrics()
        try await withStack(clock: nil, metrics: ServerMetrics(factory: testMetrics)) { container, _ in
            let deviceA = container("alice")
            let deviceB = container("alice")
            _ = try await deviceA.privateCloudDatabase.save(CKRecordZone(zoneID: Self.notes))
            let subscription = CKRecordZoneSubscription(zoneID: Self.notes, subscriptionID: "notes-zone")
            subscription.notificationInfo = CKSubscription.NotificationInfo()
            _ = try await deviceB.privateCloudDatabase.save(subscription)
            // One notification before the watch starts: read as catch-up, not timed as a push.
            let start = try await currentNotificationToken(deviceB)
            _ = try await deviceA.privateCloudDatabase.save(Self.note("before"))
            let pushed = PushLog()
            let watch = collectNotifications(of: deviceB, since: start, into: pushed)
            try await eventually { pushed.count == 1 }
            for round in 1...2 {
                _ = try await deviceA.privateCloudDatabase.save(Self.note("n\(round)"))
                try await eventually { pushed.count == round + 1 }
            }
            watch.cancel()
            _ = await watch.value
            let timer = try testMetrics.expectTimer(ServerMetrics.Name.notificationDeliverySeconds)
            #expect(timer.values.count == 2)
            #expect(timer.values.allSatisfy { $0 >= 0 && $0 < 600 * 1_000_000_000 })
        }
    }

    @Test func anOfflineDeviceGetsExactlyWhatItMissedInOrderWhenItReconnects() async throws {
        try await withStack(clock: nil) { container, internals in
            let proxy = try await CuttingProxy.start(targetPort: internals.port) { nil }
            let deviceA = container("alice")
            let deviceB = CKContainer(
                identifier: "iCloud.com.example.notes",
                configuration: TestCertificates.client(port: proxy.port, user: "alice"))
            _ = try await deviceA.privateCloudDatabase.save(CKRecordZone(zoneID: Self.notes))
            _ = try await deviceA.privateCloudDatabase.save(
                CKQuerySubscription(
                    recordType: "Note", predicate: CKPredicate(value: true), subscriptionID: "all-notes",
                    options: [.firesOnRecordCreation, .firesOnRecordUpdate, .firesOnRecordDeletion]))

            let pushed = PushLog()
            let watch = collectNotifications(of: deviceB, since: try await currentNotificationToken(deviceB), into: pushed)
            _ = try await deviceA.privateCloudDatabase.save(Self.note("online"))
            try await eventually { pushed.recordNames == ["online"] }

            // B loses its network; A goes on.
            proxy.refuseConnections(true)
            proxy.cutAll()
            let missed = (0..<25).map { "missed-\($0)" }
            for name in missed { _ = try await deviceA.privateCloudDatabase.save(Self.note(name)) }
            #expect(pushed.recordNames == ["online"])
            proxy.refuseConnections(false)
            try await eventually(timeout: .seconds(30)) { pushed.count >= 26 }
            _ = try await deviceA.privateCloudDatabase.save(Self.note("after"))
            try await eventually { pushed.count >= 27 }
            #expect(pushed.recordNames == ["online"] + missed + ["after"])
            #expect(Set(pushed.all.compactMap(\.notificationID)).count == 27)
            #expect(proxy.acceptedCount >= 2)
            watch.cancel()
            _ = await watch.value

            // A device that was switched off resumes from the token of the last notification it handled.
            let lastHandled = try #require(pushed.all[10].changeToken)
            let later = PushLog()
            let resumed = collectNotifications(of: container("alice"), since: lastHandled, into: later)
            try await eventually { later.count >= 16 }
            #expect(later.recordNames == Array(missed[10...]) + ["after"])
            resumed.cancel()
            _ = await resumed.value
            await proxy.stop()
        }
    }

    @Test func theHandlerStyleDeliversOnItsQueueInOrder() async throws {
        try await withStack { container in
            let alice = container("alice")
            _ = try await alice.privateCloudDatabase.save(CKDatabaseSubscription(subscriptionID: "db"))
            let names = NIOLockedValueBox<[CKNotification.NotificationType]>([])
            let queue = DispatchQueue(label: "handler")
            let watch = alice.watchNotifications(since: try await currentNotificationToken(alice), queue: queue) { notification in
                dispatchPrecondition(condition: .onQueue(queue))
                names.withLockedValue { $0.append(notification.notificationType) }
            }
            _ = try await alice.privateCloudDatabase.save(CKRecord(recordType: "Note"))
            _ = try await alice.privateCloudDatabase.save(CKRecordZone(zoneName: "Other"))
            try await eventually { names.withLockedValue { $0.count } == 2 }
            #expect(names.withLockedValue { $0 } == [.database, .database])
            #expect(watch.lastChangeToken != nil)
            watch.cancel()
        }
    }

    @Test func anotherUsersSubscriptionNeverFiresOnMyData() async throws {
        try await withStack { container in
            let alice = container("alice")
            let bob = container("bob")
            _ = try await bob.privateCloudDatabase.save(
                CKQuerySubscription(
                    recordType: "Note", predicate: CKPredicate(value: true), subscriptionID: "bob-notes",
                    options: [.firesOnRecordCreation]))
            _ = try await bob.privateCloudDatabase.save(CKDatabaseSubscription(subscriptionID: "bob-db"))
            let bobStart = try await currentNotificationToken(bob)
            let bobsPush = PushLog()
            let watch = collectNotifications(of: bob, since: bobStart, into: bobsPush)

            // Alice saves the same kind of record in her own database, with the same subscription IDs.
            _ = try await alice.privateCloudDatabase.save(
                CKQuerySubscription(
                    recordType: "Note", predicate: CKPredicate(value: true), subscriptionID: "bob-notes",
                    options: [.firesOnRecordCreation]))
            let secret = CKRecord(recordType: "Note", recordID: CKRecord.ID(recordName: "alice-secret"))
            secret["title"] = "for alice only"
            _ = try await alice.privateCloudDatabase.save(secret)
            let alices = try await fetchNotifications(alice, since: nil)
            #expect(alices.compactMap { ($0 as? CKQueryNotification)?.recordID?.recordName } == ["alice-secret"])
            #expect(alices.first?.subscriptionOwnerUserRecordID?.recordName == "_alice")

            // Bob's own write is the first and only thing Bob hears of.
            _ = try await bob.privateCloudDatabase.save(CKRecord(recordType: "Note", recordID: CKRecord.ID(recordName: "bobs")))
            try await eventually { bobsPush.count >= 2 }
            try await Task.sleep(for: .milliseconds(200))
            #expect(bobsPush.count == 2)
            #expect(bobsPush.recordNames == ["bobs"])
            let bobs = try await fetchNotifications(bob, since: bobStart)
            #expect(bobs.map(\.subscriptionID) == ["bob-notes", "bob-db"])
            #expect(bobs.allSatisfy { $0.subscriptionOwnerUserRecordID?.recordName == "_bob" })
            // Alice's token is no good for Bob's feed.
            let alicesToken = try await currentNotificationToken(alice)
            await #expect(throws: CKError.self) { _ = try await fetchNotifications(bob, since: alicesToken) }
            watch.cancel()
        }
    }

    @Test func aDeletedSubscriptionStopsFiringAndFiresOnceFiresOnce() async throws {
        try await withStack { container in
            let database = container("alice").privateCloudDatabase
            let once = CKQuerySubscription(
                recordType: "Note", predicate: CKPredicate(format: "priority > %d", 5), subscriptionID: "once",
                options: [.firesOnRecordCreation, .firesOnce])
            let deleted = CKQuerySubscription(
                recordType: "Note", predicate: CKPredicate(value: true), subscriptionID: "deleted",
                options: [.firesOnRecordCreation])
            _ = try await database.modifySubscriptions(saving: [once, deleted], deleting: [])
            let start = try await currentNotificationToken(database.container)

            let low = CKRecord(recordType: "Note", recordID: CKRecord.ID(recordName: "low"))
            low["priority"] = 1
            let high1 = CKRecord(recordType: "Note", recordID: CKRecord.ID(recordName: "high1"))
            high1["priority"] = 9
            _ = try await database.modifyRecords(saving: [low, high1], deleting: [])
            #expect(try await database.deleteSubscription(withID: "deleted") == "deleted")
            let high2 = CKRecord(recordType: "Note", recordID: CKRecord.ID(recordName: "high2"))
            high2["priority"] = 9
            _ = try await database.save(high2)

            let fired = try await fetchNotifications(database.container, since: start)
            let summary = fired.map { "\($0.subscriptionID ?? "?"):\(($0 as? CKQueryNotification)?.recordID?.recordName ?? "?")" }
            #expect(summary == ["once:high1", "deleted:low", "deleted:high1"])
            #expect(fired.allSatisfy { ($0 as? CKQueryNotification)?.queryNotificationReason == .recordCreated })
            // Both are gone now.
            #expect(try await database.allSubscriptions().isEmpty)
            await #expect(throws: CKError.self) { _ = try await database.subscription(for: "once") }
        }
    }

    @Test func invalidSubscriptionsGetCloudKitsErrors() async throws {
        try await withStack { container in
            let alice = container("alice")
            // Zone subscriptions need a custom zone that exists; database subscriptions a non-public database.
            await #expect(throws: CKError.self) {
                _ = try await alice.privateCloudDatabase.save(
                    CKRecordZoneSubscription(zoneID: CKRecordZone.ID(zoneName: "Missing"), subscriptionID: "z"))
            }
            do {
                _ = try await alice.publicCloudDatabase.save(CKDatabaseSubscription(subscriptionID: "d"))
                Issue.record("a database subscription was saved in the public database")
            } catch let error as CKError {
                #expect(error.code == .invalidArguments || error.code == .partialFailure)
            }
            // Query subscriptions in the public database see every user's public records.
            _ = try await alice.publicCloudDatabase.save(
                CKQuerySubscription(
                    recordType: "Post", predicate: CKPredicate(value: true), subscriptionID: "posts",
                    options: [.firesOnRecordCreation]))
            let start = try await currentNotificationToken(alice)
            _ = try await container("bob").publicCloudDatabase.save(CKRecord(recordType: "Post"))
            let fired = try await fetchNotifications(alice, since: start)
            #expect(fired.count == 1)
            #expect((fired.first as? CKQueryNotification)?.databaseScope == .public)
        }
    }
}
