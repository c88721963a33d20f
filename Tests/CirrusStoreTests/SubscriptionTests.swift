import CirrusWire
import Foundation
import Synchronization
import Testing

@testable import CirrusStore

/// Subscription builders.
enum S {
    static func query(
        _ id: String, type: String = "Note", _ predicate: Wire.QueryPredicate? = nil, zone: String? = nil,
        in key: DatabaseKey = alice,
        creation: Bool = true, update: Bool = true, deletion: Bool = true, once: Bool = false,
        info: Wire.NotificationInfo? = nil
    ) -> Wire.Subscription {
        Wire.Subscription(
            subscriptionID: id,
            kind: .query(Wire.QuerySubscription(
                recordType: type, predicate: predicate, zoneID: zone.map { zoneID($0, in: key) },
                firesOnRecordCreation: creation, firesOnRecordUpdate: update, firesOnRecordDeletion: deletion,
                firesOnce: once)),
            notificationInfo: info)
    }

    static func zone(_ id: String, _ zone: String, type: String = "", in key: DatabaseKey = alice) -> Wire.Subscription {
        Wire.Subscription(
            subscriptionID: id,
            kind: .recordZone(Wire.RecordZoneSubscription(zoneID: zoneID(zone, in: key), recordType: type)))
    }

    static func database(_ id: String, type: String = "") -> Wire.Subscription {
        Wire.Subscription(subscriptionID: id, kind: .database(Wire.DatabaseSubscription(recordType: type)))
    }
}

extension SubscriptionStorage {
    @discardableResult
    func subscribe(
        _ subscriptions: [Wire.Subscription], in key: DatabaseKey = alice, by user: String = "_alice"
    ) async throws -> SubscriptionModificationResult {
        try await modifySubscriptions(saving: subscriptions, deleting: [], in: key, by: user)
    }

    /// Every notification of `user` in the test container.
    func notifications(of user: String = "_alice", after: Int64? = nil) async throws -> [StoredNotification] {
        try await notificationChanges(for: NotificationFeedKey(container: container, user: user), after: after, limit: 1000)
            .notifications
    }
}

extension StoredNotification {
    /// "subscriptionID:reason:record" for query notifications, "subscriptionID:zone:name" and
    /// "subscriptionID:database" for the others.
    var summary: String {
        let id = notification.subscriptionID
        switch notification.detail {
        case .query(let query):
            let reason =
                switch query.reason {
                case .recordCreated: "created"
                case .recordUpdated: "updated"
                case .recordDeleted: "deleted"
                default: "?"
                }
            return "\(id):\(reason):\(query.recordID?.recordName ?? "?")"
        case .recordZone(let zone): return "\(id):zone:\(zone.zoneID?.zoneName ?? "?")"
        case .database: return "\(id):database"
        case nil: return "\(id):?"
        }
    }
}

@Suite("Subscriptions and notifications in the store")
struct SubscriptionTests {
    @Test func savesFetchesReplacesAndDeletesSubscriptions() async throws {
        try await withSubscriptionStore { storage, _ in
            try await storage.createZone("Z")
            let saved = try await storage.subscribe([S.query("q"), S.zone("z", "Z"), S.database("d")])
            #expect(saved.saves.map(\.id) == ["q", "z", "d"])
            #expect(saved.saves.allSatisfy { $0.subscription != nil })

            let all = try await storage.fetchSubscriptions(nil, in: alice, of: "_alice")
            #expect(all.map(\.id) == ["q", "z", "d"])
            // Replacing keeps the ID and its place.
            try await storage.subscribe([S.query("q", type: "Task")])
            let again = try await storage.fetchSubscriptions(["q", "missing"], in: alice, of: "_alice")
            guard let q = again[0].subscription, case .query(let query) = q.kind else {
                Issue.record("q not fetched: \(again[0])")
                return
            }
            #expect(query.recordType == "Task")
            guard let missing = again[1].failure else {
                Issue.record("missing subscription fetched")
                return
            }
            #expect(missing.code == .unknownItem)

            let deleted = try await storage.modifySubscriptions(saving: [], deleting: ["z", "nope"], in: alice, by: "_alice")
            #expect(deleted.deletes[0].failure == nil)
            #expect(deleted.deletes[1].failure?.code == .unknownItem)
            #expect(try await storage.fetchSubscriptions(nil, in: alice, of: "_alice").map(\.id) == ["q", "d"])
            // Another user's subscriptions are theirs alone, even in the public database.
            #expect(try await storage.fetchSubscriptions(nil, in: bob, of: "_bob").isEmpty)
            try await storage.subscribe([S.query("p", in: publicDB)], in: publicDB, by: "_bob")
            #expect(try await storage.fetchSubscriptions(nil, in: publicDB, of: "_alice").isEmpty)
            #expect(try await storage.fetchSubscriptions(nil, in: publicDB, of: "_bob").map(\.id) == ["p"])
        }
    }

