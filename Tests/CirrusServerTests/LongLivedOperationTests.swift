@testable import CirrusServer
import CirrusStore
import CirrusTestSupport
import CirrusWire
import Foundation
import NIOConcurrencyHelpers
import Testing

private func notes(_ count: Int, prefix: String = "r", zone: Wire.RecordZoneID = defaultZone) -> [Wire.Record] {
    (0..<count).map { note("\(prefix)\($0)", title: "note \($0)", zone: zone) }
}

private let fetchSomething = Wire.Open.Request.fetchRecords(Wire.FetchRecordsRequest(recordIDs: [recordID("x")]))

@Suite("Long-lived operations: registry, journal, resume", .serialized)
struct LongLivedOperationTests {
    @Test func aClientGoneBeforePersistedLeavesNothingListed() async throws {
        let gate = Gate()
        try await withLongLivedServer(afterRegistration: { _ in try? await gate.wait() }) { harness in
            let vanishing = try await TestClient.connect(port: harness.port)
            _ = try await vanishing.handshake()
            try await vanishing.openLongLived(fetchSomething, operationID: "vanishing", streamID: 1)
            try await eventually("the registration") { gate.waiting == 1 }
            await vanishing.close()
            try await eventually("the server to see the close") { harness.server.connectionCount == 0 }
            gate.open()
            let key = LongLivedOperationKey(owner: "_alice", operationID: "vanishing")
            try await eventually("the abandoned registration to go") {
                try await harness.storage.longLivedOperation(key) == nil
            }

            let alice = try await TestClient.connect(port: harness.port)
            _ = try await alice.handshake()
            #expect(try await alice.listLongLived(streamID: 1) == [])
            // With someone to hear Persisted, the same ID is registered and listed.
            try await alice.openLongLived(fetchSomething, operationID: "vanishing", streamID: 3)
            let followed = try await alice.follow(streamID: 3)
            #expect(followed.persisted)
            #expect(try await alice.listLongLived(streamID: 5) == ["vanishing"])
            await alice.close()
        }
    }

    /// The first connection drops while the operation is being registered; the client opens it
    /// again on a second one, is refused as a duplicate (the registration committed), and
    /// resumes: the operation runs for it, and the first connection, finding its client gone,
    /// does not drop the registration the client now follows.
    @Test func aResumeClaimsAnOperationWhoseFirstConnectionDroppedBeforePersisted() async throws {
        let gate = Gate()
        // Only the first registration waits (the one the dropped connection made).
        let held = NIOLockedValueBox(false)
        let hold: @Sendable (LongLivedOperationKey) async -> Void = { _ in
            let first = held.withLockedValue { held -> Bool in
                defer { held = true }
                return !held
            }
            if first { await gate.waitThroughCancellation() }
        }
        try await withLongLivedServer(afterRegistration: hold) { harness in
            let first = try await TestClient.connect(port: harness.port)
            _ = try await first.handshake()
            try await first.openLongLived(fetchSomething, operationID: "raced", streamID: 1)
            try await eventually("the registration") { gate.waiting == 1 }
            await first.close()
            try await eventually("the server to see the close") { harness.server.connectionCount == 0 }

            let second = try await TestClient.connect(port: harness.port)
            _ = try await second.handshake()
            try await second.openLongLived(fetchSomething, operationID: "raced", streamID: 1)
            let again = try await second.follow(streamID: 1)
            #expect(again.complete?.error?.code == .duplicateOperationID, "\(again)")
            try await second.resume("raced", after: 0, streamID: 3)
            let resumed = try await second.follow(streamID: 3)
            #expect(resumed.persisted)
            // It ran: the record it fetches does not exist.
            #expect(resumed.complete?.error?.code == .partialFailure, "\(resumed)")
            #expect(!resumed.events.isEmpty)

            // The first connection's registration goes on now and finds its client gone.
            gate.open()
            try await eventually("the first registration to go on") { gate.waiting == 0 }
            // What it does next (it finds its stream gone) takes a moment; nothing to wait on.
            try await Task.sleep(for: .milliseconds(500))
            let key = LongLivedOperationKey(owner: "_alice", operationID: "raced")
            #expect(try await harness.storage.longLivedOperation(key) != nil, "the completed operation stays listed")
            #expect(try await second.listLongLived(streamID: 5) == ["raced"])
            await second.close()
        }
    }

