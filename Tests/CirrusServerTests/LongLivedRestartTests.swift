import CirrusStore
import CirrusWire
import Foundation
import Testing

/// A real `cirrusd`, killed with SIGKILL in the middle of long-lived operations and started
/// again on the same data: every callback arrives exactly once, in order, and the data agrees.
@Suite("Long-lived operations across a cirrusd crash", .serialized)
struct LongLivedRestartTests {
    @Test func sigkillMidwayThenResumeDeliversEveryCallbackOnce() async throws {
        let feedZone = Wire.RecordZoneID(zoneName: "Feed", ownerName: "__defaultOwner__")
        let feedRecords = (0..<1_000).map { note("f\($0)", title: "feed \($0)", zone: feedZone) }
        let records = (0..<30_000).map { note("m\($0)", title: "modified \($0)") }

        var modifyBefore = Followed()
        var feedBefore = Followed()
        var directories: [String] = []
        defer { for directory in directories { try? FileManager.default.removeItem(atPath: directory) } }
        var directory = ""
        var left: LongLivedOperationRecord?
        // The kill must land while the detached modify runs. cirrusd writes it on without the
        // test (tens of thousands of records a second), so a test process the machine leaves
        // waiting between the 50th event and the signal can find it finished: then the crash
        // missed what it is for, and it runs again on a fresh data directory (at most three
        // times; the third finished modify fails the checks below).
        for attempt in 1...3 {
            directory = FileManager.default.temporaryDirectory.appendingPathComponent("cirrusd-ll-\(UUID().uuidString)").path
            directories.append(directory)
            modifyBefore = Followed()
            feedBefore = Followed()
            do {
                let server = try await CirrusdProcess.launch(arguments: ["--data-dir", directory])
                var setup = try await OperationClient.connect(port: server.port, user: "alice")
                let (_, zoneComplete) = try await setup.run(
                    .modifyRecordZones(Wire.ModifyRecordZonesRequest(recordZonesToSave: [Wire.RecordZone(zoneID: feedZone)])))
                #expect(zoneComplete.error == nil)
                for start in stride(from: 0, to: feedRecords.count, by: 400) {
                    let (_, complete) = try await setup.save(Array(feedRecords[start..<min(start + 400, feedRecords.count)]))
                    #expect(complete.error == nil)
                }
                await setup.client.close()

                let feeder = try await TestClient.connect(port: server.port)
                _ = try await feeder.handshake()
                // One record per batch: a long run of small journal appends.
                let configuration = Wire.ZoneChangesConfiguration(zoneID: feedZone, resultsLimit: 1)
                try await feeder.openLongLived(
                    .fetchRecordZoneChanges(Wire.FetchRecordZoneChangesRequest(zoneConfigurations: [configuration])),
                    operationID: "feed", streamID: 1, window: 1_000)
                feedBefore = try await feeder.follow(streamID: 1, window: 1_000, stopAfter: 50)
                // The modify starts last and the kill follows its 50th event at once, so the crash
                // lands inside it (75 chunks of 400: 10,000 records once finished before a loaded
                // machine's kill landed).
                let modifier = try await TestClient.connect(port: server.port)
                _ = try await modifier.handshake()
                try await modifier.openLongLived(
                    .modifyRecords(Wire.ModifyRecordsRequest(recordsToSave: records)), operationID: "modify", streamID: 1,
                    window: 1_000)
                modifyBefore = try await modifier.follow(streamID: 1, window: 1_000, stopAfter: 50)
                await server.killed()
                await modifier.close()
                await feeder.close()
            }
            // What the dead server left on disk.
            let storage = try SQLiteStorage(directory: directory)
            left = try await storage.longLivedOperation(LongLivedOperationKey(owner: "_alice", operationID: "modify"))
            try storage.close()
            if left?.isCompleted == false || attempt == 3 { break }
        }
        #expect(modifyBefore.persisted && feedBefore.persisted)
        // What the dead server left on disk: the 30,000-record modify was killed in the middle,
        // so the restarted server must continue it, not replay a finished one.
        #expect(left?.isCompleted == false)
        #expect((left?.lastSeq ?? 0) >= UInt64(modifyBefore.events.count))
        #expect((left?.lastSeq ?? .max) < 30_000)

        let server = try await CirrusdProcess.launch(arguments: ["--data-dir", directory])
        defer { server.stop() }
        let alice = try await TestClient.connect(port: server.port)
        _ = try await alice.handshake()
        #expect(Set(try await alice.listLongLived(streamID: 1)) == ["modify", "feed"])

        try await alice.resume("modify", after: UInt64(modifyBefore.events.count), streamID: 3, window: 1_000)
        let modifyAfter = try await alice.follow(streamID: 3, window: 1_000)
        let modifyEvents = modifyBefore.events + modifyAfter.events
        expectContiguous(modifyEvents)
        #expect(modifyAfter.complete?.error == nil, "no record was saved twice (that would be a conflict)")
        #expect(modifyAfter.complete?.lastSeq == 30_000)
        let saved = modifyEvents.compactMap(savedRecordOf)
        #expect(saved.map { $0.recordID?.recordName } == records.map { $0.recordID?.recordName })

        try await alice.resume("feed", after: UInt64(feedBefore.events.count), streamID: 5, window: 1_000)
        let feedAfter = try await alice.follow(streamID: 5, window: 1_000)
        let feedEvents = feedBefore.events + feedAfter.events
        expectContiguous(feedEvents)
        #expect(feedAfter.complete?.error == nil)
        let changed = feedEvents.compactMap { event -> Wire.Record? in
            if case .fetchRecordZoneChanges(let payload) = event.payload, case .recordWasChanged(let outcome) = payload.callback,
                case .record(let record) = outcome.outcome
            {
                return record
            }
            return nil
        }
        #expect(changed.count == feedRecords.count, "each changed record once")
        #expect(Set(changed.compactMap { $0.recordID?.recordName }) == Set(feedRecords.compactMap { $0.recordID?.recordName }))
        let results = feedEvents.filter { event in
            if case .fetchRecordZoneChanges(let payload) = event.payload, case .recordZoneFetchResult = payload.callback { return true }
            return false
        }
        #expect(results.count == 1)
        #expect(results.first == feedEvents.last)

        // The stored data is what the callbacks reported.
        var client = OperationClient(client: alice, nextStreamID: 7)
        for (reported, requested) in [(saved, records), (changed, feedRecords)] {
            let byName = Dictionary(reported.map { ($0.recordID?.recordName ?? "", $0.recordChangeTag) }, uniquingKeysWith: { a, _ in a })
            for start in stride(from: 0, to: requested.count, by: 400) {
                let ids = requested[start..<min(start + 400, requested.count)].compactMap(\.recordID)
                let (outcomes, complete) = try await client.fetch(ids)
                #expect(complete.error == nil)
                for record in outcomes.compactMap(fetchedRecord) where byName[record.recordID?.recordName ?? ""] != record.recordChangeTag {
                    Issue.record("\(record.recordID?.recordName ?? "?") is stored as \(record.recordChangeTag)")
                }
            }
        }
        await alice.close()
    }