    @Test(arguments: [
        (S.query("", in: alice), alice, "invalid subscription name \"\""),
        (Wire.Subscription(subscriptionID: "k"), alice, "subscription k: no kind: a query, record zone or database subscription"),
        (S.query("q", creation: false, update: false, deletion: false), alice,
         "subscription q: a query subscription needs firesOnRecordCreation, firesOnRecordUpdate or firesOnRecordDeletion"),
        (S.query("q", type: ""), alice, "subscription q: invalid record type \"\""),
        (S.query("q", Q.cmp("a", .beginsWith, .int64Value(1))), alice,
         "subscription q: predicate: BEGINSWITH needs a string value, got int64"),
        (S.query("q", in: DatabaseKey.shared(container: container, user: "_alice")),
         DatabaseKey.shared(container: container, user: "_alice"),
         "subscription q: query subscriptions are not supported in the shared database"),
        (S.zone("z", "_defaultZone"), alice,
         "subscription z: record zone subscriptions are not supported in the default zone; use a custom zone"),
        (S.zone("z", "Nowhere"), alice, "subscription z: zone Nowhere does not exist"),
        (S.zone("z", "_defaultZone", in: publicDB), publicDB,
         "subscription z: record zone subscriptions are only supported in the private database"),
        (S.database("d"), publicDB, "subscription d: database subscriptions are not supported in the public database"),
        (S.query("q", zone: "Z", in: bob), alice, "subscription q: zone Z does not exist"),
        (S.query("q", info: Wire.NotificationInfo(desiredKeys: ["ok", "not ok"])), alice,
         "subscription q: notification info: invalid field name \"not ok\""),
    ] as [(Wire.Subscription, DatabaseKey, String)])
    func refusesWhatCloudKitRefuses(subscription: Wire.Subscription, key: DatabaseKey, message: String) async throws {
        try await withSubscriptionStore { storage, _ in
            let result = try await storage.subscribe([subscription], in: key)
            guard let error = result.saves.first?.failure else {
                Issue.record("saved: \(result)")
                return
            }
            #expect(error.message == message)
            #expect(try await storage.fetchSubscriptions(nil, in: key, of: "_alice").isEmpty)
        }
    }

    @Test func theSameIDTwiceInOneRequestIsRefused() async throws {
        try await withSubscriptionStore { storage, _ in
            let result = try await storage.subscribe([S.database("d"), S.database("d", type: "Note")])
            guard let error = result.saves[1].failure else {
                Issue.record("saved twice")
                return
            }
            #expect(error.message == "subscription d appears twice in one request")
        }
    }

