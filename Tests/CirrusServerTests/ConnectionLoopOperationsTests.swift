@testable import CirrusServer
@testable import CirrusStore
import CirrusTestSupport
import CirrusWire
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import Testing

/// Emits `count` events one at a time and notes, at its start and after every emit, whether it
/// ran on an event loop's thread and whether reads in place were allowed.
private struct WhereItRunsExecutor: OperationExecutor {
    let count: Int
    /// One entry per point noted: true when on an event loop.
    let onLoop = NIOLockedValueBox<[Bool]>([])
    /// One entry per point noted: `ReadPlacement.mayReadInPlace`.
    let mayReadInPlace = NIOLockedValueBox<[Bool]>([])

    func run(_ open: Wire.Open, caller: ClientIdentity, stream: OperationStream) async -> OperationCompletion {
        self.note()
        for index in 0..<self.count {
            let progress = Wire.RecordProgress(recordID: Wire.RecordID(recordName: "r\(index)"), progress: 1)
            do {
                try await stream.emit(.fetchRecords(Wire.FetchRecordsEvent(callback: .perRecordProgress(progress))))
            } catch {
                return .failure(.operationCancelled, "cancelled")
            }
            self.note()
        }
        return .success()
    }

    private func note() {
        let onLoop = MultiThreadedEventLoopGroup.currentEventLoop != nil
        self.onLoop.withLockedValue { $0.append(onLoop) }
        let inPlace = ReadPlacement.mayReadInPlace
        self.mayReadInPlace.withLockedValue { $0.append(inPlace) }
    }
}

private actor Counter {
    var value = 0
    func next() -> (Int, onLoop: Bool) {
        self.value += 1
        return (self.value, MultiThreadedEventLoopGroup.currentEventLoop != nil)
    }
}

private func fetch(_ count: Int, scope: Wire.DatabaseScope = .private, longLived: Bool = false) -> Wire.Open {
    Wire.Open(
        operationID: "op",
        databaseScope: scope,
        configuration: longLived ? Wire.OperationConfiguration(isLongLived: true) : nil,
        request: .fetchRecords(
            Wire.FetchRecordsRequest(recordIDs: (0..<count).map { Wire.RecordID(recordName: "r\($0)") }))
    )
}

private func save(_ count: Int, deleting: Int = 0, scope: Wire.DatabaseScope = .private, longLived: Bool = false)
    -> Wire.Open
{
    var open = fetch(0, scope: scope, longLived: longLived)
    open.request = .modifyRecords(
        Wire.ModifyRecordsRequest(
            recordsToSave: (0..<count).map { Wire.Record(recordID: Wire.RecordID(recordName: "r\($0)"), recordType: "Note") },
            recordIDsToDelete: (0..<deleting).map { Wire.RecordID(recordName: "d\($0)") }))
    return open
}

