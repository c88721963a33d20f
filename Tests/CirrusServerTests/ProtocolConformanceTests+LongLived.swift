@testable import CirrusServer
import CirrusStore
import CirrusTestSupport
import CirrusWire
import Foundation
import Testing

/// The rules of frame.proto for long-lived operations (Cancel, detach, Resume and
/// OPERATION_ALREADY_ATTACHED) and for container-level kinds, spoken in raw frames.
@Suite("Protocol conformance: long-lived operations and container-level kinds", .serialized)
struct LongLivedConformanceTests {
    /// A server whose long-lived operations emit five events and wait, after the second, at
    /// the gate the body gets.
    private func withWaitingLongLivedServer(_ body: (LongLivedHarness, Gate) async throws -> Void) async throws {
        let gate = Gate()
        try await withLongLivedServer(executor: { _ in SteppedExecutor(count: 5, pauseAfter: 2, gate: gate) }) { harness in
            defer { gate.open() }
            try await body(harness, gate)
        }
    }

    @Test func cancelOfALongLivedOperationIsAnsweredCancelledAndCancelsItForGood() async throws {
        try await withWaitingLongLivedServer { harness, gate in
            let (client, _) = try await TestClient.conformant(port: harness.port)
            try await client.openLongLived(conformanceFetch, operationID: "doomed", streamID: 1)
            let followed = try await client.follow(streamID: 1, stopAfter: 2)
            #expect(followed.persisted)
            try await eventually("the operation waits") { gate.waiting == 1 }
            try await client.cancel(streamID: 1)
            let (events, complete) = try await client.untilComplete(streamID: 1)
            #expect(events.isEmpty)
            #expect(complete.error?.code == .operationCancelled)
            #expect(complete.lastSeq == 2)
            var listStream: UInt64 = 3
            try await eventually("the operation is no longer listed") {
                defer { listStream += 2 }
                return try await !client.listLongLived(streamID: listStream).contains("doomed")
            }
        }
    }

    @Test func detachGetsNothingBackAndAResumeRightAfterAttaches() async throws {
        try await withWaitingLongLivedServer { harness, gate in
            let (client, _) = try await TestClient.conformant(port: harness.port)
            try await client.openLongLived(conformanceFetch, operationID: "kept", streamID: 1)
            _ = try await client.follow(streamID: 1, stopAfter: 2)
            try await client.cancel(streamID: 1, detach: true)
            try await client.expectNothingPending()
            try await client.resume("kept", after: 2, streamID: 3)
            try await eventually("the operation waits") { gate.waiting == 1 }
            gate.open()
            let followed = try await client.follow(streamID: 3)
            #expect(followed.persisted)
            #expect(followed.events.map(\.seq) == [3, 4, 5])
            #expect(followed.complete?.error == nil)
            #expect(followed.complete?.lastSeq == 5)
        }
    }

    @Test func aSecondResumeIsRefusedAlreadyAttachedAndTheFirstStreamGoesOn() async throws {
        try await withWaitingLongLivedServer { harness, gate in
            let (client, _) = try await TestClient.conformant(port: harness.port)
            try await client.openLongLived(conformanceFetch, operationID: "busy", streamID: 1)
            _ = try await client.follow(streamID: 1, stopAfter: 2)
            // On the same connection …
            try await client.resume("busy", after: 0, streamID: 3)
            #expect(try await client.untilComplete(streamID: 3).complete.error?.code == .operationAlreadyAttached)
            // … and on another one.
            let (other, _) = try await TestClient.conformant(port: harness.port)
            try await other.resume("busy", after: 0, streamID: 1)
            #expect(try await other.untilComplete(streamID: 1).complete.error?.code == .operationAlreadyAttached)
            gate.open()
            let rest = try await client.follow(streamID: 1)
            #expect(rest.events.map(\.seq) == [3, 4, 5])
            #expect(rest.complete?.error == nil)
        }
    }

