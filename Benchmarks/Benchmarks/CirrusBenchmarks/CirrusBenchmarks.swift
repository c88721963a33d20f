import Benchmark
import CirrusWire
import Foundation
import NIOConcurrencyHelpers
import NIOCore

/// Certs/ of the checkout this package sits in.
private let certificates: String = {
    var parts = #filePath.split(separator: "/", omittingEmptySubsequences: false)
    parts.removeLast(4)  // CirrusBenchmarks.swift, CirrusBenchmarks, Benchmarks, Benchmarks
    return parts.joined(separator: "/") + "/Certs"
}()

/// A ~100-byte event: a record saved, with two fields.
private let eventFrame: Wire.Frame = {
    let zone = Wire.RecordZoneID(zoneName: "Notes", ownerName: "_alice")
    let record = Wire.Record(
        recordID: Wire.RecordID(recordName: "note-0001", zoneID: zone),
        recordType: "Note",
        recordChangeTag: "7f3a",
        fields: [
            Wire.RecordField(key: "title", value: Wire.FieldValue(kind: .stringValue("Groceries"))),
            Wire.RecordField(key: "count", value: Wire.FieldValue(kind: .int64Value(12))),
        ]
    )
    let save = Wire.ModifyRecordsPerRecordSave(recordID: record.recordID, outcome: .record(record))
    let event = Wire.Event(seq: 1, payload: .modifyRecords(Wire.ModifyRecordsEvent(callback: .perRecordSave(save))))
    return Wire.Frame(streamID: 7, kind: .event(event))
}()

/// The event a client receives for each record it saves: the record sent back without its
/// fields (`fields_as_sent`), with the parts the server sets.
private let savedAsSentFrame: Wire.Frame = {
    let zone = Wire.RecordZoneID(zoneName: "Notes", ownerName: "__defaultOwner__")
    let user = Wire.RecordID(recordName: "_alice")
    let record = Wire.Record(
        recordID: Wire.RecordID(recordName: "note-0001-4f9b2c7e-1d3a-4e55-9a77-0c8e2b6f1a90", zoneID: zone),
        recordType: "Note", recordChangeTag: "2-1k3f", creationDate: Wire.Timestamp(seconds: 1_764_500_000, nanos: 123_456_000),
        modificationDate: Wire.Timestamp(seconds: 1_764_500_000, nanos: 123_456_000), creatorUserRecordID: user,
        lastModifiedUserRecordID: user)
    let save = Wire.ModifyRecordsPerRecordSave(recordID: record.recordID, outcome: .record(record), fieldsAsSent: true)
    let event = Wire.Event(seq: 1, payload: .modifyRecords(Wire.ModifyRecordsEvent(callback: .perRecordSave(save))))
    return Wire.Frame(streamID: 7, kind: .event(event))
}()

private let pingFrame = Wire.Frame(streamID: 0, kind: .ping(Wire.Ping(nonce: 42)))

/// The devices of the CKSyncEngine latency benchmark, from its `setup` to its `teardown`.
private let syncEngineBench = SharedBench<SyncEngineBench>()

/// The server and users of one sharing benchmark, from its `setup` to its `teardown`.
private let sharedDatabaseBench = SharedBench<SharedDatabaseBench>()

private func setUpSharedDatabaseBench() async throws {
    sharedDatabaseBench.set(try await SharedDatabaseBench(certificates: certificates))
}

private func tearDownSharedDatabaseBench() async {
    await sharedDatabaseBench.take()?.close()
}

/// A bench that a benchmark's `setup` builds and its `teardown` closes, used by every sample
/// in between.
final class SharedBench<Bench: Sendable>: Sendable {
    private let bench = NIOLockedValueBox<Bench?>(nil)

    func set(_ bench: Bench) {
        self.bench.withLockedValue { $0 = bench }
    }

    /// - throws: ``SharedBenchMissing`` when `setup` did not build it.
    func get() throws -> Bench {
        guard let bench = self.bench.withLockedValue({ $0 }) else { throw SharedBenchMissing() }
        return bench
    }

