import CirrusStore
import CirrusTestSupport
import CirrusWire
import Foundation
import Synchronization
import Testing

@testable import CirrusPostgres

/// Notifications across nodes: two `PostgresStorage`s on one database stand for two
/// `cirrusd` nodes. What one node commits reaches the other's observers through `LISTEN`/
/// `NOTIFY`, the feed table being the source of truth; each node announces a notification once.
@Suite("PostgreSQL notifications across nodes")
struct PostgresNotificationTests {
    private let feed = NotificationFeedKey(container: container, user: "_alice")

    /// What a node's observers heard, in order.
    final class Heard: Sendable {
        private let heard = Mutex<[(NotificationFeedKey, [StoredNotification])]>([])

        init(_ storage: PostgresStorage) {
            storage.observeNotifications { [self] feed, notifications in self.heard.withLock { $0.append((feed, notifications)) } }
        }

        /// The sequences heard of `feed`, in the order heard.
        func seqs(of feed: NotificationFeedKey) -> [Int64] {
            heard.withLock { $0.filter { $0.0 == feed }.flatMap { $0.1.map(\.seq) } }
        }

        func notifications(of feed: NotificationFeedKey) -> [StoredNotification] {
            heard.withLock { $0.filter { $0.0 == feed }.flatMap(\.1) }
        }
    }

    /// Runs `body` with two nodes on one new database. With `secondRole`, the second node
    /// connects as a role of its own (a member of the first's, with its privileges), so a test
    /// can keep that node alone from connecting; `body` gets the second node's URL.
    private func withTwoNodes(
        secondRole: Bool = false, _ body: (PostgresStorage, PostgresStorage, PostgresURL) async throws -> Void
    ) async throws {
        let url = try newDatabase()
        var secondURL = url
        if secondRole {
            secondURL.user = url.database + "_second"
            try TemporaryPostgres.shared().psql(
                "CREATE ROLE \(secondURL.user) LOGIN PASSWORD '\(TemporaryPostgres.password)' IN ROLE \(url.user)")
        }
        defer {
            if secondRole { _ = try? TemporaryPostgres.shared().psql("DROP ROLE IF EXISTS \(secondURL.user)") }
        }
        let first = try await PostgresStorage(url: url, maximumConnections: 4)
        let second: PostgresStorage
        do {
            second = try await PostgresStorage(url: secondURL, maximumConnections: 4)
        } catch {
            await first.close()
            throw error
        }
        do {
            try await body(first, second, secondURL)
        } catch {
            await first.close()
            await second.close()
            throw error
        }
        await first.close()
        await second.close()
    }

    private func subscribeToEverything(_ storage: PostgresStorage, in key: DatabaseKey = alice) async throws {
        let subscription = Wire.Subscription(
            subscriptionID: "all-\(key.scope)",
            kind: .query(
                Wire.QuerySubscription(
                    recordType: "Note", firesOnRecordCreation: true, firesOnRecordUpdate: true, firesOnRecordDeletion: true)))
        let result = try await storage.modifySubscriptions(saving: [subscription], deleting: [], in: key, by: "_alice")
        #expect(result.saves.allSatisfy { $0.failure == nil })
    }

    private func save(_ name: String, on storage: PostgresStorage, in key: DatabaseKey = alice) async throws {
        let record = Wire.Record(
            recordID: Wire.RecordID(recordName: name, zoneID: zoneID("_defaultZone", in: key)), recordType: "Note")
        let result = try await storage.modifyRecords(RecordModification(saving: [record]), in: key, by: "_alice")
        #expect(result.saves.allSatisfy { $0.failure == nil }, "\(result.saves)")
    }

