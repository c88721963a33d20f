import CirrusKit
import CirrusModel
import Foundation

/// The operations of a run and the data they need: zones `bench-0` …, records preloaded for
/// reads, new records for each modify, and for `stream` a zone of the run's own
/// (`bench-stream-<runID>`) holding `eventsPerStream` records, deleted after the run.
struct BenchWorkload: Sendable {
    /// The field every benchmark record carries for queries: 0 ..< buckets.
    static let buckets = 16

    let configuration: BenchConfiguration
    let containers: [CKContainer]
    let zoneIDs: [CKRecordZone.ID]
    /// The zone `stream` operations fetch in full (set up only when the mix streams).
    let streamZoneID: CKRecordZone.ID
    let runID: String
    let payload: Data
    /// Numbers new records (unique in the run).
    private let counter = Locked<UInt64>(0)
    /// The file `upload` sends and `download` fetches (made by ``setUp()`` when the mix moves
    /// assets).
    let assetFile: URL
    /// Where the client keeps its download of the asset file (set by ``setUp()``).
    private let downloadedCopy = Locked<URL?>(nil)

    init(configuration: BenchConfiguration, containers: [CKContainer], runID: String) {
        self.configuration = configuration
        self.containers = containers
        self.runID = runID
        self.zoneIDs = (0..<configuration.zones).map { CKRecordZone.ID(zoneName: "bench-\($0)") }
        self.streamZoneID = CKRecordZone.ID(zoneName: "bench-stream-\(runID)")
        self.assetFile = FileManager.default.temporaryDirectory.appendingPathComponent("cirrus-bench-asset-\(runID).bin")
        var generator = SplitMix64(seed: configuration.seed)
        self.payload = Data((0..<configuration.payloadBytes).map { _ in UInt8(truncatingIfNeeded: generator.next()) })
    }

    /// The name of preloaded record `index` of zone `zone`.
    func preloadedName(zone: Int, index: Int) -> String {
        "\(self.runID)-p\(zone)-\(index)"
    }

    private func record(named name: String, zone: CKRecordZone.ID, number: UInt64) -> CKRecord {
        let record = CKRecord(recordType: self.configuration.recordType, recordID: CKRecord.ID(recordName: name, zoneID: zone))
        record["bucket"] = Int64(number % UInt64(Self.buckets))
        record["payload"] = self.payload
        record["number"] = Int64(truncatingIfNeeded: number)
        return record
    }

    /// The zones the run uses (the stream zone too when the mix streams).
    var usedZoneIDs: [CKRecordZone.ID] {
        self.zoneIDs + (self.configuration.workload.streams ? [self.streamZoneID] : [])
    }

    /// Creates the zones and, when the mix reads, preloads every zone (and the stream zone when
    /// it streams). Not measured.
    func setUp() async throws {
        let database = self.containers[0].privateCloudDatabase
        let results = try await database.modifyRecordZones(
            saving: self.usedZoneIDs.map { CKRecordZone(zoneID: $0) }, deleting: [])
        for (_, result) in results.saveResults {
            _ = try result.get()
        }
        if self.configuration.workload.movesAssets {
            try self.makeAssetFile()
        }
        if self.configuration.workload.weights[.download] != nil {
            let (digest, _) = try CKAsset.digestOfFile(at: self.assetFile)
            self.downloadedCopy.withLock {
                $0 = CKAsset.contentFile(
                    sha256: digest, fileName: self.assetFile.lastPathComponent, in: CKAsset.defaultContentDirectory)
            }
            let record = CKRecord(
                recordType: self.configuration.recordType,
                recordID: CKRecord.ID(recordName: "\(self.runID)-asset", zoneID: self.zoneIDs[0]))
            record["asset"] = CKAsset(fileURL: self.assetFile)
            _ = try await database.save(record)
        }
        if self.configuration.workload.streams {
            try await self.preload(self.streamZoneID, count: self.configuration.eventsPerStream) { "\(self.runID)-s\($0)" }
        }
        guard self.configuration.workload.reads else { return }
        for (zoneIndex, zoneID) in self.zoneIDs.enumerated() {
            try await self.preload(zoneID, count: self.configuration.preloadRecordsPerZone) {
                self.preloadedName(zone: zoneIndex, index: $0)
            }
        }
    }

    /// Writes `count` records named `name(0)` … into `zoneID`, 400 at a time.
    private func preload(_ zoneID: CKRecordZone.ID, count: Int, name: (Int) -> String) async throws {
        let database = self.containers[0].privateCloudDatabase
        for start in stride(from: 0, to: count, by: 400) {
            let records = (start..<min(start + 400, count)).map {
                self.record(named: name($0), zone: zoneID, number: UInt64($0))
            }
            let saved = try await database.modifyRecords(saving: records, deleting: [], savePolicy: .allKeys, atomically: false)
            for (_, result) in saved.saveResults {
                _ = try result.get()
            }
        }
    }

