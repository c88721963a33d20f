import CirrusKit
import CirrusModel
import CirrusTestSupport
import CirrusWire
import Dispatch
import Foundation
import NIOConcurrencyHelpers
import Testing

/// Long-lived operations on the client: listing and fetching them, resuming a fetched one,
/// resuming after a dropped connection, acknowledging the result, against the fake server.
@Suite("Long-lived operations")
struct LongLivedOperationTests {
    static func names(_ range: ClosedRange<Int>) -> [String] { range.map { "r\($0)" } }

    static func container(_ peer: FakePeer, configure: (inout CirrusClientConfiguration) -> Void = { _ in }) -> CKContainer {
        var configuration = TestCertificates.client(port: peer.port)
        configure(&configuration)
        return CKContainer(identifier: "iCloud.test", configuration: configuration)
    }

    static func longLivedFetch(_ names: [String]) -> CKFetchRecordsOperation {
        let operation = CKFetchRecordsOperation(recordIDs: names.map { CKRecord.ID(recordName: $0) })
        operation.configuration.isLongLived = true
        return operation
    }

    /// A long-lived fetch already running on the server: its `Open` and its events.
    static func serverFetch(id: String, names: [String], running: Bool = false) -> LongLivedScript.Operation {
        let request = Wire.FetchRecordsRequest(recordIDs: names.map { Wire.RecordID(recordName: $0) })
        let open = Wire.Open(
            operationID: id,
            databaseScope: .private,
            containerIdentifier: "iCloud.test",
            configuration: Wire.OperationConfiguration(isLongLived: true),
            request: .fetchRecords(request)
        )
        return .init(open: open, payloads: OperationLifecycleTests.fetchResults(names), running: running)
    }

    // MARK: - Listing and fetching

    @Test("allLongLivedOperationIDs lists the server's IDs; the request is a container-level Open")
    func listIDs() async throws {
        let script = LongLivedScript()
        script.add(Self.serverFetch(id: "op-1", names: ["a"]))
        script.add(Self.serverFetch(id: "op-2", names: ["b"]))
        let peer = try await FakePeer.start(reply: script.reply, resume: script.resume)
        defer { Task { await peer.stop() } }
        let container = Self.container(peer)
        #expect(try await container.allLongLivedOperationIDs() == ["op-1", "op-2"])
        let open = try #require(peer.opens.first)
        #expect(open.databaseScope == .unspecified)
        #expect(open.containerIdentifier == "iCloud.test")
        guard case .fetchLongLivedOperationIDs? = open.request else {
            Issue.record("sent \(String(describing: open.request))")
            return
        }
    }

    @Test("longLivedOperation(for:) rebuilds the subclass with its request, ID, database, configuration and group")
    func fetchOne() async throws {
        let script = LongLivedScript()
        let group = Wire.OperationGroup(operationGroupID: "g-1", name: "Initial Sync", quantity: 3)
        let open = Wire.Open(
            operationID: "op-save",
            databaseScope: .public,
            containerIdentifier: "iCloud.test",
            configuration: Wire.OperationConfiguration(isLongLived: true, timeoutIntervalForRequestMs: 30_000),
            group: group,
            request: .modifyRecords(
                Wire.ModifyRecordsRequest(
                    recordsToSave: [Wire.Record(recordID: Wire.RecordID(recordName: "n1"), recordType: "Note")],
                    recordIDsToDelete: [Wire.RecordID(recordName: "old")],
                    savePolicy: .allKeys,
                    clientChangeToken: [1, 2, 3],
                    isAtomic: false
                )
            )
        )
        script.add(.init(open: open, payloads: []))
        let peer = try await FakePeer.start(reply: script.reply, resume: script.resume)
        defer { Task { await peer.stop() } }
        let container = Self.container(peer)
        let operation = try await container.longLivedOperation(for: "op-save")
        let modify = try #require(operation as? CKModifyRecordsOperation)
        #expect(modify.operationID == "op-save")
        #expect(modify.recordsToSave?.map(\.recordID.recordName) == ["n1"])
        #expect(modify.recordIDsToDelete == [CKRecord.ID(recordName: "old")])
        #expect(modify.savePolicy == .allKeys)
        #expect(modify.clientChangeTokenData == Data([1, 2, 3]))
        #expect(modify.isAtomic == false)
        #expect(modify.isLongLived)
        #expect(modify.configuration.timeoutIntervalForRequest == 30)
        #expect(modify.database?.databaseScope == .public)
        #expect(modify.database?.container === container)
        #expect(modify.group?.operationGroupID == "g-1")
        #expect(modify.group?.name == "Initial Sync")
        let sent = try #require(peer.opens.first)
        #expect(sent.databaseScope == .unspecified)
        #expect(sent.request == .fetchLongLivedOperation(Wire.FetchLongLivedOperationRequest(operationID: "op-save")))
    }