    /// SIGTERM (a graceful shutdown through the service group) in the middle of a long-lived
    /// modify: the process exits 0, and after a restart the client resumes where it stopped
    /// and hears every remaining callback once.
    @Test func sigtermMidwayThenResumeDeliversEveryCallbackOnce() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cirrusd-ll-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let records = (0..<4_000).map { note("t\($0)", title: "terminated \($0)") }
        var before = Followed()
        do {
            let server = try await CirrusdProcess.launch(arguments: ["--data-dir", directory])
            let modifier = try await TestClient.connect(port: server.port)
            _ = try await modifier.handshake()
            try await modifier.openLongLived(
                .modifyRecords(Wire.ModifyRecordsRequest(recordsToSave: records)), operationID: "terminated", streamID: 1,
                window: 1_000)
            before = try await modifier.follow(streamID: 1, window: 1_000, stopAfter: 50)
            #expect(server.stop() == 0, "SIGTERM is a clean exit")
            await modifier.close()
        }
        #expect(before.persisted)

        let server = try await CirrusdProcess.launch(arguments: ["--data-dir", directory])
        defer { server.stop() }
        let alice = try await TestClient.connect(port: server.port)
        _ = try await alice.handshake()
        #expect(try await alice.listLongLived(streamID: 1).contains("terminated"))
        try await alice.resume("terminated", after: UInt64(before.events.count), streamID: 3, window: 1_000)
        let after = try await alice.follow(streamID: 3, window: 1_000)
        let events = before.events + after.events
        expectContiguous(events)
        #expect(after.complete?.error == nil)
        #expect(after.complete?.lastSeq == UInt64(records.count))
        #expect(events.compactMap(savedRecordOf).map { $0.recordID?.recordName } == records.map { $0.recordID?.recordName })
        await alice.close()
    }
}