    @Test func aSaveOnOneNodeIsObservedOnAnother() async throws {
        try await withTwoNodes { first, second, _ in
            let heardFirst = Heard(first)
            let heardSecond = Heard(second)
            try await subscribeToEverything(first)
            try await save("a", on: first)
            try await eventually(timeout: .seconds(60), "node 2 hears the notification of node 1's save") {
                heardSecond.seqs(of: feed) == [1]
            }
            // What node 2 announces is what the feed holds, and node 1 announced it once too.
            let stored = try await second.notificationChanges(for: feed, after: nil, limit: 10).notifications
            #expect(heardSecond.notifications(of: feed) == stored)
            #expect(heardFirst.seqs(of: feed) == [1])
        }
    }

    @Test func aLostNotifyOnlyDelaysTheNotification() async throws {
        try await withTwoNodes(secondRole: true) { first, second, secondURL in
            let heard = Heard(second)
            try await subscribeToEverything(first)
            try await save("before", on: first)
            try await eventually(timeout: .seconds(60), "node 2 hears the first notification") { heard.seqs(of: feed) == [1] }

            // Node 2's listener loses its connection and cannot connect again while node 1
            // commits the second notification: its NOTIFY reaches no listener of node 2. Only
            // node 2's role is kept out: node 1 may open a connection for the save.
            let server = try TemporaryPostgres.shared()
            let pid = try #require(second.listener.backendPID)
            let listens = second.listener.listens
            try server.psql("ALTER ROLE \(secondURL.user) NOLOGIN")
            do {
                try server.psql("SELECT pg_terminate_backend(\(pid))")
                try await eventually(timeout: .seconds(60), "node 2's listener notices") { second.listener.backendPID == nil }
                try await save("while-away", on: first)
                #expect(heard.seqs(of: feed) == [1])
            } catch {
                _ = try? server.psql("ALTER ROLE \(secondURL.user) LOGIN")
                throw error
            }
            try server.psql("ALTER ROLE \(secondURL.user) LOGIN")

            // Listening again, node 2 reads the feed after what it announced.
            try await eventually(timeout: .seconds(60), "node 2 announces the notification committed while away") {
                heard.seqs(of: feed) == [1, 2]
            }
            #expect(second.listener.listens > listens)
            // And goes on hearing NOTIFYs.
            try await save("after", on: first)
            try await eventually(timeout: .seconds(60), "node 2 hears the next notification") { heard.seqs(of: feed) == [1, 2, 3] }
        }
    }

