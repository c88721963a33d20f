import CirrusStore
import CirrusWire
import Foundation
import Testing

@testable import CirrusServer

/// The hub alone, on a real store: what a watch takes after its position, and when it must read
/// its feed instead.
@Suite("Notification hub")
struct NotificationHubTests {
    static let feed = NotificationFeedKey(container: container, user: "_alice")
    static let database = DatabaseKey.private(container: container, user: "_alice")

    static func stored(_ seq: Int64) -> StoredNotification {
        var notification = Wire.PushNotification()
        notification.notificationID = "n\(seq)"
        return StoredNotification(seq: seq, scope: .private, notification: notification)
    }

    /// A hub on a fresh store.
    static func withHub(_ body: (NotificationHub, SQLiteStorage) async throws -> Void) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cirrus-hub-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let storage = try SQLiteStorage(directory: directory)
        defer { try? storage.close() }
        try await body(NotificationHub(observing: storage), storage)
    }

    @Test func aWatchTakesWhatFollowsItsPositionAndDropsWhatItHasSent() async throws {
        try await Self.withHub { hub, _ in
            let watch = hub.watch(Self.feed)
            defer { hub.stopWatching(watch) }
            hub.deliver([Self.stored(3), Self.stored(4)], to: Self.feed)
            hub.deliver([Self.stored(5)], to: Self.feed)
            // Seq 3 was already read from the feed; 4 and 5 follow it.
            #expect(watch.take(after: 3) == .notifications([Self.stored(4), Self.stored(5)]))
            #expect(watch.take(after: 5) == .notifications([]))
            // Another feed's commits never reach it.
            hub.deliver([Self.stored(6)], to: NotificationFeedKey(container: container, user: "_bob"))
            #expect(watch.take(after: 5) == .notifications([]))
        }
    }

    @Test func commitsAnnouncedOutOfOrderAreAGap() async throws {
        try await Self.withHub { hub, _ in
            let watch = hub.watch(Self.feed)
            defer { hub.stopWatching(watch) }
            hub.deliver([Self.stored(7)], to: Self.feed)
            #expect(watch.take(after: 5) == .gap)
            // The feed read reached 7; then 6 is announced late: nothing new.
            hub.deliver([Self.stored(6)], to: Self.feed)
            #expect(watch.take(after: 7) == .notifications([]))
            // Both announced before it takes, in the wrong order: consecutive once sorted.
            hub.deliver([Self.stored(9)], to: Self.feed)
            hub.deliver([Self.stored(8)], to: Self.feed)
            #expect(watch.take(after: 7) == .notifications([Self.stored(8), Self.stored(9)]))
        }
    }

    @Test func aMailboxOverTheLimitDropsWhatItHeldAndIsAGap() async throws {
        try await Self.withHub { hub, _ in
            let watch = hub.watch(Self.feed)
            defer { hub.stopWatching(watch) }
            let limit = Int64(NotificationHub.mailboxLimit)
            hub.deliver((1...limit).map(Self.stored), to: Self.feed)
            hub.deliver([Self.stored(limit + 1)], to: Self.feed)
            #expect(watch.take(after: 0) == .gap)
            // Empty again afterwards.
            #expect(watch.take(after: limit + 1) == .notifications([]))
        }
    }

    @Test func aCommitHandsTheWatchWhatTheFeedHolds() async throws {
        try await Self.withHub { hub, storage in
            let watch = hub.watch(Self.feed)
            defer { hub.stopWatching(watch) }
            _ = try await storage.modifySubscriptions(
                saving: [Wire.Subscription(subscriptionID: "all", kind: .database(Wire.DatabaseSubscription()))],
                deleting: [], in: Self.database, by: "_alice")
            let record = Wire.Record(
                recordID: Wire.RecordID(
                    recordName: "a", zoneID: Wire.RecordZoneID(zoneName: "_defaultZone", ownerName: "_alice")),
                recordType: "Note")
            _ = try await storage.modifyRecords(RecordModification(saving: [record]), in: Self.database, by: "_alice")
            var signals = watch.signals.makeAsyncIterator()
            #expect(await signals.next() != nil)
            let read = try await storage.notificationChanges(for: Self.feed, after: 0, limit: 10).notifications
            #expect(read.count == 1)
            #expect(watch.take(after: 0) == .notifications(read))
        }
    }
}