    /// Deletes the run's stream zone, if it made one (best effort: the figures are taken).
    func tearDown() async {
        if self.configuration.workload.movesAssets {
            try? FileManager.default.removeItem(at: self.assetFile)
            if let copy = self.downloadedCopy.withLock({ $0 }) { try? FileManager.default.removeItem(at: copy) }
        }
        guard self.configuration.workload.streams, let container = self.containers.first else { return }
        _ = try? await container.privateCloudDatabase.modifyRecordZones(saving: [], deleting: [self.streamZoneID])
    }

    /// Runs one operation of `kind` on connection `connection`.
    func execute(_ kind: BenchOperationKind, connection: Int, generator: inout SplitMix64) async -> BenchOutcome {
        var outcome = BenchOutcome(kind: kind)
        let database = self.containers[connection % self.containers.count].privateCloudDatabase
        let zoneIndex = Int(generator.next() % UInt64(self.zoneIDs.count))
        let zoneID = self.zoneIDs[zoneIndex]
        let perOperation = self.configuration.recordsPerOperation
        do {
            switch kind {
            case .modify:
                let first = self.counter.withLock { counter -> UInt64 in
                    defer { counter += UInt64(perOperation) }
                    return counter
                }
                let records = (0..<UInt64(perOperation)).map {
                    self.record(named: "\(self.runID)-m\(first + $0)", zone: zoneID, number: first + $0)
                }
                let results = try await database.modifyRecords(saving: records, deleting: [], atomically: false)
                for (_, result) in results.saveResults {
                    switch result {
                    case .success:
                        outcome.counts.records += 1
                        outcome.counts.recordsWritten += 1
                    case .failure(let error):
                        outcome.itemFailed(error)
                    }
                }
            case .fetch:
                let preloaded = UInt64(self.configuration.preloadRecordsPerZone)
                var names = Set<String>()
                while names.count < min(perOperation, Int(preloaded)) {
                    names.insert(self.preloadedName(zone: zoneIndex, index: Int(generator.next() % preloaded)))
                }
                let results = try await database.records(for: names.map { CKRecord.ID(recordName: $0, zoneID: zoneID) })
                for (_, result) in results {
                    switch result {
                    case .success: outcome.counts.records += 1
                    case .failure(let error): outcome.itemFailed(error)
                    }
                }
            case .query:
                let bucket = Int(generator.next() % UInt64(Self.buckets))
                let query = CKQuery(
                    recordType: self.configuration.recordType, predicate: CKPredicate(format: "bucket == %d", bucket))
                let results = try await database.records(matching: query, inZoneWith: zoneID, resultsLimit: perOperation)
                for (_, result) in results.matchResults {
                    switch result {
                    case .success: outcome.counts.records += 1
                    case .failure(let error): outcome.itemFailed(error)
                    }
                }
            case .ping:
                try await self.containers[connection % self.containers.count].ping()
            case .upload:
                let first = self.counter.withLock { counter -> UInt64 in
                    defer { counter += UInt64(perOperation) }
                    return counter
                }
                // One modify of `perOperation` records, each with an asset of content never
                // sent before (so nothing is deduplicated): small ones are files of their own,
                // a large one is the run's file with its first bytes stamped.
                let files = try self.assetFiles(numbered: first, count: perOperation)
                defer { self.removeAssetFiles(files) }
                let records = files.enumerated().map { i, file -> CKRecord in
                    let record = CKRecord(
                        recordType: self.configuration.recordType,
                        recordID: CKRecord.ID(recordName: "\(self.runID)-u\(first + UInt64(i))", zoneID: zoneID))
                    record["asset"] = CKAsset(fileURL: file)
                    return record
                }
                let results = try await database.modifyRecords(saving: records, deleting: [], atomically: false)
                for (_, result) in results.saveResults {
                    switch result {
                    case .success:
                        outcome.counts.records += 1
                        outcome.counts.recordsWritten += 1
                    case .failure(let error):
                        outcome.itemFailed(error)
                    }
                }
            case .download:
                // The client keeps downloaded content by digest: drop it so each fetch downloads.
                if let copy = self.downloadedCopy.withLock({ $0 }) { try? FileManager.default.removeItem(at: copy) }
                let record = try await database.record(for: CKRecord.ID(recordName: "\(self.runID)-asset", zoneID: self.zoneIDs[0]))
                guard (record["asset"] as? CKAsset)?.fileURL != nil else {
                    throw CKError(.assetNotAvailable, message: "the fetched asset has no file")
                }
                outcome.counts.records += 1
            case .stream:
                try await self.fetchAllChanges(of: self.streamZoneID, in: database, outcome: &outcome)
            case .changes:
                let changes = try await database.recordZoneChanges(inZoneWith: zoneID, since: nil, resultsLimit: perOperation)
                for (_, result) in changes.modificationResultsByID {
                    switch result {
                    case .success: outcome.counts.records += 1
                    case .failure(let error): outcome.itemFailed(error)
                    }
                }
            }
        } catch {
            outcome.failed(error)
        }
        return outcome
    }