    @Test func concurrentSavesOnTwoNodesNumberOneFeedWithoutGapsOrDuplicates() async throws {
        try await withTwoNodes { first, second, _ in
            let heardFirst = Heard(first)
            let heardSecond = Heard(second)
            // Alice's feed gets the notifications of her private database (saved through node
            // 2) and of the public one (saved through node 1): two databases, two write locks,
            // one feed.
            try await subscribeToEverything(first, in: alice)
            try await subscribeToEverything(first, in: publicDB)
            // Both nodes follow the feed from its start, as a watch on each would.
            #expect(try await first.notificationFeedHead(feed) == 0)
            #expect(try await second.notificationFeedHead(feed) == 0)
            let perNode = 25
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in 0..<perNode {
                    group.addTask { try await save("public-\(index)", on: first, in: publicDB) }
                    group.addTask { try await save("private-\(index)", on: second, in: alice) }
                }
                try await group.waitForAll()
            }
            let total = Int64(2 * perNode)
            let stored = try await first.notificationChanges(for: feed, after: nil, limit: 1_000).notifications
            #expect(stored.map(\.seq) == Array(1...total))
            #expect(Set(stored.map(\.notification.notificationID)).count == stored.count)
            var records: [String] = []
            for notification in stored {
                if case .query(let query) = notification.notification.detail { records.append(query.recordID?.recordName ?? "") }
            }
            #expect(Set(records).count == Int(total))
            #expect(try await second.notificationFeedHead(feed) == total)
            // Each node announces every notification exactly once: its own after their commits,
            // the other node's from the feed.
            for (node, heard) in [("node 1", heardFirst), ("node 2", heardSecond)] {
                try await eventually(timeout: .seconds(60), "\(node) announces all \(total)") {
                    Set(heard.seqs(of: feed)) == Set(1...total)
                }
                #expect(heard.seqs(of: feed).count == Int(total), "\(node) announced a notification twice")
            }
        }
    }

    @Test func aSubscriptionDeletedOnOneNodeNoLongerFiresOnAnother() async throws {
        try await withTwoNodes { first, second, _ in
            try await subscribeToEverything(first)
            // Node 2 compiles the subscription for its first write, and keeps it.
            try await save("a", on: second)
            _ = try await first.modifySubscriptions(saving: [], deleting: ["all-private"], in: alice, by: "_alice")
            try await save("b", on: second)
            let stored = try await second.notificationChanges(for: feed, after: nil, limit: 10).notifications
            #expect(stored.map(\.seq) == [1])
            // Saved again on node 1, it fires on node 2 again.
            try await subscribeToEverything(first)
            try await save("c", on: second)
            #expect(try await second.notificationFeedHead(feed) == 2)
        }
    }

    @Test func positionsAnnounceEachNotificationOnce() {
        var positions = NotificationPositions()
        func notifications(_ seqs: [Int64]) -> [StoredNotification] {
            seqs.map { StoredNotification(seq: $0, scope: .private, notification: Wire.PushNotification()) }
        }
        let announcement = { (first: Int64, head: Int64) in NotificationAnnouncement(feed: feed, first: first, head: head) }
        // A feed not followed yet is read from the announcement's first notification.
        #expect(positions.readStart(for: announcement(3, 4)) == 2)
        #expect(positions.readStart(of: feed, head: 4) == nil)
        #expect(positions.fresh(notifications([3, 4]), of: feed).map(\.seq) == [3, 4])
        // Its own commit's NOTIFY comes back: nothing to read; the same notifications again:
        // nothing to announce.
        #expect(positions.readStart(for: announcement(3, 4)) == nil)
        #expect(positions.fresh(notifications([3, 4]), of: feed).isEmpty)
        // A later commit's, possibly after a lost one: read after what was announced.
        #expect(positions.readStart(for: announcement(7, 7)) == 4)
        #expect(positions.readStart(of: feed, head: 7) == 4)
        #expect(positions.fresh(notifications([4, 5, 6, 7]), of: feed, readAfter: 3).map(\.seq) == [5, 6, 7])
        // Out of order: 9 (this node's) is announced before 8 (another node's), which is still
        // announced, once.
        #expect(positions.fresh(notifications([9]), of: feed).map(\.seq) == [9])
        #expect(positions.readStart(for: announcement(9, 9)) == nil)
        #expect(positions.readStart(for: announcement(8, 8)) == 7)
        #expect(positions.readStart(of: feed, head: 9) == 7)
        #expect(positions.fresh(notifications([8, 9]), of: feed, readAfter: 7).map(\.seq) == [8])
        #expect(positions.feeds[feed] == NotificationPositions.Feed(through: 9))
        // What a read skips was pruned: the position moves past it.
        #expect(positions.fresh(notifications([12, 13]), of: feed, readAfter: 9).map(\.seq) == [12, 13])
        #expect(positions.readStart(of: feed, head: 13) == nil)
        // Registering a followed feed changes nothing; another one is followed from there.
        positions.register(feed, at: 100)
        #expect(positions.readStart(of: feed, head: 14) == 13)
        let other = NotificationFeedKey(container: container, user: "_bob")
        positions.register(other, at: 5)
        #expect(positions.readStart(of: other, head: 6) == 5)
    }

    @Test func announcementsSurviveAnyName() throws {
        let odd = NotificationFeedKey(container: "iCloud.\"quoted\",\nline", user: "_ünï\u{0}")
        let announcement = NotificationAnnouncement(feed: odd, first: 2, head: 9)
        let decoded = try #require(NotificationAnnouncement(payload: announcement.payload))
        #expect(decoded == announcement)
        #expect(decoded.feed == odd)
        #expect(NotificationAnnouncement(payload: "not json") == nil)
        #expect(NotificationAnnouncement(payload: #"{"c":"c","u":"u","f":5,"h":4}"#) == nil)
    }
}