    func take() -> Bench? {
        self.bench.withLockedValue { bench in
            defer { bench = nil }
            return bench
        }
    }
}

struct SharedBenchMissing: Error {}

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .throughput, .mallocCountTotal],
        warmupIterations: 10,
        scalingFactor: .kilo,
        maxDuration: .seconds(3),
        maxIterations: 1_000_000
    )

    // MARK: Codec

    Benchmark("Frame encode: Ping") { benchmark in
        var buffer = ByteBuffer()
        buffer.reserveCapacity(1024)
        for _ in benchmark.scaledIterations {
            buffer.clear()
            try FrameEncoder.encode(pingFrame, into: &buffer)
        }
        blackHole(buffer)
    }

    Benchmark("Frame encode: Event, record saved (\(eventFrame.serializedBytes().count) B)") { benchmark in
        var buffer = ByteBuffer()
        buffer.reserveCapacity(1024)
        for _ in benchmark.scaledIterations {
            buffer.clear()
            try FrameEncoder.encode(eventFrame, into: &buffer)
        }
        blackHole(buffer)
    }

    Benchmark("Frame decode: Ping") { benchmark in
        var encoded = ByteBuffer()
        try FrameEncoder.encode(pingFrame, into: &encoded)
        var decoder = FrameDecoder()
        for _ in benchmark.scaledIterations {
            var input = encoded
            blackHole(try decoder.decode(buffer: &input))
        }
    }

    Benchmark("Frame decode: Event, record saved") { benchmark in
        var encoded = ByteBuffer()
        try FrameEncoder.encode(eventFrame, into: &encoded)
        var decoder = FrameDecoder()
        for _ in benchmark.scaledIterations {
            var input = encoded
            blackHole(try decoder.decode(buffer: &input))
        }
    }

    // The same bytes through the frame decoder, which reads this event directly, and through
    // the generic path (nesting check, protobuf-c, conversion from C) it takes for other frames.
    Benchmark("Frame decode: Event, record saved with its fields as sent (\(savedAsSentFrame.serializedBytes().count) B)") {
        benchmark in
        var encoded = ByteBuffer()
        try FrameEncoder.encode(savedAsSentFrame, into: &encoded)
        var decoder = FrameDecoder()
        for _ in benchmark.scaledIterations {
            var input = encoded
            blackHole(try decoder.decode(buffer: &input))
        }
    }

    Benchmark("Frame decode through protobuf-c: Event, record saved with its fields as sent") { benchmark in
        let body = savedAsSentFrame.serializedBytes()
        for _ in benchmark.scaledIterations {
            blackHole(try Wire.Frame(serializedBytes: body))
        }
    }

    // MARK: TLS in memory

    // MARK: Checksums (change tokens, cursors and push tokens are HMACs; assets carry a SHA-256)

    Benchmark("HMAC-SHA-256 of a 64-byte token body") { benchmark in
        let key = [UInt8](repeating: 0x42, count: 32)
        let message = [UInt8](repeating: 0x17, count: 64)
        for _ in benchmark.scaledIterations {
            blackHole(Wire.SHA256.hmac(key: key, message: message))
        }
    }

    Benchmark("SHA-256 of 1 MiB", configuration: .init(metrics: [.wallClock, .throughput], scalingFactor: .one)) {
        benchmark in
        let bytes = [UInt8](repeating: 0x5A, count: 1 << 20)
        for _ in benchmark.scaledIterations {
            blackHole(Wire.SHA256.hash(bytes))
        }
    }

    Benchmark("TLS in memory: round trip of a 100-byte frame") { benchmark in
        let pair = try InMemoryTLSPair(certificates: certificates)
        let message = ByteBuffer(repeating: 0x5A, count: 100)
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            blackHole(try pair.roundTrip(request: message, response: message))
        }
    }

    Benchmark(
        "TLS in memory: stream 100-byte frames (1,000 per flush)",
        configuration: .init(scalingFactor: .one)
    ) { benchmark in
        let pair = try InMemoryTLSPair(certificates: certificates)
        let message = ByteBuffer(repeating: 0x5A, count: 100)
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            blackHole(try pair.stream(message, count: 1_000))
        }
    }

    Benchmark(
        "TLS in memory: stream Event frames (\(eventFrame.serializedBytes().count) B) encode → TLS → decode, 1,000 per flush",
        configuration: .init(scalingFactor: .one)
    ) { benchmark in
        let pair = try InMemoryTLSPair(certificates: certificates, framed: true)
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            blackHole(try pair.streamFrames(eventFrame, count: 1_000))
        }
    }

    // MARK: Real loopback TLS against an in-process server

    // Each of these builds its server, connection (and journal) once, in `setup`: ordo-one's
    // benchmark calls the closure once per sample, and a bench built in it measured the first
    // use of a new server, connection and SQLite reader in every sample.

    let pingBench = SharedBench<LoopbackBench>()
    Benchmark(
        "Loopback TLS: Ping round trips, 1 in flight (1,000 per iteration)",
        configuration: .init(metrics: [.wallClock, .throughput], scalingFactor: .one, maxDuration: .seconds(5))
    ) { benchmark in
        let bench = try pingBench.get()
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            try await bench.pingRoundTrips(count: 1_000, inFlight: 1)
        }
        benchmark.stopMeasurement()
    } setup: {
        pingBench.set(try await LoopbackBench(certificates: certificates))
    } teardown: {
        await pingBench.take()?.close()
    }

    let streamBench = SharedBench<LoopbackBench>()
    Benchmark(
        "Loopback TLS: server streams 10,000 Event frames (\(eventFrame.serializedBytes().count) B) per operation",
        configuration: .init(metrics: [.wallClock, .throughput], scalingFactor: .one, maxDuration: .seconds(5))
    ) { benchmark in
        let bench = try streamBench.get()
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            blackHole(try await bench.streamOnce())
        }
        benchmark.stopMeasurement()
    } setup: {
        guard case .event(let event) = eventFrame.kind, let payload = event.payload else { throw SharedBenchMissing() }
        streamBench.set(
            try await LoopbackBench(certificates: certificates, executor: StreamingExecutor(count: 10_000, payload: payload)))
    } teardown: {
        await streamBench.take()?.close()
    }

    // MARK: Long-lived operations

    let journalBench = SharedBench<ReplayBench>()
    Benchmark(
        "Long-lived replay: journal read, 10,000 events (\(eventFrame.serializedBytes().count) B) in pages of 128",
        configuration: .init(metrics: [.wallClock, .throughput], scalingFactor: .one, maxDuration: .seconds(5))
    ) { benchmark in
        let bench = try journalBench.get()
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            blackHole(try await bench.readJournal(pageSize: 128))
        }
        benchmark.stopMeasurement()
    } setup: {
        guard case .event(let event) = eventFrame.kind, let payload = event.payload else { throw SharedBenchMissing() }
        journalBench.set(try await ReplayBench(certificates: certificates, events: 10_000, payload: payload))
    } teardown: {
        await journalBench.take()?.close()
    }

    let replayBench = SharedBench<ReplayBench>()
    Benchmark(
        "Long-lived replay: Resume from seq 0 over loopback TLS, 10,000 journaled callbacks per iteration",
        configuration: .init(metrics: [.wallClock, .throughput], scalingFactor: .one, maxDuration: .seconds(5))
    ) { benchmark in
        let bench = try replayBench.get()
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            blackHole(try await bench.replayOnce())
        }
        benchmark.stopMeasurement()
    } setup: {
        guard case .event(let event) = eventFrame.kind, let payload = event.payload else { throw SharedBenchMissing() }
        replayBench.set(try await ReplayBench(certificates: certificates, events: 10_000, payload: payload))
    } teardown: {
        await replayBench.take()?.close()
    }

    // MARK: Store (SQLiteStorage.modifyRecords, no network)

    Benchmark(
        "Store: save 400 records in one operation",
        configuration: .init(metrics: [.wallClock, .throughput], scalingFactor: .one, maxDuration: .seconds(5))
    ) { benchmark in
        let bench = try StoreWriteBench()
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            try await bench.save(bench.records(400))  // new records each time; building them costs little
        }
        benchmark.stopMeasurement()
        bench.close()
    }

    Benchmark(
        "Store: 1,000 single-record saves, 64 in flight (group commit)",
        configuration: .init(metrics: [.wallClock, .throughput], scalingFactor: .one, maxDuration: .seconds(5))
    ) { benchmark in
        let bench = try StoreWriteBench()
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            try await bench.saveSingles(1_000, inFlight: 64)
        }
        benchmark.stopMeasurement()
        bench.close()
    }

    Benchmark(
        "End to end (CirrusKit → cirrusd → SQLite): save 400 records in one operation",
        configuration: .init(metrics: [.wallClock, .throughput], scalingFactor: .one, maxDuration: .seconds(5))
    ) { benchmark in
        let bench = try await EndToEndBench(certificates: certificates)
        let batches = (0..<200).map { EndToEndBench.records(400, prefix: "b\($0)") }
        var index = 0
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            try await bench.saveBatch(batches[index % batches.count])
            index += 1
        }
        benchmark.stopMeasurement()
        await bench.close()
    }

    Benchmark(
        "End to end (CirrusKit → cirrusd → SQLite): 1,000 single-record saves, 64 in flight",
        configuration: .init(metrics: [.wallClock, .throughput], scalingFactor: .one, maxDuration: .seconds(5))
    ) { benchmark in
        let bench = try await EndToEndBench(certificates: certificates)
        let rounds = (0..<100).map { EndToEndBench.records(1_000, prefix: "s\($0)") }
        var index = 0
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            try await bench.saveSingles(rounds[index % rounds.count], inFlight: 64)
            index += 1
        }
        benchmark.stopMeasurement()
        await bench.close()
    }

    Benchmark(
        "End to end: a query matching 10 of 10,000 records (index-driven)",
        configuration: .init(metrics: [.wallClock, .throughput], scalingFactor: .one, maxDuration: .seconds(5))
    ) { benchmark in
        let bench = try await EndToEndBench(certificates: certificates)
        try await bench.seedForQueries(count: 10_000)
        var group = 0
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            let matched = try await bench.queryGroup(group % 1_000)
            precondition(matched == 10, "the benchmark's query should match 10 records")
            group += 7
        }
        benchmark.stopMeasurement()
        await bench.close()
    }

    // One sample per round trip (the devices are set up once, in `setup`), so p50 and p99 are
    // those of single round trips: from the save's start until B has the notification. A's own
    // answer is awaited after the measurement (the next round trip starts after it).
    let pushBench = SharedBench<PushBench>()
    Benchmark(
        "End to end: push — a save on device A until device B (same user) has the notification",
        configuration: .init(
            metrics: [.wallClock], warmupIterations: 100, scalingFactor: .one, maxDuration: .seconds(10), maxIterations: 5_000)
    ) { benchmark in
        let bench = try pushBench.get()
        benchmark.startMeasurement()
        let save = bench.startSave()
        try await bench.nextNotification()
        benchmark.stopMeasurement()
        try await save.value
    } setup: {
        pushBench.set(try await PushBench(certificates: certificates))
    } teardown: {
        await pushBench.take()?.close()
    }

    // One sample per edit (the devices are set up once, in `setup`), so p50 and p99 are
    // those of single edits.
    Benchmark(
        "End to end: CKSyncEngine — an edit on device A until device B's delegate has it",
        configuration: .init(
            metrics: [.wallClock], warmupIterations: 20, scalingFactor: .one, maxDuration: .seconds(60), maxIterations: 1_000)
    ) { benchmark in
        let bench = try syncEngineBench.get()
        for _ in benchmark.scaledIterations {
            try await bench.edit()
        }
    } setup: {
        syncEngineBench.set(try await SyncEngineBench(certificates: certificates))
    } teardown: {
        await syncEngineBench.take()?.close()
    }

    Benchmark(
        "End to end: CKSyncEngine — a new device's first fetch of 100,000 records",
        configuration: .init(metrics: [.wallClock, .throughput], scalingFactor: .one, maxDuration: .seconds(5), maxIterations: 3)
    ) { benchmark in
        let bench = try await SyncEngineBench(certificates: certificates)
        try await bench.seed(100_000)
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            let count = try await bench.initialSync()
            precondition(count >= 100_000, "the new device should get every record")
        }
        benchmark.stopMeasurement()
        await bench.close()
    }

    // The shared database's access checks: the same fetch and save by the owner in their
    // private database and by a participant in their shared database (a zone shared whole, and
    // a hierarchy), one after the other in one run. One sample per operation against a server
    // set up once, in `setup`, and warmed up: the steady state a device sees. (Set up per
    // sample, every participant's sample also paid the first read of their shares on a new
    // server, and the few samples a 5 s run allowed were all cold.) Compare the wall-clock
    // figures.
    for place in [
        SharedDatabaseBench.Place.ownersPrivateDatabase, .ownersHierarchy, .participantsZoneSharedWhole, .participantsHierarchy,
    ] {
        let configuration = Benchmark.Configuration(
            metrics: [.wallClock, .throughput], warmupIterations: 20, scalingFactor: .one,
            maxDuration: .seconds(5), maxIterations: 2_000)
        Benchmark("Sharing: fetch 100 records in one operation — \(place)", configuration: configuration) { benchmark in
            let bench = try sharedDatabaseBench.get()
            for _ in benchmark.scaledIterations {
                let count = try await bench.fetch(place)
                precondition(count == SharedDatabaseBench.recordCount, "the bench should fetch every record")
            }
        } setup: {
            try await setUpSharedDatabaseBench()
        } teardown: {
            await tearDownSharedDatabaseBench()
        }

        Benchmark("Sharing: save 100 new records in one operation — \(place)", configuration: configuration) { benchmark in
            let bench = try sharedDatabaseBench.get()
            for _ in benchmark.scaledIterations {
                try await bench.save(place)
            }
        } setup: {
            try await setUpSharedDatabaseBench()
        } teardown: {
            await tearDownSharedDatabaseBench()
        }
    }

    // The same comparison paired: each sample runs the owner's operation and the
    // participant's, one right after the other (in turns, which goes first), against one
    // server, and records both times and their ratio. On a machine whose load swings, separate
    // benchmarks run minutes apart and their medians move by 30 %; the median of per-sample
    // ratios does not.
    let pairs: [(owner: SharedDatabaseBench.Place, participant: SharedDatabaseBench.Place, name: String)] = [
        (.ownersHierarchy, .participantsHierarchy, "a hierarchy"),
        (.ownersPrivateDatabase, .participantsZoneSharedWhole, "a zone shared whole"),
    ]
    let ownerTime = BenchmarkMetric.custom("owner (µs)", useScalingFactor: false)
    let participantTime = BenchmarkMetric.custom("participant (µs)", useScalingFactor: false)
    let ratio = BenchmarkMetric.custom("participant / owner (%)", useScalingFactor: false)
    let pairedConfiguration = Benchmark.Configuration(
        metrics: [ownerTime, participantTime, ratio], warmupIterations: 20, scalingFactor: .one,
        maxDuration: .seconds(10), maxIterations: 2_000)
    for (kind, operation) in [("fetch 100 records", false), ("save 100 new records", true)] {
        for pair in pairs {
            Benchmark("Sharing, paired: \(kind), \(pair.name) — participant / owner", configuration: pairedConfiguration) {
                benchmark in
                let bench = try sharedDatabaseBench.get()
                func time(_ place: SharedDatabaseBench.Place) async throws -> Duration {
                    let clock = ContinuousClock()
                    let start = clock.now
                    if operation {
                        try await bench.save(place)
                    } else {
                        let count = try await bench.fetch(place)
                        precondition(count == SharedDatabaseBench.recordCount, "the bench should fetch every record")
                    }
                    return clock.now - start
                }
                for _ in benchmark.scaledIterations {
                    let owner: Duration
                    let participant: Duration
                    if bench.takeTurn() {
                        owner = try await time(pair.owner)
                        participant = try await time(pair.participant)
                    } else {
                        participant = try await time(pair.participant)
                        owner = try await time(pair.owner)
                    }
                    let ownerMicroseconds = Int(owner / .microseconds(1))
                    let participantMicroseconds = Int(participant / .microseconds(1))
                    benchmark.measurement(ownerTime, ownerMicroseconds)
                    benchmark.measurement(participantTime, participantMicroseconds)
                    benchmark.measurement(ratio, (100 * participantMicroseconds) / max(1, ownerMicroseconds))
                }
            } setup: {
                try await setUpSharedDatabaseBench()
            } teardown: {
                await tearDownSharedDatabaseBench()
            }
        }
    }

    Benchmark(
        "End to end: fetch all changes of a 10,000-record zone from the beginning",
        configuration: .init(metrics: [.wallClock, .throughput], scalingFactor: .one, maxDuration: .seconds(5))
    ) { benchmark in
        let bench = try await EndToEndBench(certificates: certificates)
        try await bench.seedForQueries(count: 10_000)
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            let count = try await bench.fetchAllChanges()
            precondition(count == 10_000, "the benchmark should fetch every record")
        }
        benchmark.stopMeasurement()
        await bench.close()
    }

    let pipelinedPingBench = SharedBench<LoopbackBench>()
    Benchmark(
        "Loopback TLS: Ping round trips, 64 in flight (6,400 per iteration)",
        configuration: .init(metrics: [.wallClock, .throughput], scalingFactor: .one, maxDuration: .seconds(5))
    ) { benchmark in
        let bench = try pipelinedPingBench.get()
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            try await bench.pingRoundTrips(count: 6_400, inFlight: 64)
        }
        benchmark.stopMeasurement()
    } setup: {
        pipelinedPingBench.set(try await LoopbackBench(certificates: certificates))
    } teardown: {
        await pipelinedPingBench.take()?.close()
    }

    // MARK: Queries

    // The first page of `bucket == k` (10 of ~1/16 of the zone, no sort descriptors), the
    // query of `cirrus bench`'s query mix, straight on the store. Filling the zone is not measured,
    // nor is the first query on `bucket`, which indexes the field in the zone (measured below).
    for records in [1_000, 220_000] {
        Benchmark(
            "Store query: first page of 10, bucket == k, zone of \(records) records",
            configuration: .init(
                // The duration counts the filling too (~30 s for 220,000 records).
                metrics: [.wallClock, .throughput], warmupIterations: 0, scalingFactor: .one,
                maxDuration: .seconds(90), maxIterations: 300)
        ) { benchmark in
            let bench = try await QueryPageBench(records: records)
            var bucket = 0
            benchmark.startMeasurement()
            for _ in benchmark.scaledIterations {
                blackHole(try await bench.firstPage(bucket: bucket))
                bucket = (bucket + 1) % QueryPageBench.buckets
            }
            benchmark.stopMeasurement()
            bench.close()
        }
    }

    // The first query that names `bucket` in a filled zone: it indexes the field for every record
    // of the zone first (`FieldIndexing`, 1,000 records per write transaction), once.
    Benchmark(
        "Store query: the first query naming a field indexes it, zone of 220000 records",
        configuration: .init(
            metrics: [.wallClock], warmupIterations: 0, scalingFactor: .one, maxDuration: .seconds(120), maxIterations: 3)
    ) { benchmark in
        let bench = try await QueryPageBench(records: 220_000, indexed: false)
        benchmark.startMeasurement()
        blackHole(try await bench.firstPage(bucket: 1))
        benchmark.stopMeasurement()
        bench.close()
    }
}