    /// One `CKFetchRecordZoneChangesOperation` fetching every change of `zoneID` (all batches,
    /// one operation): counts each changed record, and each record or zone that failed.
    private func fetchAllChanges(
        of zoneID: CKRecordZone.ID, in database: CKDatabase, outcome: inout BenchOutcome
    ) async throws {
        struct Tally {
            var records: UInt64 = 0
            var errors: [any Error] = []
        }
        let tally = Locked(Tally())
        let operation = CKFetchRecordZoneChangesOperation(recordZoneIDs: [zoneID])
        operation.fetchAllChanges = true
        operation.recordWasChangedBlock = { _, result in
            tally.withLock { tally in
                switch result {
                case .success: tally.records += 1
                case .failure(let error): tally.errors.append(error)
                }
            }
        }
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            operation.fetchRecordZoneChangesResultBlock = { continuation.resume(with: $0) }
            database.add(operation)
        }
        let counted = tally.withLock { $0 }
        outcome.counts.records += counted.records
        for error in counted.errors {
            outcome.itemFailed(error)
        }
    }

    /// One new connection: TCP, TLS 1.3 and `Hello`/`HelloAck`, on a container of its own
    /// that is dropped afterwards.
    static func handshake(configuration: BenchConfiguration) async -> BenchOutcome {
        var outcome = BenchOutcome(kind: nil)
        let container = CKContainer(identifier: configuration.containerIdentifier, configuration: configuration.client)
        do {
            _ = try await container.authenticatedUserRecordName()
            outcome.counts.records = 0
        } catch {
            outcome.failed(error)
        }
        let statistics = container.transportStatistics
        outcome.bytesIn = statistics.bytesReceived
        outcome.bytesOut = statistics.bytesSent
        return outcome
    }

    /// Assets up to this size get a file of their own per record; larger ones reuse the run's
    /// file (one upload at a time).
    static let ownFileAssetBytes = 4 << 20

    /// Files of distinct content for records `first` …: `count` new small files, or the run's
    /// large file stamped with `first`.
    private func assetFiles(numbered first: UInt64, count: Int) throws -> [URL] {
        guard self.configuration.assetBytes <= Self.ownFileAssetBytes else {
            let handle = try FileHandle(forWritingTo: self.assetFile)
            defer { try? handle.close() }
            try handle.write(contentsOf: withUnsafeBytes(of: first.littleEndian) { Array($0) })
            return Array(repeating: self.assetFile, count: count)
        }
        var base = [UInt8](try Data(contentsOf: self.assetFile))
        return try (0..<UInt64(count)).map { i in
            let url = self.assetFile.deletingLastPathComponent()
                .appendingPathComponent("\(self.assetFile.lastPathComponent)-\(first + i)")
            withUnsafeBytes(of: (first + i).littleEndian) { stamp in
                for (j, byte) in stamp.enumerated() where j < base.count { base[j] = byte }
            }
            try Data(base).write(to: url)
            return url
        }
    }

    private func removeAssetFiles(_ files: [URL]) {
        for file in files where file != self.assetFile { try? FileManager.default.removeItem(at: file) }
    }

    /// Writes `assetBytes` of pseudo-random bytes to `assetFile`, 4 MiB at a time.
    private func makeAssetFile() throws {
        guard FileManager.default.createFile(atPath: self.assetFile.path, contents: nil),
            let handle = FileHandle(forWritingAtPath: self.assetFile.path)
        else {
            throw CKError(.internalError, message: "cannot create \(self.assetFile.path)")
        }
        defer { try? handle.close() }
        var generator = SplitMix64(seed: self.configuration.seed &+ 7)
        var left = self.configuration.assetBytes
        while left > 0 {
            let count = min(left, 4 << 20)
            var block = [UInt8](repeating: 0, count: count)
            for i in stride(from: 0, to: count, by: 8) {
                let word = generator.next()
                for j in 0..<min(8, count - i) { block[i + j] = UInt8(truncatingIfNeeded: word >> (8 * UInt64(j))) }
            }
            try handle.write(contentsOf: block)
            left -= count
        }
    }
}