    @Test func aResumeAttachesOnceTheFollowersConnectionClosed() async throws {
        try await withWaitingLongLivedServer { harness, gate in
            let (first, _) = try await TestClient.conformant(port: harness.port)
            try await first.openLongLived(conformanceFetch, operationID: "moved", streamID: 1)
            _ = try await first.follow(streamID: 1, stopAfter: 2)
            let (second, _) = try await TestClient.conformant(port: harness.port)
            try await second.resume("moved", after: 2, streamID: 1)
            #expect(try await second.untilComplete(streamID: 1).complete.error?.code == .operationAlreadyAttached)
            try await first.channel.close()
            var streamID: UInt64 = 3
            var attached = false
            try await eventually("the Resume attaches") {
                try await second.resume("moved", after: 2, streamID: streamID)
                let frame = try await second.nextFrame()
                #expect(frame.streamID == streamID)
                streamID += 2
                switch frame.kind {
                case .persisted:
                    attached = true
                case .complete(let complete):
                    #expect(complete.error?.code == .operationAlreadyAttached)
                default:
                    throw UnexpectedFrame(frame: frame)
                }
                return attached
            }
            gate.open()
            let rest = try await second.follow(streamID: streamID - 2)
            #expect(rest.events.map(\.seq) == [3, 4, 5])
            #expect(rest.complete?.lastSeq == 5)
        }
    }

    @Test func aResultLargerThanTheClientsLimitEndsTheStreamWithLimitExceeded() async throws {
        try await withLongLivedServer { harness in
            // The operation's request, which FetchLongLivedOperation returns, holds a 20 KB record.
            let (writer, _) = try await TestClient.conformant(port: harness.port)
            let big = note("big", title: String(repeating: "y", count: 20_000))
            try await writer.openLongLived(.modifyRecords(Wire.ModifyRecordsRequest(recordsToSave: [big])), operationID: "large", streamID: 1)
            #expect(try await writer.follow(streamID: 1).complete?.error == nil)
            let (reader, _) = try await TestClient.conformant(port: harness.port, maxFrameBytes: 16_384)
            try await reader.open(.fetchLongLivedOperation(Wire.FetchLongLivedOperationRequest(operationID: "large")), streamID: 1, scope: .unspecified)
            let complete = try await reader.untilComplete(streamID: 1).complete
            #expect(complete.result == nil)
            #expect(complete.error?.code == .limitExceeded)
            #expect(complete.error?.message.contains("16384") == true, "\(complete)")
            // On a connection with room, the same request gets its result.
            let info = try await writer.containerMethod(
                .fetchLongLivedOperation(Wire.FetchLongLivedOperationRequest(operationID: "large")), streamID: 3)
            #expect(info.error == nil)
            try await reader.expectNothingPending()
        }
    }

    // MARK: - Container-level kinds

    /// Every kind the protos call container-level, sent as they say: no database scope.
    static let containerLevelRequests: [Wire.Open.Request] = [
        .fetchNotificationChanges(Wire.FetchNotificationChangesRequest()),
        .markNotificationsRead(Wire.MarkNotificationsReadRequest()),
        .modifyBadge(Wire.ModifyBadgeRequest()),
        .fetchShareMetadata(Wire.FetchShareMetadataRequest()),
        .fetchShareParticipants(Wire.FetchShareParticipantsRequest()),
        .acceptShares(Wire.AcceptSharesRequest()),
        .discoverUserIdentities(Wire.DiscoverUserIdentitiesRequest()),
        .discoverAllUserIdentities(Wire.DiscoverAllUserIdentitiesRequest()),
        .fetchLongLivedOperationIDs(Wire.FetchLongLivedOperationIDsRequest()),
        .fetchLongLivedOperation(Wire.FetchLongLivedOperationRequest(operationID: "none")),
        .fetchUserRecordID(Wire.FetchUserRecordIDRequest()),
        .accountStatus(Wire.AccountStatusRequest()),
        .applicationPermission(Wire.ApplicationPermissionRequest()),
    ]