    @Test func theGroupsDefaultConfigurationTakesPartInTheMergeRule() async throws {
        try await withLongLivedServer { harness in
            let alice = try await TestClient.connect(port: harness.port)
            _ = try await alice.handshake()
            let group = Wire.OperationGroup(
                operationGroupID: "g", defaultConfiguration: Wire.OperationConfiguration(isLongLived: true))
            // The group says long-lived and the operation says nothing: long-lived.
            let byGroup = Wire.Open(
                operationID: "by-group", databaseScope: .private, containerIdentifier: container, group: group,
                initialWindow: 100, request: fetchSomething)
            try await alice.send(Wire.Frame(streamID: 1, kind: .open(byGroup)))
            #expect(try await alice.follow(streamID: 1).persisted)
            // The operation's own explicit value wins over the group's.
            let overridden = Wire.Open(
                operationID: "overridden", databaseScope: .private, containerIdentifier: container,
                configuration: Wire.OperationConfiguration(isLongLived: false), group: group, initialWindow: 100,
                request: fetchSomething)
            try await alice.send(Wire.Frame(streamID: 3, kind: .open(overridden)))
            let plain = try await alice.follow(streamID: 3)
            #expect(!plain.persisted && plain.complete != nil)
            #expect(try await alice.listLongLived(streamID: 5) == ["by-group"])
            await alice.close()
        }
    }

    @Test func detachedRunContinuesAndResumesFromAnySeq() async throws {
        try await withLongLivedServer { harness in
            let records = notes(1_000)
            let first = try await TestClient.connect(port: harness.port)
            _ = try await first.handshake()
            try await first.openLongLived(
                .modifyRecords(Wire.ModifyRecordsRequest(recordsToSave: records)), operationID: "big", streamID: 1,
                window: 4)
            let before = try await first.follow(streamID: 1, window: 4, stopAfter: 4)
            #expect(before.persisted)
            expectContiguous(before.events)
            await first.close()

            let key = LongLivedOperationKey(owner: "_alice", operationID: "big")
            try await eventually("the detached run to finish") {
                try await harness.storage.longLivedOperation(key)?.isCompleted == true
            }
            let second = try await TestClient.connect(port: harness.port)
            _ = try await second.handshake()
            #expect(try await second.listLongLived(streamID: 1) == ["big"])
            try await second.resume("big", after: 0, streamID: 3)
            let all = try await second.follow(streamID: 3)
            #expect(all.persisted)
            #expect(all.events.count == 1_000)
            expectContiguous(all.events)
            #expect(all.complete?.lastSeq == 1_000)
            #expect(all.complete?.error == nil)
            #expect(all.events.map { savedRecordOf($0)?.recordID?.recordName } == records.map { $0.recordID?.recordName })
            #expect(Array(all.events.prefix(4)) == before.events, "the replay is what the first stream saw")

            try await second.resume("big", after: 600, streamID: 5)
            let tail = try await second.follow(streamID: 5)
            #expect(tail.events.count == 400)
            expectContiguous(tail.events, from: 601)
            #expect(tail.events == Array(all.events.suffix(400)))
            #expect(tail.complete?.lastSeq == 1_000)
            await second.close()
        }
    }

    @Test func resumeWhileRunningHandsOverFromReplayToLive() async throws {
        let gate = Gate()
        try await withLongLivedServer(executor: { _ in SteppedExecutor(count: 300, pauseAfter: 150, gate: gate) }) {
            harness in
            let first = try await TestClient.connect(port: harness.port)
            _ = try await first.handshake()
            try await first.openLongLived(fetchSomething, operationID: "stepped", streamID: 1, window: 10)
            let seen = try await first.follow(streamID: 1, window: 10, stopAfter: 10)
            // Detach: the run goes on; nothing more comes on this stream.
            try await first.send(Wire.Frame(streamID: 1, kind: .cancel(Wire.Cancel(detach: true))))
            try await eventually("the run to reach its pause") { gate.waiting == 1 }

            let second = try await TestClient.connect(port: harness.port)
            _ = try await second.handshake()
            try await second.resume("stepped", after: 10, streamID: 1, window: 20)
            let replayed = try await second.follow(streamID: 1, window: 20, stopAfter: 140)
            expectContiguous(replayed.events, from: 11)
            gate.open()
            let live = try await second.follow(streamID: 1, window: 20)
            let all = seen.events + replayed.events + live.events
            expectContiguous(all)
            #expect(all.map(steppedName) == (1...300).map { "e\($0)" })
            #expect(live.complete?.lastSeq == 300)
            #expect(live.complete?.error == nil)
            await first.close()
            await second.close()
        }
    }