    @Test("An unknown operation ID: CKError.unknownItem, from both APIs")
    func unknownID() async throws {
        let script = LongLivedScript()
        let peer = try await FakePeer.start(reply: script.reply, resume: script.resume)
        defer { Task { await peer.stop() } }
        let container = Self.container(peer)
        let error = await #expect(throws: CKError.self) { try await container.longLivedOperation(for: "nope") }
        #expect(error?.code == .unknownItem)
        let handlerError: (any Error)? = await withCheckedContinuation { continuation in
            container.fetchLongLivedOperation(withID: "nope") { operation, error in
                #expect(operation == nil)
                continuation.resume(returning: error)
            }
        }
        #expect((handlerError as? CKError)?.code == .unknownItem)
    }

    // MARK: - Resuming a fetched operation

    @Test("Adding a fetched operation sends Resume (never Open); its blocks get the replay, then the result; then the ack")
    func resumeFetched() async throws {
        let script = LongLivedScript()
        script.add(Self.serverFetch(id: "op-fetch", names: ["a", "b", "c"]))
        let peer = try await FakePeer.start(reply: script.reply, resume: script.resume)
        defer { Task { await peer.stop() } }
        let container = Self.container(peer)
        let operation = try #require(try await container.longLivedOperation(for: "op-fetch") as? CKFetchRecordsOperation)
        #expect(operation.recordIDs?.map(\.recordName) == ["a", "b", "c"])
        let records = Recorder<String>()
        let results = Recorder<Result<Void, any Error>>()
        let persisted = Recorder<Int>()
        operation.longLivedOperationWasPersistedBlock = { persisted.append(1) }
        operation.perRecordResultBlock = { id, _ in records.append(id.recordName) }
        operation.fetchRecordsResultBlock = { results.append($0) }
        await runToCompletion(operation, on: container.privateCloudDatabase)
        #expect(records.values == ["a", "b", "c"])
        #expect(results.count == 1)
        if case .failure(let error)? = results.values.first { Issue.record("failed: \(error)") }
        #expect(persisted.count == 1)
        #expect(peer.resumes == [Wire.Resume(operationID: "op-fetch", lastSeq: 0, initialWindow: CirrusClientConfiguration().streamWindow)])
        #expect(peer.opens.count == 1)  // the fetch of the operation only
        try await eventually { peer.cancelFrames.count == 1 }
        let ack = try #require(peer.cancelFrames.first)
        #expect(ack.cancel.completionAcknowledged)
        #expect(!ack.cancel.detach)
        let resumeStream = try #require(peer.log.withLockedValue { $0.starts.last })
        #expect(resumeStream.kind == "resume")
        #expect(ack.streamID == resumeStream.streamID)
    }

    @Test("A resumed operation that is still running: replayed events, then live ones, then Complete")
    func resumeRunning() async throws {
        let script = LongLivedScript()
        script.add(Self.serverFetch(id: "op-live", names: ["a", "b"]))
        let peer = try await FakePeer.start(reply: script.reply) { resume, connection in
            var reply = script.resume(resume, connection)
            // Two journaled, then two more produced while the client follows.
            reply.payloads += OperationLifecycleTests.fetchResults(["c", "d"])
            return reply
        }
        defer { Task { await peer.stop() } }
        let container = Self.container(peer)
        let operation = try await container.longLivedOperation(for: "op-live")
        let fetch = try #require(operation as? CKFetchRecordsOperation)
        let records = Recorder<String>()
        fetch.perRecordResultBlock = { id, _ in records.append(id.recordName) }
        container.add(fetch)
        await waitUntilFinished(fetch)
        #expect(records.values == ["a", "b", "c", "d"])
    }

