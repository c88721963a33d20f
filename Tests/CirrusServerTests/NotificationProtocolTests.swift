import CirrusServer
import CirrusStore
import CirrusTestSupport
import CirrusWire
import Foundation
import Testing

/// The notification streams at the protocol level, with a raw client: what a watch sends and
/// when, its flow control, and the tokens of both notification operations.
@Suite("Notification feeds over the wire")
struct NotificationProtocolTests {
    static let everything = Wire.Subscription(
        subscriptionID: "everything",
        kind: .query(Wire.QuerySubscription(
            recordType: "Note", firesOnRecordCreation: true, firesOnRecordUpdate: true, firesOnRecordDeletion: true)))

    /// A server whose executor the test can reach.
    static func withNotificationServer(_ body: (_ port: Int, _ executor: StorageExecutor) async throws -> Void) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cirrus-notify-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let storage = try SQLiteStorage(directory: directory)
        defer { try? storage.close() }
        let executor = StorageExecutor(storage: storage)
        try await withServer(configure: { $0.executor = executor }) { _, port in
            try await body(port, executor)
        }
    }

    /// Opens a watch on `streamID` of `client`.
    static func openWatch(
        _ client: TestClient, streamID: UInt64, since: Wire.ServerChangeToken? = nil, window: UInt32 = 100,
        longLived: Bool = false
    ) async throws {
        let open = Wire.Open(
            operationID: UUID().uuidString, databaseScope: .unspecified, containerIdentifier: container,
            configuration: longLived ? Wire.OperationConfiguration(isLongLived: true) : nil,
            initialWindow: window, request: .watchNotifications(Wire.WatchNotificationsRequest(since: since)))
        try await client.send(Wire.Frame(streamID: streamID, kind: .open(open)))
    }

    /// The next frame, which must be an event of the watch.
    static func nextWatchEvent(_ client: TestClient) async throws -> Wire.WatchNotificationsEvent.Callback? {
        let frame = try await client.nextFrame()
        guard case .event(let event) = frame.kind, case .watchNotifications(let watch) = event.payload else {
            Issue.record("not a watch event: \(frame)")
            return nil
        }
        return watch.callback
    }

    static func recordName(_ callback: Wire.WatchNotificationsEvent.Callback?) -> String? {
        guard case .notification(let watched) = callback, case .query(let query) = watched.notification?.detail else {
            return nil
        }
        return query.recordID?.recordName
    }

    @Test func aWatchGoesLiveThenPushesEachNotificationAsItsWriteCommits() async throws {
        try await Self.withNotificationServer { port, executor in
            var writer = try await OperationClient.connect(port: port, user: "alice")
            _ = try await writer.run(.modifySubscriptions(Wire.ModifySubscriptionsRequest(subscriptionsToSave: [Self.everything])))
            _ = try await writer.save([note("before", title: "missed by a watch without a token")])

            let watcher = try await TestClient.connect(port: port, user: "alice")
            _ = try await watcher.handshake()
            try await Self.openWatch(watcher, streamID: 1)
            guard case .live(let liveToken) = try await Self.nextWatchEvent(watcher) else {
                Issue.record("the watch did not go live first")
                return
            }
            _ = try await writer.save([note("a", title: "A"), note("b", title: "B")])
            let first = try await Self.nextWatchEvent(watcher)
            #expect(Self.recordName(first) == "a")
            #expect(Self.recordName(try await Self.nextWatchEvent(watcher)) == "b")
            guard case .notification(let watched) = first, case .query(let query) = watched.notification?.detail else {
                return
            }
            #expect(query.recordID?.zoneID?.ownerName == "__defaultOwner__")
            #expect(watched.notification?.subscriptionID == "everything")

            // A second watch from the first one's token replays what came after it, then goes live.
            let second = try await TestClient.connect(port: port, user: "alice")
            _ = try await second.handshake()
            try await Self.openWatch(second, streamID: 1, since: watched.changeToken)
            #expect(Self.recordName(try await Self.nextWatchEvent(second)) == "b")
            guard case .live = try await Self.nextWatchEvent(second) else {
                Issue.record("no live after the replay")
                return
            }
            // From the live token of the first: both.
            let third = try await TestClient.connect(port: port, user: "alice")
            _ = try await third.handshake()
            try await Self.openWatch(third, streamID: 1, since: liveToken)
            #expect(Self.recordName(try await Self.nextWatchEvent(third)) == "a")
            #expect(Self.recordName(try await Self.nextWatchEvent(third)) == "b")

            #expect(executor.notifications.watchCount == 3)
            try await third.send(Wire.Frame(streamID: 1, kind: .cancel(Wire.Cancel(reason: "done"))))
            await second.close()
            try await eventually { executor.notifications.watchCount == 1 }
            await third.close()
            await watcher.close()
            await writer.client.close()
        }
    }

    @Test func aWatchNeverSendsMoreThanItsCredit() async throws {
        try await Self.withNotificationServer { port, _ in
            var writer = try await OperationClient.connect(port: port, user: "alice")
            _ = try await writer.run(.modifySubscriptions(Wire.ModifySubscriptionsRequest(subscriptionsToSave: [Self.everything])))
            let watcher = try await TestClient.connect(port: port, user: "alice")
            _ = try await watcher.handshake()
            try await Self.openWatch(watcher, streamID: 1, window: 3)
            guard case .live = try await Self.nextWatchEvent(watcher) else { return }
            _ = try await writer.save((0..<10).map { note("n\($0)", title: "\($0)") })
            #expect(Self.recordName(try await Self.nextWatchEvent(watcher)) == "n0")
            #expect(Self.recordName(try await Self.nextWatchEvent(watcher)) == "n1")
            // Credit used up (live + 2): nothing more until the client grants some.
            await #expect(throws: TestTimeout.self) { _ = try await watcher.nextFrame(timeout: .milliseconds(300)) }
            try await watcher.send(Wire.Frame(streamID: 1, kind: .window(Wire.Window(credit: 100))))
            var names: [String?] = []
            for _ in 2..<10 { names.append(Self.recordName(try await Self.nextWatchEvent(watcher))) }
            #expect(names == (2..<10).map { "n\($0)" })
            await watcher.close()
            await writer.client.close()
        }
    }

    @Test func aWatchReadsItsFeedWhenMoreCommitThanItsMailboxHolds() async throws {
        try await Self.withNotificationServer { port, _ in
            var writer = try await OperationClient.connect(port: port, user: "alice")
            _ = try await writer.run(.modifySubscriptions(Wire.ModifySubscriptionsRequest(subscriptionsToSave: [Self.everything])))
            let watcher = try await TestClient.connect(port: port, user: "alice")
            _ = try await watcher.handshake()
            try await Self.openWatch(watcher, streamID: 1, window: 2)
            guard case .live = try await Self.nextWatchEvent(watcher) else { return }
            // One handed over directly, then more than a mailbox holds while the watch has no credit.
            _ = try await writer.save([note("first", title: "0")])
            #expect(Self.recordName(try await Self.nextWatchEvent(watcher)) == "first")
            let count = NotificationHub.mailboxLimit + 44
            _ = try await writer.save((0..<count).map { note("n\($0)", title: "\($0)") })
            try await watcher.send(Wire.Frame(streamID: 1, kind: .window(Wire.Window(credit: UInt32(count)))))
            var names: [String?] = []
            for _ in 0..<count { names.append(Self.recordName(try await Self.nextWatchEvent(watcher))) }
            #expect(names == (0..<count).map { "n\($0)" })
            // And straight from the commit again afterwards.
            try await watcher.send(Wire.Frame(streamID: 1, kind: .window(Wire.Window(credit: 10))))
            _ = try await writer.save([note("last", title: "1")])
            #expect(Self.recordName(try await Self.nextWatchEvent(watcher)) == "last")
            await watcher.close()
            await writer.client.close()
        }
    }

    @Test func badTokensEndAWatchWithAClearError() async throws {
        try await Self.withNotificationServer { port, _ in
            let alice = try await TestClient.connect(port: port, user: "alice")
            _ = try await alice.handshake()
            try await Self.openWatch(alice, streamID: 1, since: Wire.ServerChangeToken(opaque: [1, 2, 3]))
            guard case .complete(let complete) = try await alice.nextFrame().kind else {
                Issue.record("a garbage token was accepted")
                return
            }
            #expect(complete.error?.code == .invalidArguments)

            // Alice's token is not Bob's.
            try await Self.openWatch(alice, streamID: 3)
            guard case .live(let token) = try await Self.nextWatchEvent(alice) else { return }
            let bob = try await TestClient.connect(port: port, user: "bob")
            _ = try await bob.handshake()
            try await Self.openWatch(bob, streamID: 1, since: token)
            guard case .complete(let refused) = try await bob.nextFrame().kind else {
                Issue.record("bob used alice's token")
                return
            }
            #expect(refused.error?.code == .invalidArguments)
            await alice.close()
            await bob.close()
        }
    }

    @Test func aLongLivedFlagOnAWatchIsIgnored() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cirrus-notify-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let storage = try SQLiteStorage(directory: directory)
        defer { try? storage.close() }
        let executor = StorageExecutor(storage: storage)
        try await withServer(configure: {
            $0.executor = executor
            $0.longLivedOperations = LongLivedOperations(journal: storage, executor: executor)
        }) { _, port in
            let alice = try await TestClient.connect(port: port, user: "alice")
            _ = try await alice.handshake()
            try await Self.openWatch(alice, streamID: 1, longLived: true)
            // No Persisted: the watch runs on its stream only.
            guard case .live = try await Self.nextWatchEvent(alice) else { return }
            #expect(try await storage.longLivedOperationIDs(
                owner: "_alice", container: container, completedSince: Wire.Timestamp()).isEmpty)
            await alice.close()
        }
    }

    @Test func fetchNotificationChangesPagesWithTokens() async throws {
        try await Self.withNotificationServer { port, _ in
            var alice = try await OperationClient.connect(port: port, user: "alice")
            _ = try await alice.run(.modifySubscriptions(Wire.ModifySubscriptionsRequest(subscriptionsToSave: [Self.everything])))
            _ = try await alice.save((0..<5).map { note("n\($0)", title: "\($0)") })

            func fetch(_ token: Wire.ServerChangeToken?, limit: UInt32, as client: inout OperationClient)
                async throws -> (names: [String], complete: Wire.Complete)
            {
                let (events, complete) = try await client.run(
                    .fetchNotificationChanges(Wire.FetchNotificationChangesRequest(
                        previousServerChangeToken: token, resultsLimit: limit)),
                    scope: .unspecified)
                let names = events.compactMap { payload -> String? in
                    guard case .fetchNotificationChanges(let event) = payload,
                        case .notificationChanged(let notification) = event.callback,
                        case .query(let query) = notification.detail
                    else { return nil }
                    return query.recordID?.recordName
                }
                return (names, complete)
            }
            let first = try await fetch(nil, limit: 3, as: &alice)
            #expect(first.names == ["n0", "n1", "n2"])
            guard case .fetchNotificationChanges(let result)? = first.complete.result else {
                Issue.record("no result: \(first.complete)")
                return
            }
            #expect(result.moreComing)
            let rest = try await fetch(result.serverChangeToken, limit: 0, as: &alice)
            #expect(rest.names == ["n3", "n4"])
            guard case .fetchNotificationChanges(let last)? = rest.complete.result else { return }
            #expect(!last.moreComing)
            #expect(try await fetch(last.serverChangeToken, limit: 0, as: &alice).names.isEmpty)

            var bob = try await OperationClient.connect(port: port, user: "bob")
            #expect(try await fetch(nil, limit: 0, as: &bob).names.isEmpty)
            #expect(try await fetch(last.serverChangeToken, limit: 0, as: &bob).complete.error?.code == .invalidArguments)
            await alice.client.close()
            await bob.client.close()
        }
    }

    @Test func subscriptionOperationsRefuseWhatTheyCannotRun() async throws {
        try await Self.withNotificationServer { port, _ in
            var alice = try await OperationClient.connect(port: port, user: "alice")
            let tooMany = Wire.ModifySubscriptionsRequest(subscriptionIDsToDelete: (0..<401).map { "s\($0)" })
            #expect(try await alice.run(.modifySubscriptions(tooMany)).complete.error?.code == .limitExceeded)
            let bad = Wire.ModifySubscriptionsRequest(
                subscriptionsToSave: [Wire.Subscription(subscriptionID: "x")], subscriptionIDsToDelete: ["nope"])
            let (events, complete) = try await alice.run(.modifySubscriptions(bad))
            #expect(events.count == 2)
            #expect(complete.error?.code == .partialFailure)
            #expect(complete.error?.partialErrors.map(\.error?.code) == [.invalidArguments, .unknownItem])
            let database = Wire.ModifySubscriptionsRequest(subscriptionsToSave: [
                Wire.Subscription(subscriptionID: "d", kind: .database(Wire.DatabaseSubscription()))
            ])
            let publicRefusal = try await alice.run(.modifySubscriptions(database), scope: .public)
            #expect(publicRefusal.complete.error?.partialErrors.first?.error?.message
                == "subscription d: database subscriptions are not supported in the public database")
            #expect(try await alice.run(.fetchSubscriptions(Wire.FetchSubscriptionsRequest(fetchAllSubscriptions: true)),
                scope: .unspecified).complete.error?.code == .badDatabase)
            await alice.client.close()
        }
    }
}