    @Test func aLaterResumeAttachesOnceTheFollowerDetached() async throws {
        let gate = Gate()
        try await withLongLivedServer(executor: { _ in SteppedExecutor(count: 40, pauseAfter: 20, gate: gate) }) {
            harness in
            let alice = try await TestClient.connect(port: harness.port)
            _ = try await alice.handshake()
            try await alice.openLongLived(fetchSomething, operationID: "contested", streamID: 1)
            _ = try await alice.follow(streamID: 1, stopAfter: 20)
            let other = try await TestClient.connect(port: harness.port)
            _ = try await other.handshake()
            try await other.resume("contested", after: 20, streamID: 1)
            let refused = try await other.follow(streamID: 1)
            #expect(refused.complete?.error?.code == .operationAlreadyAttached)
            // The follower detaches: the operation is free to follow at once.
            try await alice.send(Wire.Frame(streamID: 1, kind: .cancel(Wire.Cancel(detach: true))))
            try await alice.send(Wire.Frame(streamID: 0, kind: .ping(Wire.Ping(nonce: 1))))
            #expect(try await alice.nextFrame().kind == .pong(Wire.Pong(nonce: 1)))
            try await other.resume("contested", after: 20, streamID: 3)
            let persisted = try await other.nextFrame()
            #expect(persisted.kind == .persisted(Wire.Persisted(operationID: "contested")))
            gate.open()
            let rest = try await other.follow(streamID: 3)
            expectContiguous(rest.events, from: 21)
            #expect(rest.complete?.lastSeq == 40)
            // The detached stream got nothing more.
            if let late = alice.collector.take() { Issue.record("the detached stream got \(late)") }
            await alice.close()
            await other.close()
        }
    }

