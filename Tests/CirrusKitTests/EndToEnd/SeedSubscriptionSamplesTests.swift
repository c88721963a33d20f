import CirrusKit
import CirrusModel
import Foundation
import NIOConcurrencyHelpers
import Testing

// The subscription and notification samples of ../shared/seeds/002 (CKModifySubscriptionsOperation,
// CKFetchSubscriptionsOperation, CKFetchNotificationChangesOperation), copied verbatim between
// the `// --- sample` markers and run against cirrusd over TLS. `NSPredicate(format:)` does not
// exist on Linux: this file names CirrusKit's `CKPredicate` NSPredicate, so the sample's text is
// unchanged. One change inside: `case .success(let subscription):` whose `subscription` the
// sample never uses became `case .success(_):`, because this package builds without warnings.

private typealias NSPredicate = CKPredicate

private let log = NIOLockedValueBox<[String]>([])
private func print(_ line: String) { log.withLockedValue { $0.append(line) } }

private let storedNotificationToken = NIOLockedValueBox<CKServerChangeToken?>(nil)
private func loadNotificationToken() -> CKServerChangeToken? { storedNotificationToken.withLockedValue { $0 } }
private func saveNotificationToken(_ token: CKServerChangeToken) { storedNotificationToken.withLockedValue { $0 = token } }

@Suite("Seed subscription samples against cirrusd", .serialized)
struct SeedSubscriptionSamplesTests {
    @Test func modifySubscriptionsSample() async throws {
        try await withStack { container in
            let database = container("alice").privateCloudDatabase
            let zoneID = CKRecordZone.ID(zoneName: "Tasks")
            _ = try await database.save(CKRecordZone(zoneID: zoneID))
            log.withLockedValue { $0.removeAll() }

            // --- sample
            // Create zone subscription
            let zoneSubscription = CKRecordZoneSubscription(zoneID: zoneID)
            zoneSubscription.notificationInfo = CKSubscription.NotificationInfo()
            zoneSubscription.notificationInfo?.shouldSendContentAvailable = true

            // Create query subscription
            let predicate = NSPredicate(format: "priority > %d", 5)
            let querySubscription = CKQuerySubscription(
                recordType: "Task",
                predicate: predicate,
                subscriptionID: "high-priority-tasks",
                options: [.firesOnRecordCreation, .firesOnRecordUpdate]
            )

            let operation = CKModifySubscriptionsOperation(
                subscriptionsToSave: [zoneSubscription, querySubscription],
                subscriptionIDsToDelete: nil
            )

            operation.perSubscriptionSaveBlock = { subscriptionID, result in
                switch result {
                case .success(_):
                    print("Subscription saved: \(subscriptionID)")
                case .failure(let error):
                    print("Subscription failed: \(error)")
                }
            }

            database.add(operation)
            // --- end of sample
            await finished(operation)

            #expect(log.withLockedValue { $0 } == [
                "Subscription saved: \(zoneSubscription.subscriptionID)", "Subscription saved: high-priority-tasks",
            ])
            let saved = try await database.allSubscriptions()
            #expect(saved.map(\.subscriptionID) == [zoneSubscription.subscriptionID, "high-priority-tasks"])
            let query = try #require(saved.last as? CKQuerySubscription)
            #expect(query.recordType == "Task")
            #expect(query.querySubscriptionOptions == [.firesOnRecordCreation, .firesOnRecordUpdate])
            #expect(saved.first?.notificationInfo?.shouldSendContentAvailable == true)
            #expect((saved.first as? CKRecordZoneSubscription)?.zoneID == zoneID)
        }
    }

    @Test func fetchSubscriptionsSample() async throws {
        try await withStack { container in
            let database = container("alice").privateCloudDatabase
            _ = try await database.save(CKDatabaseSubscription(subscriptionID: "sub1"))
            _ = try await database.save(CKDatabaseSubscription(subscriptionID: "sub2"))
            _ = try await database.save(CKDatabaseSubscription(subscriptionID: "sub3"))
            log.withLockedValue { $0.removeAll() }

            // --- sample
            // Fetch specific subscriptions
            let operation = CKFetchSubscriptionsOperation(subscriptionIDs: ["sub1", "sub2"])

            // Or fetch all
            let allOperation = CKFetchSubscriptionsOperation.fetchAllSubscriptionsOperation()

            operation.perSubscriptionResultBlock = { subscriptionID, result in
                if case .success(let subscription) = result {
                    print("Found subscription: \(subscription)")
                }
            }

            database.add(operation)
            // --- end of sample
            await finished(operation)
            #expect(log.withLockedValue { $0.count } == 2)
            #expect(log.withLockedValue { $0 }.allSatisfy { $0.hasPrefix("Found subscription: ") })

            let all = NIOLockedValueBox<[String]>([])
            allOperation.perSubscriptionResultBlock = { subscriptionID, _ in all.withLockedValue { $0.append(subscriptionID) } }
            database.add(allOperation)
            await finished(allOperation)
            #expect(all.withLockedValue { $0 } == ["sub1", "sub2", "sub3"])
        }
    }

    @Test func fetchNotificationChangesSample() async throws {
        try await withStack { makeContainer in
            let container = makeContainer("alice")
            let database = container.privateCloudDatabase
            _ = try await database.save(CKQuerySubscription(
                recordType: "Task", predicate: CKPredicate(format: "priority > %d", 5), subscriptionID: "high-priority-tasks",
                options: [.firesOnRecordCreation, .firesOnRecordUpdate]))
            _ = try await database.save(CKDatabaseSubscription(subscriptionID: "everything"))
            for (name, priority) in [("urgent", 9), ("later", 1)] {
                let task = CKRecord(recordType: "Task", recordID: CKRecord.ID(recordName: name))
                task["priority"] = priority
                _ = try await database.save(task)
            }
            log.withLockedValue { $0.removeAll() }
            storedNotificationToken.withLockedValue { $0 = nil }

            for _ in 0..<2 {
                // --- sample
                var notificationChangeToken: CKServerChangeToken? = loadNotificationToken()

                let operation = CKFetchNotificationChangesOperation(
                    previousServerChangeToken: notificationChangeToken
                )

                operation.notificationChangedBlock = { notification in
                    guard let queryNotification = notification as? CKQueryNotification else { return }
                    
                    if let recordID = queryNotification.recordID {
                        print("Record changed: \(recordID)")
                    }
                }

                operation.fetchNotificationChangesResultBlock = { result in
                    switch result {
                    case .success((let newToken, _)):
                        notificationChangeToken = newToken
                        saveNotificationToken(newToken)
                    case .failure(let error):
                        print("Failed to fetch notifications: \(error)")
                    }
                }

                container.add(operation)
                // --- end of sample
                await finished(operation)
                _ = notificationChangeToken
            }
            // The first run reads the one query notification (and two database ones it skips); the
            // second, from the saved token, reads nothing.
            let lines = log.withLockedValue { $0 }
            #expect(lines.count == 1)
            #expect(lines.first?.hasPrefix("Record changed: ") == true)
            #expect(lines.first?.contains("urgent") == true)
            #expect(loadNotificationToken() != nil)
        }
    }
}