    // MARK: - Resuming after a dropped connection

    @Test("The connection drops mid-stream: the operation resumes from its last delivered event; each callback once, in order")
    func resumeAfterDrop() async throws {
        let names = Self.names(1...10)
        let script = LongLivedScript(events: { _ in OperationLifecycleTests.fetchResults(names) })
        let peer = try await FakePeer.start(
            reply: { open, connection in
                var reply = script.reply(open, connection)
                if open.configuration?.isLongLived == true, connection == 1 {
                    reply.closeAfterEvents = 4
                }
                return reply
            },
            resume: script.resume
        )
        defer { Task { await peer.stop() } }
        let container = Self.container(peer)
        let operation = Self.longLivedFetch(names)
        let records = Recorder<String>()
        let persisted = Recorder<Int>()
        let results = Recorder<Result<Void, any Error>>()
        operation.longLivedOperationWasPersistedBlock = { persisted.append(1) }
        operation.perRecordResultBlock = { id, _ in records.append(id.recordName) }
        operation.fetchRecordsResultBlock = { results.append($0) }
        await runToCompletion(operation, on: container.privateCloudDatabase)
        #expect(records.values == names)
        #expect(results.count == 1)
        if case .failure(let error)? = results.values.first { Issue.record("failed: \(error)") }
        #expect(persisted.count == 1)
        #expect(peer.opens.count == 1)
        let resume = try #require(peer.resumes.first)
        #expect(peer.resumes.count == 1)
        #expect(resume.operationID == operation.operationID)
        #expect(resume.lastSeq <= 4)
        #expect(peer.log.withLockedValue { $0.connections } == 2)
    }

    @Test("Events received but not yet delivered when the connection drops are replayed and delivered once")
    func resumeDeduplicatesOverlap() async throws {
        let names = Self.names(1...12)
        let script = LongLivedScript(events: { _ in OperationLifecycleTests.fetchResults(names) })
        let peer = try await FakePeer.start(
            reply: { open, connection in
                var reply = script.reply(open, connection)
                if open.configuration?.isLongLived == true, connection == 1 {
                    reply.closeAfterEvents = 8
                }
                return reply
            },
            resume: script.resume
        )
        defer { Task { await peer.stop() } }
        let container = Self.container(peer)
        let operation = Self.longLivedFetch(names)
        let records = Recorder<String>()
        // The first callback holds the callback queue until the client has resumed: events 2…8
        // of the first connection wait behind it, and the server replays them after seq 1.
        let gate = DispatchSemaphore(value: 0)
        operation.perRecordResultBlock = { id, _ in
            if id.recordName == "r1" { gate.wait() }
            records.append(id.recordName)
        }
        container.privateCloudDatabase.add(operation)
        try await eventually { peer.resumes.count == 1 }
        gate.signal()
        await waitUntilFinished(operation)
        #expect(peer.resumes.first?.lastSeq == 1)
        #expect(records.values == names)
        // The replay sent 2…12 again on the new stream: 11 events after the first stream's 8.
        #expect(peer.log.withLockedValue { $0.eventsSent } == 8 + 11)
    }