    @Test func querySubscriptionsFireWithTheReasonCloudKitGives() async throws {
        try await withSubscriptionStore { storage, _ in
            let hot = Q.cmp("priority", .greater, .int64Value(5))
            try await storage.subscribe([S.query("hot", hot, info: Wire.NotificationInfo(desiredKeys: ["title"]))])
            // Created matching, created not matching.
            var saved = try await storage.saveAll([
                note("a", [field("priority", .int64Value(9)), field("title", .stringValue("A"))]),
                note("b", [field("priority", .int64Value(1))]),
            ])
            // a updated while matching; b starts matching.
            saved[0].fields = [field("priority", .int64Value(8)), field("title", .stringValue("A2"))]
            saved[1].fields = [field("priority", .int64Value(7))]
            saved = try await storage.saveAll(saved)
            // a stops matching; b deleted while matching.
            saved[0].fields = [field("priority", .int64Value(0))]
            _ = try await storage.saveAll([saved[0]])
            _ = try await storage.modifyRecords(RecordModification(deleting: [recordID("b")]), in: alice, by: "_alice")
            // Neither matches any more: nothing.
            _ = try await storage.modifyRecords(RecordModification(deleting: [recordID("a")]), in: alice, by: "_alice")

            let notifications = try await storage.notifications()
            #expect(notifications.map(\.summary) == [
                "hot:created:a", "hot:updated:a", "hot:created:b", "hot:deleted:a", "hot:deleted:b",
            ])
            #expect(notifications.map(\.seq) == [1, 2, 3, 4, 5])
            let first = notifications[0].notification
            #expect(first.notificationType == .query)
            #expect(first.subscriptionOwnerUserRecordID == "_alice")
            #expect(first.containerIdentifier == container)
            #expect(!first.notificationID.isEmpty)
            #expect(Set(notifications.map(\.notification.notificationID)).count == 5)
            guard case .query(let detail) = notifications[1].notification.detail else { return }
            #expect(detail.recordFields == [field("title", .stringValue("A2"))])
            #expect(detail.databaseScope == .private)
            #expect(detail.recordID == recordID("a"))
        }
    }

    @Test func optionsChooseWhichChangesFire() async throws {
        try await withSubscriptionStore { storage, _ in
            try await storage.subscribe([
                S.query("create", creation: true, update: false, deletion: false),
                S.query("update", creation: false, update: true, deletion: false),
                S.query("delete", creation: false, update: false, deletion: true),
                S.query("task", type: "Task"),
            ])
            var saved = try await storage.saveAll([note("n")])
            saved[0].fields = [field("v", .int64Value(1))]
            _ = try await storage.saveAll(saved)
            _ = try await storage.modifyRecords(RecordModification(deleting: [recordID("n")]), in: alice, by: "_alice")
            #expect(try await storage.notifications().map(\.summary) == [
                "create:created:n", "update:updated:n", "delete:deleted:n",
            ])
        }
    }

    @Test func firesOnceFiresOnceAndIsThenGone() async throws {
        try await withSubscriptionStore { storage, _ in
            try await storage.subscribe([S.query("once", once: true), S.query("always")])
            _ = try await storage.saveAll([note("a"), note("b")])
            _ = try await storage.saveAll([note("c")])
            #expect(try await storage.notifications().map(\.summary) == [
                "once:created:a", "always:created:a", "always:created:b", "always:created:c",
            ])
            #expect(try await storage.fetchSubscriptions(nil, in: alice, of: "_alice").map(\.id) == ["always"])
        }
    }

    @Test func zoneAndDatabaseSubscriptionsFireOncePerWrite() async throws {
        try await withSubscriptionStore { storage, _ in
            try await storage.createZone("Z")
            try await storage.createZone("Y")
            try await storage.subscribe([
                S.zone("z", "Z"), S.zone("z-tasks", "Z", type: "Task"), S.database("db"), S.database("db-tasks", type: "Task"),
            ])
            _ = try await storage.saveAll([note("a", zone: "Z"), note("b", zone: "Z")])
            _ = try await storage.saveAll([note("c", zone: "Y")])
            _ = try await storage.modifyZones(saving: [], deleting: [zoneID("Z")], in: alice)
            _ = try await storage.modifyZones(saving: [Wire.RecordZone(zoneID: zoneID("X"))], deleting: [], in: alice)
            #expect(try await storage.notifications().map(\.summary) == [
                "z:zone:Z", "db:database",  // the two notes in Z
                "db:database",  // the note in Y
                "z:zone:Z", "z-tasks:zone:Z", "db:database",  // Z deleted
                "db:database",  // X created
            ])
        }
    }

    @Test func aRolledBackWriteNotifiesNobody() async throws {
        try await withSubscriptionStore { storage, _ in
            try await storage.subscribe([S.query("all"), S.database("db")])
            let stale = note("a", tag: "no-such-tag")
            let result = try await storage.modifyRecords(
                RecordModification(saving: [note("b"), stale], isAtomic: true), in: alice, by: "_alice")
            #expect(result.hasFailures)
            #expect(try await storage.notifications().isEmpty)
            // Non-atomic: the good one fires, the failed one does not.
            _ = try await storage.modifyRecords(
                RecordModification(saving: [note("b"), stale], isAtomic: false), in: alice, by: "_alice")
            #expect(try await storage.notifications().map(\.summary) == ["all:created:b", "db:database"])
        }
    }

    @Test func cascadedDeletionsFireAsDeletions() async throws {
        try await withSubscriptionStore { storage, _ in
            try await storage.subscribe([S.query("all", creation: false, update: false, deletion: true)])
            _ = try await storage.saveAll([note("parent"), note("child", [field("p", reference(recordID("parent")))])])
            _ = try await storage.modifyRecords(RecordModification(deleting: [recordID("parent")]), in: alice, by: "_alice")
            #expect(try await storage.notifications().map(\.summary) == ["all:deleted:parent", "all:deleted:child"])
        }
    }

    @Test func privateSubscriptionsOnlySeeTheirOwnDatabase() async throws {
        try await withSubscriptionStore { storage, _ in
            try await storage.subscribe([S.query("mine"), S.database("db")])
            try await storage.subscribe([S.query("bobs", in: bob), S.database("bob-db")], in: bob, by: "_bob")
            _ = try await storage.saveAll([note("a")])
            _ = try await storage.saveAll([note("b", in: bob)], in: bob, by: "_bob")
            #expect(try await storage.notifications(of: "_alice").map(\.summary) == ["mine:created:a", "db:database"])
            #expect(try await storage.notifications(of: "_bob").map(\.summary) == ["bobs:created:b", "bob-db:database"])
        }
    }

    @Test func publicSubscriptionsOfEveryUserFireOnPublicRecords() async throws {
        try await withSubscriptionStore { storage, _ in
            try await storage.subscribe([S.query("a-pub", in: publicDB)], in: publicDB, by: "_alice")
            try await storage.subscribe([S.query("b-pub", in: publicDB)], in: publicDB, by: "_bob")
            _ = try await storage.saveAll([note("p", in: publicDB)], in: publicDB, by: "_bob")
            let alices = try await storage.notifications(of: "_alice")
            #expect(alices.map(\.summary) == ["a-pub:created:p"])
            #expect(alices.first?.scope == .public)
            #expect(try await storage.notifications(of: "_bob").map(\.summary) == ["b-pub:created:p"])
        }
    }

    @Test func textSearchAndZonesNarrowQuerySubscriptions() async throws {
        try await withSubscriptionStore { storage, _ in
            try await storage.createZone("Z")
            try await storage.subscribe([S.query("words", Q.text("crème brûlée")), S.query("in-z", zone: "Z")])
            _ = try await storage.saveAll([
                note("yes", [field("title", .stringValue("Creme BRULEE recipe"))]),
                note("no", [field("title", .stringValue("crème only"))]),
            ])
            _ = try await storage.saveAll([note("z", zone: "Z")])
            #expect(try await storage.notifications().map(\.summary) == ["words:created:yes", "in-z:created:z"])
        }
    }

    @Test func alertsResolveTheirArgumentsAndBadgesCount() async throws {
        try await withSubscriptionStore { storage, _ in
            let info = Wire.NotificationInfo(
                alertBody: "New note", alertLocalizationKey: "NOTE_%@", alertLocalizationArgs: ["title", "missing"],
                title: "Notes", soundName: "ping.caf", shouldBadge: true, category: "NOTE")
            try await storage.subscribe([S.query("alert", info: info)])
            _ = try await storage.saveAll([note("a", [field("title", .stringValue("Milk"))]), note("b")])
            let notifications = try await storage.notifications().map(\.notification)
            #expect(notifications.map(\.badge) == [1, 2])
            #expect(notifications[0].alert?.body == "New note")
            #expect(notifications[0].alert?.bodyLocalizationKey == "NOTE_%@")
            #expect(notifications[0].alert?.bodyLocalizationArgs == ["Milk", ""])
            #expect(notifications[0].alert?.title == "Notes")
            #expect(notifications[0].soundName == "ping.caf")
            #expect(notifications[0].category == "NOTE")
        }
    }

    @Test func notificationsAreMarkedReadAndTheBadgeIsSet() async throws {
        try await withSubscriptionStore { storage, _ in
            try await storage.subscribe([S.query("badged", info: Wire.NotificationInfo(shouldBadge: true))])
            _ = try await storage.saveAll([note("a"), note("b")])
            let feed = NotificationFeedKey(container: container, user: "_alice")
            let ids = try await storage.notifications().map(\.notification.notificationID)
            #expect(ids.count == 2)
            // Marked by ID, once or again; an unknown ID, or another user's, is not in the feed.
            let marked = try await storage.markNotificationsRead([ids[0], "no-such-id", ids[0]], in: feed)
            #expect(marked == [true, false, true])
            let bobs = NotificationFeedKey(container: container, user: "_bob")
            #expect(try await storage.markNotificationsRead([ids[1]], in: bobs) == [false])
            #expect(try await storage.notifications().map(\.notification.isRead) == [true, false])
            // The next badging notification shows the badge set, plus one.
            try await storage.setBadge(10, for: feed)
            _ = try await storage.saveAll([note("c")])
            #expect(try await storage.notifications().map(\.notification.badge) == [1, 2, 11])
            // A feed without notifications keeps its badge and has none.
            try await storage.setBadge(3, for: bobs)
            #expect(try await storage.notificationFeedHead(bobs) == 0)
            #expect(try await storage.notifications(of: "_bob").isEmpty)
        }
    }

    @Test func theFeedPagesAndExpiresWhatWasPruned() async throws {
        let now = Mutex<Int64>(1_000)
        try await withSubscriptionStore(clock: { Wire.Timestamp(seconds: now.withLock { $0 }, nanos: 0) }) { storage, _ in
            now.withLock { $0 = 1_000 }  // each engine's run starts over
            try await storage.subscribe([S.query("all")])
            _ = try await storage.saveAll((0..<5).map { note("old\($0)") })
            now.withLock { $0 = 2_000 }
            _ = try await storage.saveAll((0..<3).map { note("new\($0)") })
            let feed = NotificationFeedKey(container: container, user: "_alice")

            let page = try await storage.notificationChanges(for: feed, after: nil, limit: 3)
            #expect(page.notifications.map(\.seq) == [1, 2, 3])
            #expect(page.lastSeq == 3 && page.moreComing)
            let rest = try await storage.notificationChanges(for: feed, after: page.lastSeq, limit: 100)
            #expect(rest.notifications.map(\.seq) == [4, 5, 6, 7, 8])
            #expect(rest.lastSeq == 8 && !rest.moreComing)
            #expect(try await storage.notificationFeedHead(feed) == 8)

            #expect(try await storage.pruneNotifications(createdBefore: Wire.Timestamp(seconds: 1_500, nanos: 0)) == 5)
            await #expect(throws: StoreError.self) {
                _ = try await storage.notificationChanges(for: feed, after: 3, limit: 100)
            }
            await #expect(throws: StoreError.self) {
                _ = try await storage.notificationChanges(for: feed, after: 9, limit: 100)
            }
            // From the oldest kept, or from exactly where the pruning stopped.
            #expect(try await storage.notificationChanges(for: feed, after: nil, limit: 100).notifications.map(\.seq) == [6, 7, 8])
            #expect(try await storage.notificationChanges(for: feed, after: 5, limit: 100).notifications.map(\.seq) == [6, 7, 8])
            let empty = try await storage.notificationChanges(for: NotificationFeedKey(container: container, user: "_carol"), after: nil, limit: 10)
            #expect(empty.notifications.isEmpty && empty.lastSeq == 0 && !empty.moreComing)
        }
    }

    @Test func observersHearOfEachCommitThatNotified() async throws {
        try await withSubscriptionStore { storage, _ in
            let heard = Mutex<[(NotificationFeedKey, [StoredNotification])]>([])
            storage.observeNotifications { feed, notifications in heard.withLock { $0.append((feed, notifications)) } }
            try await storage.subscribe([S.query("all")])
            _ = try await storage.saveAll([note("a"), note("b")])
            _ = try await storage.saveAll([note("c", in: bob)], in: bob, by: "_bob")  // bob subscribes to nothing
            try await storage.createZone("Z")  // a query subscription ignores zone changes
            let announced = heard.withLock { $0 }
            #expect(announced.map(\.0) == [NotificationFeedKey(container: container, user: "_alice")])
            // What the commit hands over is what the feed holds: the same notifications, in order.
            #expect(announced.first?.1 == (try await storage.notifications()))
            #expect(announced.first?.1.map(\.seq) == [1, 2])
        }
    }

    @Test func aUserKeepsAtMostTheLimitOfSubscriptions() async throws {
        try await withSubscriptionStore { storage, engine in
            let limit = engine.maximumSubscriptionsPerDatabase
            for start in stride(from: 0, to: limit, by: 400) {
                let ids = (start..<min(start + 400, limit)).map { "s\($0)" }
                let result = try await storage.subscribe(ids.map { S.database($0) })
                #expect(!result.saves.contains { $0.failure != nil })
            }
            let over = try await storage.subscribe([S.database("one-more"), S.database("s0", type: "Note")])
            guard let error = over.saves[0].failure else {
                Issue.record("saved over the limit")
                return
            }
            #expect(error.code == .limitExceeded)
            // Replacing one that exists is not a new one.
            guard over.saves[1].subscription != nil else {
                Issue.record("replacing failed: \(over.saves[1])")
                return
            }
        }
    }
}
