import CirrusKit
import CirrusModel
import Foundation
import NIOConcurrencyHelpers
import Testing

/// `CKMarkNotificationsReadOperation` and `CKModifyBadgeOperation` against the whole stack.
@Suite("Notification read marks and badge, end to end")
struct NotificationMarksEndToEndTests {
    /// A database subscription that badges, and `count` notes saved: `count` notifications.
    private func notify(_ container: CKContainer, count: Int) async throws {
        let subscription = CKDatabaseSubscription(subscriptionID: "badged")
        let info = CKSubscription.NotificationInfo()
        info.shouldBadge = true
        subscription.notificationInfo = info
        _ = try await container.privateCloudDatabase.save(subscription)
        for index in 0..<count {
            _ = try await container.privateCloudDatabase.save(CKRecord(recordType: "Note", recordID: CKRecord.ID(recordName: "n\(index)")))
        }
    }

    private func markRead(_ container: CKContainer, _ ids: [CKNotification.ID]) async
        -> (marked: [CKNotification.ID]?, perID: [CKNotification.ID: Bool], error: (any Error)?)
    {
        let operation = CKMarkNotificationsReadOperation(notificationIDsToMarkRead: ids)
        let perID = NIOLockedValueBox<[CKNotification.ID: Bool]>([:])
        let outcome = NIOLockedValueBox<([CKNotification.ID]?, (any Error)?)>((nil, nil))
        operation.perNotificationIDResultBlock = { id, result in
            perID.withLockedValue { $0[id] = (try? result.get()) != nil }
        }
        operation.markNotificationsReadCompletionBlock = { marked, error in outcome.withLockedValue { $0 = (marked, error) } }
        container.add(operation)
        await finished(operation)
        let (marked, error) = outcome.withLockedValue { $0 }
        return (marked, perID.withLockedValue { $0 }, error)
    }

    @Test func markedNotificationsAreFetchedAsReadAndOthersIDsAreUnknown() async throws {
        try await withStack { container in
            let alice = container("alice")
            let bob = container("bob")
            try await notify(alice, count: 3)
            try await notify(bob, count: 1)
            let mine = try await fetchNotifications(alice, since: nil)
            #expect(mine.count == 3)
            #expect(mine.allSatisfy { !$0.isRead })
            let bobs = try await fetchNotifications(bob, since: nil)
            let bobsID = try #require(bobs.first?.notificationID)
            let ids = mine.prefix(2).compactMap(\.notificationID)

            let unknown = CKNotification.ID(rawValue: "no-such-notification")
            let (marked, perID, error) = await markRead(alice, ids + [unknown, bobsID])
            #expect(marked == ids)
            #expect(perID[ids[0]] == true && perID[ids[1]] == true)
            #expect(perID[unknown] == false && perID[bobsID] == false)
            let failure = try #require(error as? CKError)
            #expect(failure.code == .partialFailure)
            let items = try #require(failure.partialErrorsByItemID)
            #expect((items[AnyHashable(unknown.rawValue)] as? CKError)?.code == .unknownItem)
            #expect((items[AnyHashable(bobsID.rawValue)] as? CKError)?.code == .unknownItem)

            let again = try await fetchNotifications(alice, since: nil)
            #expect(again.map(\.isRead) == [true, true, false])
            // Bob's notification was not touched.
            #expect(try await fetchNotifications(bob, since: nil).first?.isRead == false)
            // Marking twice is no error.
            let (remarked, _, noError) = await markRead(alice, [ids[0]])
            #expect(remarked == [ids[0]])
            #expect(noError == nil)
        }
    }

    @Test func theBadgeCountsFromTheValueSet() async throws {
        try await withStack { container in
            let alice = container("alice")
            try await notify(alice, count: 2)
            let before = try await fetchNotifications(alice, since: nil)
            #expect(before.compactMap { $0.badge?.intValue } == [1, 2])

            let operation = CKModifyBadgeOperation(badgeValue: 10)
            let result = NIOLockedValueBox<Result<Void, any Error>?>(nil)
            operation.modifyBadgeResultBlock = { outcome in result.withLockedValue { $0 = outcome } }
            alice.add(operation)
            await finished(operation)
            try #require(result.withLockedValue { $0 }).get()
            _ = try await alice.privateCloudDatabase.save(CKRecord(recordType: "Note", recordID: CKRecord.ID(recordName: "later")))
            #expect(try await fetchNotifications(alice, since: nil).last?.badge?.intValue == 11)

            let cleared = CKModifyBadgeOperation(badgeValue: 0)
            alice.add(cleared)
            await finished(cleared)
            _ = try await alice.privateCloudDatabase.save(CKRecord(recordType: "Note", recordID: CKRecord.ID(recordName: "cleared")))
            #expect(try await fetchNotifications(alice, since: nil).last?.badge?.intValue == 1)

            // Out of range: refused before anything is sent.
            let negative = CKModifyBadgeOperation(badgeValue: -1)
            let refused = NIOLockedValueBox<(any Error)?>(nil)
            negative.modifyBadgeCompletionBlock = { error in refused.withLockedValue { $0 = error } }
            alice.add(negative)
            await finished(negative)
            #expect((refused.withLockedValue { $0 } as? CKError)?.code == .invalidArguments)
        }
    }
}