@Suite("Small saves run on their connection's event loop; reads never do")
struct ConnectionLoopOperationsTests {
    @Test func aTaskPreferringTheLoopRunsThereAndComesBackAfterSuspending() async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let loop = group.next()
        let counter = Counter()
        let notes = await Task(executorPreference: EventLoopTaskExecutor(loop)) {
            let atStart = loop.inEventLoop
            // A default actor runs on the task's preferred executor (SE-0417).
            let (_, inActor) = await counter.next()
            // Resumed from a thread of its own: the task comes back to the loop.
            let resumedElsewhere = await withCheckedContinuation { continuation in
                Thread { continuation.resume(returning: MultiThreadedEventLoopGroup.currentEventLoop == nil) }.start()
            }
            return [atStart, inActor, resumedElsewhere, loop.inEventLoop]
        }.value
        #expect(notes == [true, true, true, true])
        try await group.shutdownGracefully()
    }

    /// The store's guard: on a task that forbids reads in place, a bounded read runs on a
    /// reader's queue, never on the calling thread (here an event loop's).
    @Test func aReadFromTheLoopGoesToAReadersQueue() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cirrus-loop-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let storage = try SQLiteStorage(directory: directory)
        defer { try? storage.close() }
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let executor = EventLoopTaskExecutor(group.next())
        func readsOnLoop(mayReadInPlace: Bool) async throws -> Bool {
            try await Task(executorPreference: executor) {
                try await ReadPlacement.$mayReadInPlace.withValue(mayReadInPlace) {
                    try await storage.readInPlaceIfFree { _ in MultiThreadedEventLoopGroup.currentEventLoop != nil }
                }
            }.value
        }
        #expect(try await readsOnLoop(mayReadInPlace: true))  // The guard is what keeps it off.
        #expect(try await !readsOnLoop(mayReadInPlace: false))
        try await group.shutdownGracefully()
    }

    @Test func whichOperationsRunOnTheLoop() {
        let limit = OperationRouter.connectionLoopItemLimit
        #expect(OperationRouter.runsOnConnectionLoop(save(1)))
        #expect(OperationRouter.runsOnConnectionLoop(save(limit - 1, deleting: 1)))
        #expect(OperationRouter.runsOnConnectionLoop(save(0, deleting: 1, scope: .public)))
        #expect(!OperationRouter.runsOnConnectionLoop(save(limit, deleting: 1)))
        #expect(!OperationRouter.runsOnConnectionLoop(save(1, scope: .shared)))
        #expect(!OperationRouter.runsOnConnectionLoop(save(1, scope: .unspecified)))
        #expect(!OperationRouter.runsOnConnectionLoop(save(1, longLived: true)))

        // A record with an asset: the asset store (an actor that writes files) would run on the loop.
        var withAsset = save(2)
        if case .modifyRecords(var request) = withAsset.request {
            request.recordsToSave[1].fields = [
                Wire.RecordField(key: "photo", value: Wire.FieldValue(kind: .assetValue(Wire.Asset(content: .inlineData([1])))))
            ]
            withAsset.request = .modifyRecords(request)
        }
        #expect(!OperationRouter.runsOnConnectionLoop(withAsset))

        // Reads never: a fetch reads SQLite in place where it runs.
        #expect(!OperationRouter.runsOnConnectionLoop(fetch(1)))
        var open = fetch(0)
        open.request = .fetchRecordZones(Wire.FetchRecordZonesRequest(recordZoneIDs: [Wire.RecordZoneID(zoneName: "z")]))
        #expect(!OperationRouter.runsOnConnectionLoop(open))
        open.request = .query(Wire.QueryRequest())
        #expect(!OperationRouter.runsOnConnectionLoop(open))
    }

    /// Over a real connection: a small save runs on the loop throughout, also after it waited
    /// for credit, with reads in place forbidden; a large one runs on the pool. Both stream
    /// their events in order.
    @Test(arguments: [(1, true), (OperationRouter.connectionLoopItemLimit + 1, false)])
    func aSaveRunsWhereItsSizeSays(records: Int, expectOnLoop: Bool) async throws {
        let executor = WhereItRunsExecutor(count: 6)
        try await withServer(configure: { $0.executor = executor }) { _, port in
            let client = try await TestClient.connect(port: port)
            _ = try await client.handshake()
            var open = save(records)
            open.initialWindow = 2
            try await client.send(Wire.Frame(streamID: 1, kind: .open(open)))
            for seq in 1...6 {
                let frame = try await client.nextFrame()
                guard case .event(let event) = frame.kind else {
                    Issue.record("expected Event \(seq), got \(frame)")
                    return
                }
                #expect(event.seq == UInt64(seq))
                if seq.isMultiple(of: 2) {
                    try await client.send(Wire.Frame(streamID: 1, kind: .window(Wire.Window(credit: 2))))
                }
            }
            #expect(try await client.nextFrame().kind == .complete(Wire.Complete(lastSeq: 6)))
            await client.close()
        }
        let notes = executor.onLoop.withLockedValue { $0 }
        #expect(notes.count == 7)
        #expect(notes.allSatisfy { $0 == expectOnLoop })
        #expect(executor.mayReadInPlace.withLockedValue { $0 }.allSatisfy { $0 == !expectOnLoop })
    }
}