    @Test("Dropped before Persisted: Open again; a duplicate-ID refusal turns into Resume")
    func dropBeforePersisted() async throws {
        let names = Self.names(1...3)
        let script = LongLivedScript(events: { _ in OperationLifecycleTests.fetchResults(names) })
        let peer = try await FakePeer.start(
            reply: { open, connection in
                guard open.configuration?.isLongLived == true else { return script.reply(open, connection) }
                if connection == 1 {
                    // Registered, but the connection drops before Persisted goes out.
                    _ = script.reply(open, connection)
                    return FakeReply(closeConnection: true)
                }
                return FakeReply(error: Wire.OperationError(code: .duplicateOperationID, message: "in use"))
            },
            resume: script.resume
        )
        defer { Task { await peer.stop() } }
        let container = Self.container(peer)
        let operation = Self.longLivedFetch(names)
        let records = Recorder<String>()
        let results = Recorder<Result<Void, any Error>>()
        operation.perRecordResultBlock = { id, _ in records.append(id.recordName) }
        operation.fetchRecordsResultBlock = { results.append($0) }
        await runToCompletion(operation, on: container.privateCloudDatabase)
        #expect(records.values == names)
        if case .failure(let error)? = results.values.first { Issue.record("failed: \(error)") }
        #expect(peer.opens.count == 2)
        #expect(peer.resumes.map(\.lastSeq) == [0])
    }

    @Test("Resuming gives up after maximumResumeAttempts losses in a row without progress: networkFailure")
    func resumeGivesUp() async throws {
        let peer = try await FakePeer.start(
            reply: { _, _ in
                FakeReply(payloads: OperationLifecycleTests.fetchResults(["a", "b"]), persisted: true, closeAfterEvents: 1)
            },
            resume: { _, _ in FakeReply(closeConnection: true) }
        )
        defer { Task { await peer.stop() } }
        let container = Self.container(peer) { $0.maximumResumeAttempts = 3 }
        let operation = Self.longLivedFetch(["a", "b"])
        let records = Recorder<String>()
        let results = Recorder<Result<Void, any Error>>()
        operation.perRecordResultBlock = { id, _ in records.append(id.recordName) }
        operation.fetchRecordsResultBlock = { results.append($0) }
        await runToCompletion(operation, on: container.privateCloudDatabase)
        #expect(records.values == ["a"])
        #expect(results.values.first?.failureCode == .networkFailure)
        #expect(peer.resumes.count == 3)
        #expect(peer.resumes.allSatisfy { $0.lastSeq == 1 })
    }

    @Test("A Resume refused with OPERATION_ALREADY_ATTACHED (the old stream not yet gone) is retried after the backoff")
    func alreadyAttachedIsRetried() async throws {
        let refusals = NIOLockedValueBox(0)
        let peer = try await FakePeer.start(
            reply: { _, _ in
                FakeReply(payloads: OperationLifecycleTests.fetchResults(["a", "b"]), persisted: true, closeAfterEvents: 1)
            },
            resume: { _, _ in
                let refused = refusals.withLockedValue { count -> Bool in
                    count += 1
                    return count <= 2
                }
                if refused {
                    return FakeReply(error: Wire.OperationError(code: .operationAlreadyAttached, message: "followed elsewhere"))
                }
                return FakeReply(payloads: OperationLifecycleTests.fetchResults(["b"]), persisted: true, startSeq: 1)
            }
        )
        defer { Task { await peer.stop() } }
        // The refusals do not count as losses: one loss allowed, two refusals, still resumed.
        let container = Self.container(peer) { $0.maximumResumeAttempts = 1 }
        let operation = Self.longLivedFetch(["a", "b"])
        let records = Recorder<String>()
        let results = Recorder<Result<Void, any Error>>()
        operation.perRecordResultBlock = { id, _ in records.append(id.recordName) }
        operation.fetchRecordsResultBlock = { results.append($0) }
        await runToCompletion(operation, on: container.privateCloudDatabase)
        #expect(records.values == ["a", "b"])
        if case .failure(let error)? = results.values.first { Issue.record("failed: \(error)") }
        #expect(peer.resumes.count == 3)
        #expect(peer.resumes.allSatisfy { $0.lastSeq == 1 })
    }