    @Test(arguments: containerLevelRequests)
    func aContainerLevelKindWithNoScopeIsRunOrRefusedByName(_ request: Wire.Open.Request) async throws {
        #expect(StorageExecutor.isContainerLevel(request))
        try await withLongLivedServer { harness in
            let (client, _) = try await TestClient.conformant(port: harness.port)
            try await client.open(request, streamID: 1, scope: .unspecified)
            let complete = try await client.untilComplete(streamID: 1).complete
            switch request {
            case .fetchNotificationChanges, .fetchLongLivedOperationIDs, .fetchUserRecordID, .accountStatus,
                .discoverUserIdentities, .discoverAllUserIdentities, .markNotificationsRead, .modifyBadge,
                .fetchShareMetadata, .fetchShareParticipants, .acceptShares:
                #expect(complete.error == nil, "\(complete)")
            case .applicationPermission:
                // It names no permission.
                #expect(complete.error?.code == .invalidArguments, "\(complete)")
            case .fetchLongLivedOperation:
                #expect(complete.error?.code == .unknownOperation)
            default:
                #expect(complete.error?.code == .serverRejectedRequest)
                let name = StorageExecutor.kindName(request)
                #expect(complete.error?.message.contains(name) == true, "\(complete) names \(name)")
            }
            try await client.expectNothingPending()
        }
    }

    /// Every request kind of the protocol, one each.
    static let everyKind: [Wire.Open.Request] =
        containerLevelRequests + [
            .modifyRecords(.init()), .fetchRecords(.init()), .query(.init()), .modifyRecordZones(.init()),
            .fetchRecordZones(.init()), .fetchRecordZoneChanges(.init()), .fetchDatabaseChanges(.init()),
            .modifySubscriptions(.init()), .fetchSubscriptions(.init()), .fetchWebAuthToken(.init(apiToken: "t")),
            .watchNotifications(.init()), .uploadAsset(.init()), .downloadAsset(.init()),
        ]

    @Test func aKindTheServerDoesNotRunIsRefusedByNameAndNeverRegisteredAsLongLived() async throws {
        try await withLongLivedServer { harness in
            let executor = StorageExecutor(storage: harness.storage)
            // The long-lived container methods are the registry's, not the executor's.
            let refused = Self.everyKind.filter { !executor.runs($0) && !LongLivedOperations.answers(Wire.Open(request: $0)) }
            #expect(!refused.isEmpty)
            let (client, _) = try await TestClient.conformant(port: harness.port)
            var streamID: UInt64 = 1
            for request in refused {
                let name = StorageExecutor.kindName(request)
                // With a database scope (looked up for database kinds) and without one; asked
                // to run long-lived.
                for scope in [Wire.DatabaseScope.unspecified, .private, .public] {
                    var configuration = Wire.OperationConfiguration()
                    configuration.isLongLived = true
                    let open = Wire.Open(
                        operationID: "unrun-\(streamID)", databaseScope: scope, containerIdentifier: container,
                        configuration: configuration, initialWindow: 100, request: request)
                    try await client.send(Wire.Frame(streamID: streamID, kind: .open(open)))
                    let frame = try await client.nextFrame()
                    guard case .complete(let complete) = frame.kind else {
                        Issue.record("\(name) in \(scope): expected its refusal, got \(frame)")
                        return
                    }
                    #expect(complete.error?.code == .serverRejectedRequest, "\(name) in \(scope): \(complete)")
                    #expect(complete.error?.message.contains(name) == true, "\(complete) names \(name)")
                    streamID += 2
                }
            }
            #expect(try await client.listLongLived(streamID: streamID) == [])
            #expect(harness.registry.runningCount == 0)
            try await client.expectNothingPending()
        }
    }
}
