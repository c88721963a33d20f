import CirrusKit
import CirrusModel
import CirrusTestSupport
import CirrusWire
import Foundation
import Testing

/// Requests, events and results of the subscription operations and
/// `CKFetchNotificationChangesOperation`, against scripted replies.
@Suite("Subscription operations on the wire")
struct SubscriptionOperationTests {
    func container(_ peer: FakePeer) -> CKContainer {
        CKContainer(identifier: "iCloud.test", configuration: TestCertificates.client(port: peer.port))
    }

    static func saved(_ id: String) -> Wire.Event.Payload {
        .modifySubscriptions(
            .init(callback: .perSubscriptionSave(.init(subscriptionID: id, outcome: .subscription(.init(subscriptionID: id, kind: .database(.init()))))))
        )
    }

    static func fetched(_ id: String, zone: String = "Notes") -> Wire.Event.Payload {
        let subscription = Wire.Subscription(
            subscriptionID: id,
            kind: .recordZone(.init(zoneID: Wire.RecordZoneID(zoneName: zone, ownerName: "__defaultOwner__")))
        )
        return .fetchSubscriptions(.init(callback: .perSubscriptionResult(.init(subscriptionID: id, outcome: .subscription(subscription)))))
    }

    static func unknown(_ id: String) -> Wire.Event.Payload {
        .fetchSubscriptions(
            .init(callback: .perSubscriptionResult(.init(subscriptionID: id, outcome: .error(.init(code: .unknownItem, message: "no such subscription")))))
        )
    }

    static func partial(_ ids: [String], _ code: Wire.ErrorCode) -> Wire.OperationError {
        Wire.OperationError(
            code: .partialFailure,
            message: "some items failed",
            partialErrors: ids.map { Wire.ItemError(item: .subscriptionID($0), error: .init(code: code)) }
        )
    }