    @Test("An operation that is not long-lived still fails with networkFailure when its connection drops")
    func notLongLivedFails() async throws {
        let peer = try await FakePeer.start { _, _ in
            FakeReply(payloads: OperationLifecycleTests.fetchResults(["a", "b", "c"]), closeAfterEvents: 1)
        }
        defer { Task { await peer.stop() } }
        let container = Self.container(peer)
        let operation = CKFetchRecordsOperation(recordIDs: ["a", "b", "c"].map { CKRecord.ID(recordName: $0) })
        let results = Recorder<Result<Void, any Error>>()
        operation.fetchRecordsResultBlock = { results.append($0) }
        await runToCompletion(operation, on: container.privateCloudDatabase)
        #expect(results.values.first?.failureCode == .networkFailure)
        #expect(peer.resumes.isEmpty)
        #expect(peer.opens.count == 1)
    }

    // MARK: - Acknowledging, cancelling

    @Test("After a long-lived operation's result, Cancel{completion_acknowledged} goes on its stream; other operations send none")
    func acknowledgesCompletion() async throws {
        let script = LongLivedScript(events: { _ in OperationLifecycleTests.fetchResults(["a"]) })
        let peer = try await FakePeer.start(reply: script.reply, resume: script.resume)
        defer { Task { await peer.stop() } }
        let container = Self.container(peer)
        let plain = CKFetchRecordsOperation(recordIDs: [CKRecord.ID(recordName: "a")])
        await runToCompletion(plain, on: container.privateCloudDatabase)
        let order = Recorder<String>()
        let operation = Self.longLivedFetch(["a"])
        operation.fetchRecordsResultBlock = { _ in order.append("result \(peer.cancelFrames.count)") }
        await runToCompletion(operation, on: container.privateCloudDatabase)
        try await eventually { peer.cancelFrames.count == 1 }
        #expect(order.values == ["result 0"])
        let ack = try #require(peer.cancelFrames.first)
        #expect(ack.cancel.completionAcknowledged)
        #expect(ack.streamID == 2)
        // The connection carries on after the acknowledgement.
        try await container.ping()
    }

    @Test("cancel() of a long-lived operation sends a plain Cancel")
    func cancelLongLived() async throws {
        let peer = try await FakePeer.start { _, _ in
            FakeReply(payloads: OperationLifecycleTests.fetchResults(["a"]), hang: true, persisted: true)
        }
        defer { Task { await peer.stop() } }
        let container = Self.container(peer)
        let operation = Self.longLivedFetch(["a", "b"])
        let results = Recorder<Result<Void, any Error>>()
        let records = Recorder<String>()
        operation.perRecordResultBlock = { id, _ in records.append(id.recordName) }
        operation.fetchRecordsResultBlock = { results.append($0) }
        container.privateCloudDatabase.add(operation)
        try await eventually { records.count == 1 }
        operation.cancel()
        await waitUntilFinished(operation)
        try await eventually { peer.cancelFrames.count == 1 }
        let cancel = try #require(peer.cancelFrames.first?.cancel)
        #expect(!cancel.completionAcknowledged)
        #expect(!cancel.detach)
        #expect(results.values.first?.failureCode == .operationCancelled)
    }

    @Test("A Cancel whose connection ends before the server confirms it is said again on the next connection")
    func cancelLostWithItsConnection() async throws {
        let peer = try await FakePeer.start(
            reply: { _, _ in
                var reply = FakeReply(payloads: OperationLifecycleTests.fetchResults(["a"]), hang: true, persisted: true)
                reply.closeOnCancel = true
                return reply
            },
            resume: { resume, _ in FakeReply(hang: true, startSeq: resume.lastSeq) }
        )
        defer { Task { await peer.stop() } }
        let container = Self.container(peer) {
            $0.reconnectBaseDelay = 0.05
            $0.reconnectMaximumDelay = 0.2
        }
        let operation = Self.longLivedFetch(["a", "b"])
        let records = Recorder<String>()
        let results = Recorder<Result<Void, any Error>>()
        operation.perRecordResultBlock = { id, _ in records.append(id.recordName) }
        operation.fetchRecordsResultBlock = { results.append($0) }
        container.privateCloudDatabase.add(operation)
        try await eventually { records.count == 1 }
        operation.cancel()
        await waitUntilFinished(operation)
        #expect(results.values.first?.failureCode == .operationCancelled)
        // The first connection closed on the Cancel without confirming it: the next one
        // resumes the operation only to cancel it, and the server confirms that one.
        try await eventually { peer.cancelFrames.count == 2 }
        #expect(peer.resumes.map(\.lastSeq) == [1])
        #expect(peer.cancelFrames.allSatisfy { !$0.cancel.detach && !$0.cancel.completionAcknowledged })
        #expect(peer.cancelFrames.last?.streamID == peer.log.withLockedValue { $0.starts.last?.streamID })
        // Confirmed: nothing more is said, however long the client stays.
        try await container.ping()
        #expect(peer.log.withLockedValue { $0.connections } == 2)
        #expect(peer.cancelFrames.count == 2)
        #expect(records.values == ["a"])
    }