    @Test func completedOperationReplaysAfterARestartOfTheRegistry() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cirrus-ll-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var original: Followed?
        try await withLongLivedServer(directory: directory) { harness in
            let alice = try await TestClient.connect(port: harness.port)
            _ = try await alice.handshake()
            try await alice.openLongLived(
                .modifyRecords(Wire.ModifyRecordsRequest(recordsToSave: notes(30))), operationID: "done", streamID: 1)
            original = try await alice.follow(streamID: 1)
            await alice.close()
        }
        try await withLongLivedServer(directory: directory) { harness in
            let alice = try await TestClient.connect(port: harness.port)
            _ = try await alice.handshake()
            let info = try await alice.containerMethod(
                .fetchLongLivedOperation(Wire.FetchLongLivedOperationRequest(operationID: "done")), streamID: 1)
            guard case .fetchLongLivedOperation(let operation) = info.result else {
                Issue.record("no info in \(info)")
                return
            }
            #expect(operation.status == .completed)
            #expect(operation.lastSeq == 30)
            #expect(operation.open?.configuration?.isLongLived == true)
            #expect(operation.completionDate != nil)
            try await alice.resume("done", after: 0, streamID: 3)
            let replayed = try await alice.follow(streamID: 3)
            #expect(replayed.events == original?.events)
            #expect(replayed.complete == original?.complete)
            await alice.close()
        }
    }

    @Test func cancellingADetachedOperationStopsAndUnlistsIt() async throws {
        let gate = Gate()
        try await withLongLivedServer(executor: { _ in SteppedExecutor(count: 20, pauseAfter: 5, gate: gate) }) {
            harness in
            let alice = try await TestClient.connect(port: harness.port)
            _ = try await alice.handshake()
            try await alice.openLongLived(fetchSomething, operationID: "doomed", streamID: 1)
            _ = try await alice.follow(streamID: 1, stopAfter: 5)
            try await eventually("the run to pause") { gate.waiting == 1 }
            try await alice.send(Wire.Frame(streamID: 1, kind: .cancel(Wire.Cancel(reason: "user"))))
            let cancelled = try await alice.follow(streamID: 1)
            #expect(cancelled.complete?.error?.code == .operationCancelled)
            #expect(cancelled.complete?.lastSeq == 5)
            try await eventually("the run to stop") { harness.registry.runningCount == 0 }
            #expect(try await alice.listLongLived(streamID: 3) == [])
            try await alice.resume("doomed", after: 0, streamID: 5)
            let frame = try await alice.nextFrame()
            guard case .complete(let complete) = frame.kind else {
                Issue.record("expected Complete, got \(frame)")
                return
            }
            #expect(complete.error?.code == .unknownOperation)
            #expect(gate.waiting == 0)
            await alice.close()
        }
    }

    @Test func acknowledgingTheCompletionDropsTheOperation() async throws {
        try await withLongLivedServer { harness in
            let alice = try await TestClient.connect(port: harness.port)
            _ = try await alice.handshake()
            try await alice.openLongLived(
                .modifyRecords(Wire.ModifyRecordsRequest(recordsToSave: notes(3))), operationID: "acked", streamID: 1)
            let followed = try await alice.follow(streamID: 1)
            #expect(followed.complete?.lastSeq == 3)
            #expect(try await alice.listLongLived(streamID: 3) == ["acked"])
            try await alice.send(Wire.Frame(streamID: 1, kind: .cancel(Wire.Cancel(completionAcknowledged: true))))
            let key = LongLivedOperationKey(owner: "_alice", operationID: "acked")
            try await eventually("the acknowledgement") { try await harness.storage.longLivedOperation(key) == nil }
            #expect(try await harness.storage.longLivedEvents(key, after: 0, limit: 10).isEmpty)
            #expect(try await alice.listLongLived(streamID: 5) == [])
            await alice.close()
        }
    }

    @Test func anotherUsersOperationLooksUnknown() async throws {
        try await withLongLivedServer { harness in
            let alice = try await TestClient.connect(port: harness.port, user: "alice")
            _ = try await alice.handshake()
            try await alice.openLongLived(fetchSomething, operationID: "mine", streamID: 1)
            _ = try await alice.follow(streamID: 1)

            let bob = try await TestClient.connect(port: harness.port, user: "bob")
            _ = try await bob.handshake()
            #expect(try await bob.listLongLived(streamID: 1) == [])
            var answers: [Wire.OperationError?] = []
            for (index, id) in ["mine", "never-existed"].enumerated() {
                try await bob.resume(id, after: 0, streamID: UInt64(3 + 4 * index))
                let resumed = try await bob.nextFrame()
                guard case .complete(let complete) = resumed.kind else { throw UnexpectedFrame(frame: resumed) }
                let fetched = try await bob.containerMethod(
                    .fetchLongLivedOperation(Wire.FetchLongLivedOperationRequest(operationID: id)),
                    streamID: UInt64(5 + 4 * index))
                #expect(fetched.result == nil)
                answers += [complete.error, fetched.error].map { error in
                    error.map { Wire.OperationError(code: $0.code, message: $0.message.replacingOccurrences(of: id, with: "ID")) }
                }
            }
            #expect(answers[0]?.code == .unknownOperation)
            #expect(Array(answers[0...1]) == Array(answers[2...3]), "exactly as for an ID nobody has")
            await alice.close()
            await bob.close()
        }
    }

    @Test func duplicateIDIsRefused() async throws {
        try await withLongLivedServer { harness in
            let alice = try await TestClient.connect(port: harness.port)
            _ = try await alice.handshake()
            try await alice.openLongLived(fetchSomething, operationID: "twice", streamID: 1)
            _ = try await alice.follow(streamID: 1)
            try await alice.openLongLived(fetchSomething, operationID: "twice", streamID: 3)
            let again = try await alice.follow(streamID: 3)
            #expect(!again.persisted)
            #expect(again.complete?.error?.code == .duplicateOperationID)
            await alice.close()
        }
    }

    @Test func completedOperationsExpireAfterTheRetention() async throws {
        let clock = ManualClock()
        try await withLongLivedServer(retentionSeconds: 3_600, clock: clock.read) { harness in
            let alice = try await TestClient.connect(port: harness.port)
            _ = try await alice.handshake()
            try await alice.openLongLived(fetchSomething, operationID: "old", streamID: 1)
            _ = try await alice.follow(streamID: 1)
            clock.advance(seconds: 3_600)
            #expect(try await alice.listLongLived(streamID: 3) == ["old"], "still within the retention")
            clock.advance(seconds: 1)
            #expect(try await alice.listLongLived(streamID: 5) == [])
            try await alice.resume("old", after: 0, streamID: 7)
            let frame = try await alice.nextFrame()
            #expect(frame.kind == .complete(Wire.Complete(error: Wire.OperationError(code: .unknownOperation, message: "no long-lived operation old"))))

            let maintenance = StorageMaintenance(storage: harness.storage, longLivedRetentionSeconds: 3_600, clock: clock.read)
            try await maintenance.runOnce()
            let key = LongLivedOperationKey(owner: "_alice", operationID: "old")
            #expect(try await harness.storage.longLivedOperation(key) == nil)
            await alice.close()
        }
    }

    @Test func journalAndDataAgreeForTenThousandRecords() async throws {
        try await withLongLivedServer { harness in
            let records = notes(10_000)
            let alice = try await TestClient.connect(port: harness.port)
            _ = try await alice.handshake()
            try await alice.openLongLived(
                .modifyRecords(Wire.ModifyRecordsRequest(recordsToSave: records)), operationID: "ten-k", streamID: 1,
                window: 1_000)
            let followed = try await alice.follow(streamID: 1, window: 1_000)
            #expect(followed.complete?.error == nil)
            #expect(followed.complete?.lastSeq == 10_000)
            expectContiguous(followed.events)
            let key = LongLivedOperationKey(owner: "_alice", operationID: "ten-k")
            var journaled: [Wire.Event] = []
            while journaled.count < 10_000 {
                let page = try await harness.storage.longLivedEvents(key, after: UInt64(journaled.count), limit: 1_000)
                guard !page.isEmpty else { break }
                journaled += page
            }
            #expect(journaled == followed.events)
            let reported = followed.events.compactMap(savedRecordOf)
            #expect(reported.count == 10_000)
            var stored: [Wire.Record] = []
            let database = DatabaseKey.private(container: container, user: "_alice")
            for start in stride(from: 0, to: records.count, by: 400) {
                let ids = records[start..<min(start + 400, records.count)].compactMap { record in
                    record.recordID.map { Wire.RecordID(recordName: $0.recordName, zoneID: Wire.RecordZoneID(zoneName: "_defaultZone", ownerName: "_alice")) }
                }
                stored += try await harness.storage.fetchRecords(ids, desiredKeys: nil, in: database).compactMap(\.value)
            }
            #expect(stored.map(\.recordChangeTag) == reported.map(\.recordChangeTag))
            #expect(stored.map { $0.recordID?.recordName } == reported.map { $0.recordID?.recordName })
            await alice.close()
        }
    }

    /// `failures_only`: the journal holds only the failures, so a modify stopped between chunks
    /// must continue from its checkpoint's item count, not from its last seq.
    @Test func aFailuresOnlyModifyJournalsItsFailuresAndContinuesFromItsCheckpoint() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cirrus-ll-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let records = notes(1_000)
        // Saved before, so saving them again without their change tag fails: one in the first
        // chunk of 400, two in the second, two in the third.
        let taken = ["r10", "r450", "r451", "r820", "r999"]
        let request = Wire.ModifyRecordsRequest(recordsToSave: records, isAtomic: false, failuresOnly: true)
        var before = Followed()
        let gate = Gate()
        try await withLongLivedServer(directory: directory, journal: { GatedModifyJournal(base: $0, pauseAt: 3, gate: gate) }) {
            harness in
            var setup = try await OperationClient.connect(port: harness.port, user: "alice")
            let (_, saved) = try await setup.save(records.filter { taken.contains($0.recordID?.recordName ?? "") })
            #expect(saved.error == nil)
            await setup.client.close()
            let alice = try await TestClient.connect(port: harness.port)
            _ = try await alice.handshake()
            try await alice.openLongLived(.modifyRecords(request), operationID: "bulk", streamID: 1)
            before = try await alice.follow(streamID: 1, stopAfter: 3)
            // Two chunks journaled (three failures), the third held before it writes.
            try await eventually("the third chunk") { gate.waiting == 1 }
            await harness.registry.shutdown()
            await alice.close()
            let left = try await harness.storage.longLivedOperation(LongLivedOperationKey(owner: "_alice", operationID: "bulk"))
            #expect(left?.isCompleted == false)
            #expect(left?.lastSeq == 3)
        }
        try await withLongLivedServer(directory: directory) { harness in
            let alice = try await TestClient.connect(port: harness.port)
            _ = try await alice.handshake()
            try await alice.resume("bulk", after: UInt64(before.events.count), streamID: 1)
            let after = try await alice.follow(streamID: 1)
            let events = before.events + after.events
            expectContiguous(events)
            let failed = events.compactMap { event -> String? in
                guard case .modifyRecords(let payload) = event.payload, case .perRecordSave(let save) = payload.callback,
                    case .error(let error) = save.outcome, error.code == .serverRecordChanged
                else { return nil }
                return save.recordID?.recordName
            }
            #expect(failed == taken, "each failure once, nothing of the records saved")
            #expect(after.complete?.lastSeq == 5)
            #expect(after.complete?.error?.code == .partialFailure)
            #expect(after.complete?.error?.partialErrors.compactMap { item -> String? in
                if case .recordID(let id) = item.item { return id.recordName }
                return nil
            } == taken)
            // Every other record was saved once: none of them failed as saved twice.
            var client = OperationClient(client: alice, nextStreamID: 3)
            for start in stride(from: 0, to: records.count, by: 400) {
                let (outcomes, complete) = try await client.fetch(records[start..<min(start + 400, records.count)].compactMap(\.recordID))
                #expect(complete.error == nil)
                #expect(outcomes.compactMap(fetchedRecord).count == min(400, records.count - start))
            }
            await alice.close()
        }
    }

    @Test func aStoppedDatabaseChangesFetchContinuesFromItsCheckpoint() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cirrus-ll-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let zones = (0..<60).map { Wire.RecordZone(zoneID: Wire.RecordZoneID(zoneName: "z\($0)", ownerName: "__defaultOwner__")) }
        var before = Followed()
        let gate = Gate()
        // The fourth batch's append waits: three batches (zone + token update each) are journaled.
        try await withLongLivedServer(directory: directory, journal: { GatedJournal(base: $0, pauseAt: 4, gate: gate) }) {
            harness in
            var setup = try await OperationClient.connect(port: harness.port, user: "alice")
            _ = try await setup.run(.modifyRecordZones(Wire.ModifyRecordZonesRequest(recordZonesToSave: zones)))
            await setup.client.close()
            let alice = try await TestClient.connect(port: harness.port)
            _ = try await alice.handshake()
            try await alice.openLongLived(
                .fetchDatabaseChanges(Wire.FetchDatabaseChangesRequest(resultsLimit: 1)), operationID: "zones",
                streamID: 1)
            before = try await alice.follow(streamID: 1, stopAfter: 6)
            try await eventually("the fourth append") { gate.waiting == 1 }
            // Stopped where it stands, as by a shutdown: not completed, continued on the next start.
            await harness.registry.shutdown()
            await alice.close()
            let left = try await harness.storage.longLivedOperation(LongLivedOperationKey(owner: "_alice", operationID: "zones"))
            #expect(left?.isCompleted == false)
            #expect(left?.lastSeq == 6)
        }
        try await withLongLivedServer(directory: directory) { harness in
            let alice = try await TestClient.connect(port: harness.port)
            _ = try await alice.handshake()
            try await alice.resume("zones", after: UInt64(before.events.count), streamID: 1)
            let after = try await alice.follow(streamID: 1)
            let events = before.events + after.events
            expectContiguous(events)
            let changed = events.compactMap { event -> String? in
                if case .fetchDatabaseChanges(let payload) = event.payload,
                    case .recordZoneWithIDChanged(let zoneID) = payload.callback
                {
                    return zoneID.zoneName
                }
                return nil
            }
            #expect(changed.sorted() == zones.compactMap { $0.zoneID?.zoneName }.sorted(), "each zone once")
            #expect(after.complete?.error == nil)
            guard case .fetchDatabaseChanges(let result) = after.complete?.result else {
                Issue.record("no result in \(String(describing: after.complete))")
                return
            }
            #expect(!result.moreComing)
            // The final token is good: nothing changed since.
            var client = OperationClient(client: alice, nextStreamID: 3)
            let (again, _) = try await client.run(
                .fetchDatabaseChanges(Wire.FetchDatabaseChangesRequest(previousServerChangeToken: result.serverChangeToken)))
            #expect(again.isEmpty)
            await alice.close()
        }
    }
}