    @Test("Modify: the request in the database's scope, per-subscription save and delete callbacks, partialFailure")
    func modify() async throws {
        let peer = try await FakePeer.start { _, _ in
            FakeReply(
                payloads: [
                    Self.saved("db"),
                    .modifySubscriptions(
                        .init(callback: .perSubscriptionDelete(.init(subscriptionID: "gone", error: .init(code: .unknownItem, message: "none"))))
                    ),
                    .modifySubscriptions(.init(callback: .perSubscriptionDelete(.init(subscriptionID: "old")))),
                ],
                error: Self.partial(["gone"], .unknownItem)
            )
        }
        defer { Task { await peer.stop() } }
        let database = self.container(peer).sharedCloudDatabase
        let subscription = CKDatabaseSubscription(subscriptionID: "db")
        let operation = CKModifySubscriptionsOperation(subscriptionsToSave: [subscription], subscriptionIDsToDelete: ["gone", "old"])
        let saves = Recorder<(CKSubscription.ID, Result<CKSubscription, any Error>)>()
        let deletes = Recorder<(CKSubscription.ID, Result<Void, any Error>)>()
        let result = Recorder<Result<Void, any Error>>()
        let legacy = Recorder<([CKSubscription]?, [CKSubscription.ID]?)>()
        operation.perSubscriptionSaveBlock = { saves.append(($0, $1)) }
        operation.perSubscriptionDeleteBlock = { deletes.append(($0, $1)) }
        operation.modifySubscriptionsResultBlock = { result.append($0) }
        operation.modifySubscriptionsCompletionBlock = { saved, deleted, _ in legacy.append((saved, deleted)) }
        await runToCompletion(operation, on: database)

        let open = try #require(peer.opens.first)
        #expect(open.databaseScope == .shared)
        #expect(
            open.request
                == .modifySubscriptions(
                    .init(
                        subscriptionsToSave: [.init(subscriptionID: "db", kind: .database(.init()))],
                        subscriptionIDsToDelete: ["gone", "old"]
                    )
                )
        )
        #expect(saves.values.map(\.0) == ["db"])
        #expect((try saves.values.first?.1.get()) is CKDatabaseSubscription)
        #expect(deletes.values.map(\.0) == ["gone", "old"])
        #expect(deletes.values.first?.1.failureCode == .unknownItem)
        #expect(deletes.values.last.map { (try? $0.1.get()) != nil } == true)
        let error = try #require(result.values.first?.failureError)
        #expect(error.code == .partialFailure)
        #expect((error.partialErrorsByItemID?["gone"] as? CKError)?.code == .unknownItem)
        #expect(legacy.values.first?.0?.map(\.subscriptionID) == ["db"])
        #expect(legacy.values.first?.1 == ["old"])
    }

    @Test("Modify: subscriptions the checks refuse fail the operation before anything is sent")
    func modifyRefusals() async throws {
        let peer = try await FakePeer.start()
        defer { Task { await peer.stop() } }
        let container = self.container(peer)
        let query = CKQuerySubscription(recordType: "Note", predicate: CKPredicate(value: true), subscriptionID: "q", options: [.firesOnRecordUpdate])
        let cases: [(CKDatabase, CKSubscription, String)] = [
            (container.sharedCloudDatabase, query, "query subscriptions are not available in the shared database"),
            (container.publicCloudDatabase, CKDatabaseSubscription(subscriptionID: "d"), "database subscriptions are not available"),
            (container.privateCloudDatabase, CKRecordZoneSubscription(zoneID: .default, subscriptionID: "z"), "need a custom zone"),
            (
                container.privateCloudDatabase,
                CKQuerySubscription(recordType: "Note", predicate: CKPredicate(format: "a =="), subscriptionID: "p", options: [.firesOnRecordCreation]),
                "is invalid"
            ),
        ]
        for (database, subscription, message) in cases {
            let operation = CKModifySubscriptionsOperation(subscriptionsToSave: [subscription], subscriptionIDsToDelete: nil)
            let result = Recorder<Result<Void, any Error>>()
            operation.modifySubscriptionsResultBlock = { result.append($0) }
            await runToCompletion(operation, on: database)
            let error = try #require(result.values.first?.failureError)
            #expect(error.code == .invalidArguments)
            #expect(error.message?.contains(message) == true, "\(error)")
        }
        let tooMany = CKModifySubscriptionsOperation(subscriptionsToSave: nil, subscriptionIDsToDelete: (0...400).map { "s\($0)" })
        let result = Recorder<Result<Void, any Error>>()
        tooMany.modifySubscriptionsResultBlock = { result.append($0) }
        await runToCompletion(tooMany, on: container.privateCloudDatabase)
        #expect(result.values.first?.failureCode == .limitExceeded)
        #expect(peer.opens.isEmpty)
    }

    @Test("Fetch: by ID and all; per-subscription results with unknownItem; the deprecated block")
    func fetch() async throws {
        let peer = try await FakePeer.start { open, _ in
            guard case .fetchSubscriptions(let request) = open.request else { return FakeReply() }
            if request.fetchAllSubscriptions {
                return FakeReply(payloads: [Self.fetched("a"), Self.fetched("b", zone: "Other")])
            }
            return FakeReply(payloads: [Self.fetched("a"), Self.unknown("nope")], error: Self.partial(["nope"], .unknownItem))
        }
        defer { Task { await peer.stop() } }
        let database = self.container(peer).privateCloudDatabase
        let operation = CKFetchSubscriptionsOperation(subscriptionIDs: ["a", "nope"])
        let results = Recorder<(CKSubscription.ID, Result<CKSubscription, any Error>)>()
        let legacy = Recorder<[CKSubscription.ID: CKSubscription]>()
        operation.perSubscriptionResultBlock = { results.append(($0, $1)) }
        operation.fetchSubscriptionCompletionBlock = { byID, _ in legacy.append(byID ?? [:]) }
        await runToCompletion(operation, on: database)
        #expect(peer.opens.first?.request == .fetchSubscriptions(.init(subscriptionIDs: ["a", "nope"])))
        #expect(peer.opens.first?.databaseScope == .private)
        #expect(results.values.map(\.0) == ["a", "nope"])
        #expect((try? results.values.first?.1.get() as? CKRecordZoneSubscription)?.zoneID == CKRecordZone.ID(zoneName: "Notes"))
        #expect(results.values.last?.1.failureCode == .unknownItem)
        #expect(legacy.values.first.map { Array($0.keys) } == ["a"])

        // The async API on the same operations.
        let all = try await database.allSubscriptions()
        #expect(all.map(\.subscriptionID) == ["a", "b"])
        #expect(peer.opens.last?.request == .fetchSubscriptions(.init(fetchAllSubscriptions: true)))
        let one = try await database.subscription(for: "a")
        #expect(one.subscriptionType == .recordZone)
        await #expect(throws: CKError.self) { _ = try await database.subscription(for: "nope") }
    }

    @Test("Async save and delete: the saved subscription, the deleted ID, unknownItem thrown")
    func asyncModify() async throws {
        let peer = try await FakePeer.start { open, _ in
            guard case .modifySubscriptions(let request) = open.request else { return FakeReply() }
            if let id = request.subscriptionIDsToDelete.first {
                if id == "gone" {
                    let error = Wire.OperationError(code: .unknownItem, message: "none")
                    return FakeReply(
                        payloads: [.modifySubscriptions(.init(callback: .perSubscriptionDelete(.init(subscriptionID: id, error: error))))],
                        error: Self.partial([id], .unknownItem)
                    )
                }
                return FakeReply(payloads: [.modifySubscriptions(.init(callback: .perSubscriptionDelete(.init(subscriptionID: id))))])
            }
            return FakeReply(payloads: request.subscriptionsToSave.map { Self.saved($0.subscriptionID) })
        }
        defer { Task { await peer.stop() } }
        let database = self.container(peer).privateCloudDatabase
        let saved = try await database.save(CKDatabaseSubscription(subscriptionID: "db"))
        #expect(saved.subscriptionID == "db")
        #expect(try await database.deleteSubscription(withID: "db") == "db")
        do {
            _ = try await database.deleteSubscription(withID: "gone")
            Issue.record("deleting an unknown subscription succeeded")
        } catch let error as CKError {
            #expect(error.code == .unknownItem)
        }
        let handled = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<CKSubscription, any Error>) in
            database.save(CKDatabaseSubscription(subscriptionID: "cb")) { subscription, error in
                if let subscription { continuation.resume(returning: subscription) } else { continuation.resume(throwing: error ?? TestTimeout()) }
            }
        }
        #expect(handled.subscriptionID == "cb")
    }

    // MARK: - CKFetchNotificationChangesOperation

    static func notification(_ id: String) -> Wire.PushNotification {
        Wire.PushNotification(
            notificationID: id,
            notificationType: .database,
            subscriptionID: "db",
            detail: .database(.init(databaseScope: .private))
        )
    }

    @Test("Fetch notification changes: a container-level Open, notifications in order, token and moreComing")
    func notificationChanges() async throws {
        let peer = try await FakePeer.start { _, _ in
            FakeReply(
                payloads: [
                    .fetchNotificationChanges(.init(callback: .notificationChanged(Self.notification("n1")))),
                    .fetchNotificationChanges(.init(callback: .notificationChanged(Self.notification("n2")))),
                ],
                result: .fetchNotificationChanges(.init(serverChangeToken: .init(opaque: [4, 2]), moreComing: true))
            )
        }
        defer { Task { await peer.stop() } }
        let container = self.container(peer)
        let operation = CKFetchNotificationChangesOperation(previousServerChangeToken: CKServerChangeToken(opaqueBytes: [1]))
        operation.resultsLimit = 2
        let notifications = Recorder<CKNotification>()
        let result = Recorder<Result<(serverChangeToken: CKServerChangeToken, moreComing: Bool), any Error>>()
        let legacy = Recorder<CKServerChangeToken?>()
        operation.notificationChangedBlock = { notifications.append($0) }
        operation.fetchNotificationChangesResultBlock = { result.append($0) }
        operation.fetchNotificationChangesCompletionBlock = { token, _ in legacy.append(token) }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            operation.completionBlock = { continuation.resume() }
            container.add(operation)
        }
        let open = try #require(peer.opens.first)
        #expect(open.databaseScope == .unspecified)
        #expect(open.containerIdentifier == "iCloud.test")
        #expect(open.request == .fetchNotificationChanges(.init(previousServerChangeToken: .init(opaque: [1]), resultsLimit: 2)))
        #expect(notifications.values.map { $0.notificationID?.rawValue } == ["n1", "n2"])
        #expect(notifications.values.allSatisfy { $0 is CKDatabaseNotification })
        let (token, moreComing) = try #require(try result.values.first?.get())
        #expect(token == CKServerChangeToken(opaqueBytes: [4, 2]))
        #expect(moreComing)
        #expect(operation.moreComing)
        #expect(legacy.values == [CKServerChangeToken(opaqueBytes: [4, 2])])
    }

    @Test("Fetch notification changes: the seed sample compiles and runs as written; an expired token fails it")
    func notificationChangesSample() async throws {
        let peer = try await FakePeer.start { open, _ in
            guard case .fetchNotificationChanges(let request) = open.request else { return FakeReply() }
            if request.previousServerChangeToken != nil {
                return FakeReply(error: .init(code: .changeTokenExpired, message: "too old"))
            }
            return FakeReply(result: .fetchNotificationChanges(.init(serverChangeToken: .init(opaque: [8]), moreComing: false)))
        }
        defer { Task { await peer.stop() } }
        let container = self.container(peer)
        let tokens = Recorder<CKServerChangeToken>()
        let failures = Recorder<CKError.Code?>()
        for previous in [nil, CKServerChangeToken(opaqueBytes: [1])] {
            let operation = CKFetchNotificationChangesOperation(previousServerChangeToken: previous)
            // --- sample
            operation.fetchNotificationChangesResultBlock = { result in
                switch result {
                case .success((let newToken, _)):
                    tokens.append(newToken)
                case .failure(let error):
                    failures.append((error as? CKError)?.code)
                }
            }
            // --- end of sample
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                operation.completionBlock = { continuation.resume() }
                container.add(operation)
            }
        }
        #expect(tokens.values == [CKServerChangeToken(opaqueBytes: [8])])
        #expect(failures.values == [.changeTokenExpired])
    }
}

extension Result {
    var failureError: CKError? {
        guard case .failure(let error) = self else { return nil }
        return error as? CKError
    }
}