    @Test("cancel() between connections: the next connection resumes the operation only to send Cancel")
    func cancelWhileReconnecting() async throws {
        let script = LongLivedScript(events: { _ in OperationLifecycleTests.fetchResults(["a", "b", "c"]) })
        let peer = try await FakePeer.start(
            reply: { open, connection in
                var reply = script.reply(open, connection)
                reply.closeAfterEvents = 1
                return reply
            },
            resume: { resume, connection in
                var reply = script.resume(resume, connection)
                reply.hang = true
                reply.payloads = []
                return reply
            }
        )
        defer { Task { await peer.stop() } }
        // A long backoff (30–60 s with its jitter), so the test sees the operation between
        // connections even when a loaded machine stalls it for half a minute; the Cancel goes
        // out on the next connection, after the backoff.
        let container = Self.container(peer) {
            $0.reconnectBaseDelay = 60
            $0.reconnectMaximumDelay = 60
        }
        let operation = Self.longLivedFetch(["a", "b", "c"])
        let records = Recorder<String>()
        let results = Recorder<Result<Void, any Error>>()
        operation.perRecordResultBlock = { id, _ in records.append(id.recordName) }
        operation.fetchRecordsResultBlock = { results.append($0) }
        container.privateCloudDatabase.add(operation)
        try await eventually { records.count == 1 && peer.log.withLockedValue { $0.disconnects } == 1 }
        #expect(peer.resumes.isEmpty)
        operation.cancel()
        await waitUntilFinished(operation)
        #expect(results.values.first?.failureCode == .operationCancelled)
        try await eventually(timeout: .seconds(180)) { peer.cancelFrames.count == 1 }
        #expect(peer.resumes.map(\.lastSeq) == [1])
        let cancel = try #require(peer.cancelFrames.first)
        #expect(!cancel.cancel.completionAcknowledged && !cancel.cancel.detach)
        #expect(cancel.streamID == peer.log.withLockedValue { $0.starts.last?.streamID })
        #expect(records.values == ["a"])
    }

    @Test("A long-lived operation that times out is detached, not cancelled: it keeps running on the server")
    func timeoutDetaches() async throws {
        let peer = try await FakePeer.start { _, _ in FakeReply(hang: true, persisted: true) }
        defer { Task { await peer.stop() } }
        let container = Self.container(peer)
        try await container.ping()  // Connected: the Open goes out at once.
        let operation = Self.longLivedFetch(["a"])
        // The request timeout counts from start(); the Open reaches the connection two event-loop
        // hops later. A timeout that runs out before then ends the operation with nothing to
        // detach on the server (no Open went out, so no Cancel follows): 3 s keeps a loaded
        // machine from getting there first (0.5 s did, under a parallel build).
        operation.configuration.timeoutIntervalForRequest = 3
        let results = Recorder<Result<Void, any Error>>()
        operation.fetchRecordsResultBlock = { results.append($0) }
        await runToCompletion(operation, on: container.privateCloudDatabase)
        #expect(results.values.first?.failureCode == .networkFailure)
        // The server is told of every stream it saw, and told to keep the operation running.
        try await eventually { peer.log.withLockedValue { $0.cancels.count == $0.opens.count } }
        #expect(peer.opens.count <= 1)
        #expect(peer.cancelFrames.allSatisfy { $0.cancel.detach })
    }
}
