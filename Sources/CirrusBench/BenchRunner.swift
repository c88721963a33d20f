import CirrusKit
import CirrusModel
import Foundation
import Histogram

/// How a run is going, for a live progress line.
public struct BenchProgress: Sendable {
    /// True during warm-up.
    public var warmingUp: Bool
    /// Seconds since the current phase began.
    public var elapsed: Double
    /// Operations completed in the measured phase so far.
    public var operations: UInt64
    /// Their rate so far.
    public var operationsPerSecond: Double
    /// Errors so far (failed operations and items) in the measured phase.
    public var errors: UInt64
}

/// Runs a `cirrus bench` load against a server and measures it.
///
/// Closed loop (no `rate`): `concurrency` workers each start their next operation when the
/// previous one ends; latency is each operation's own time. Open loop (`rate`): operation `i`
/// is meant to start at `i / rate` s (`OpenLoopSchedule`), at most `concurrency` are in
/// flight, and latency runs from the intended start, waits included. Operations that start
/// during warm-up are counted apart; an operation belongs to the phase it started in, and the
/// measured phase lasts until its last operation ended, so counts match what the server did.
/// Errors are counted by code and never end the run.
///
/// For example:
/// ```swift
/// let result = try await BenchRunner(configuration: configuration).run()
/// print(BenchTable.render(result))
/// ```
public final class BenchRunner: Sendable {
    public let configuration: BenchConfiguration
    private let progressInterval: Double
    private let progress: (@Sendable (BenchProgress) -> Void)?
    private let clock = ContinuousClock()

    /// `progress` is called about every `progressInterval` seconds while the load runs.
    public init(
        configuration: BenchConfiguration,
        progressInterval: Double = 0.5,
        progress: (@Sendable (BenchProgress) -> Void)? = nil
    ) {
        self.configuration = configuration
        self.progressInterval = progressInterval
        self.progress = progress
    }

    /// Sets up (zones, preloaded records, connections), runs the load, and returns what it
    /// measured.
    ///
    /// - throws: `BenchError`: `.invalidConfiguration` for bad settings, `.setupFailed` (with
    ///   the `CKError`) when the server cannot be reached or the setup failed, or when
    ///   ``BenchConfiguration/serverMetrics`` cannot be read or is not a `cirrusd`'s.
    public func run() async throws(BenchError) -> BenchResult {
        let configuration = self.configuration
        try configuration.validate()
        if let endpoint = configuration.serverMetrics {
            // Read once first: a wrong address ends the run before the setup writes anything.
            let samples: PrometheusSamples
            do {
                samples = try await endpoint.scrape()
            } catch {
                throw BenchError(kind: .setupFailed, message: "--server-metrics: \(error.message)", underlying: nil)
            }
            guard samples.value(of: ServerMetricNames.processCPU) != nil else {
                throw BenchError(
                    kind: .setupFailed,
                    message: "--server-metrics: \(endpoint) has no \(ServerMetricNames.processCPU): is it a cirrusd's --metrics-address?",
                    underlying: nil)
            }
        }

        let runID = "r" + UUID().uuidString.prefix(8).lowercased()
        let containers = configuration.handshakes
            ? []
            : (0..<configuration.connections).map { index in
                CKContainer(identifier: configuration.containerIdentifier, configuration: configuration.client(forConnection: index))
            }
        let workload = BenchWorkload(configuration: configuration, containers: containers, runID: runID)
        do {
            if configuration.handshakes {
                // One connection first, so a server that cannot be reached ends the run now.
                let probe = await BenchWorkload.handshake(configuration: configuration)
                if let error = probe.operationError {
                    throw error
                }
            } else {
                for container in containers {
                    _ = try await container.authenticatedUserRecordName()
                }
                try await workload.setUp()
            }
        } catch let error as BenchError {
            throw error
        } catch {
            let ckError = error as? CKError
            throw BenchError(
                kind: .setupFailed, message: "setup failed: \(ckError.map(Self.describe) ?? "\(error)")", underlying: ckError)
        }

        let recorder = BenchRecorder()
        let measuredStart = Locked<MeasuredStart?>(nil)
        let loadStart = self.clock.now
        let startMeasuring: @Sendable () async -> Void = {
            let server = await Self.scrape(configuration.serverMetrics)
            let start = MeasuredStart(
                instant: ContinuousClock.now, bytes: Self.bytes(of: containers), clientCPU: processCPUSeconds(), server: server)
            measuredStart.withLock { $0 = start }
            recorder.set(.measured)
        }
        if configuration.warmup == 0 {
            await startMeasuring()
        }
        let limit: UInt64? = if case .operations(let count) = configuration.stop { UInt64(count) } else { nil }

        await withTaskGroup(of: Void.self) { group in
            // The phases.
            group.addTask {
                if configuration.warmup > 0 {
                    try? await Task.sleep(for: .seconds(configuration.warmup))
                    await startMeasuring()
                }
                if case .duration(let seconds) = configuration.stop {
                    try? await Task.sleep(for: .seconds(seconds))
                    recorder.set(.done)
                }
            }
            if let progress = self.progress {
                group.addTask {
                    while !Task.isCancelled {
                        try? await Task.sleep(for: .seconds(self.progressInterval))
                        if Task.isCancelled { break }
                        progress(self.currentProgress(recorder: recorder, measuredStart: measuredStart, loadStart: loadStart))
                    }
                }
            }
            // The load; when it has drained, the phase and progress tasks are not needed.
            await withTaskGroup(of: Void.self) { load in
                load.addTask {
                    if let rate = configuration.rate {
                        await self.runOpenLoop(rate: rate, workload: workload, recorder: recorder, limit: limit)
                    } else {
                        await self.runClosedLoop(workload: workload, recorder: recorder, limit: limit)
                    }
                }
            }
            recorder.set(.done)
            group.cancelAll()
        }
        let end = self.clock.now
        let endBytes = Self.bytes(of: containers)
        let endCPU = processCPUSeconds()
        let endServer = await Self.scrape(configuration.serverMetrics)
        await workload.tearDown()
        let start =
            measuredStart.withLock { $0 } ?? MeasuredStart(instant: end, bytes: endBytes, clientCPU: endCPU, server: endServer)
        var result = self.result(
            recorder: recorder, elapsed: (end - start.instant).seconds, bytes: (start.bytes, endBytes), workload: workload)
        var cpu = BenchCPU(clientSeconds: max(0, endCPU - start.clientCPU), operations: result.counts.operations)
        switch (start.server, endServer) {
        case (.success(let before), .success(let after)):
            cpu.addServer(from: before, to: after, operations: result.counts.operations)
        case (.failure(let error), _), (_, .failure(let error)):
            cpu.serverMetricsError = error.message
        default:
            break
        }
        result.cpu = cpu
        return result
    }

    /// When the measured phase began, and the counters then.
    private struct MeasuredStart: Sendable {
        var instant: ContinuousClock.Instant
        var bytes: CKContainer.TransportStatistics
        var clientCPU: Double
        var server: Result<PrometheusSamples, BenchMetricsError>?
    }

    /// The server's metrics now, when they were asked for.
    private static func scrape(_ endpoint: BenchMetricsEndpoint?) async -> Result<PrometheusSamples, BenchMetricsError>? {
        guard let endpoint else { return nil }
        do {
            return .success(try await endpoint.scrape())
        } catch {
            return .failure(error)
        }
    }

    // MARK: - Loops

    private func runClosedLoop(workload: BenchWorkload, recorder: BenchRecorder, limit: UInt64?) async {
        let configuration = self.configuration
        await withTaskGroup(of: Void.self) { group in
            for worker in 0..<configuration.concurrency {
                group.addTask {
                    var generator = SplitMix64(seed: configuration.seed &+ UInt64(worker) &* 0x9E37_79B9)
                    while let phase = recorder.begin(limit: limit) {
                        let kind = configuration.workload.pick(using: &generator)
                        let started = self.clock.now
                        let outcome = configuration.handshakes
                            ? await BenchWorkload.handshake(configuration: configuration)
                            : await workload.execute(kind, connection: worker, generator: &generator)
                        recorder.record(outcome, phase: phase, latencyMicroseconds: (self.clock.now - started).microseconds)
                    }
                }
            }
        }
    }

    private func runOpenLoop(rate: Double, workload: BenchWorkload, recorder: BenchRecorder, limit: UInt64?) async {
        let configuration = self.configuration
        let schedule = OpenLoopSchedule(rate: rate)
        let start = self.clock.now
        await withTaskGroup(of: Void.self) { group in
            var inFlight = 0
            var index: UInt64 = 0
            while true {
                let intended = start + .seconds(schedule.intendedOffset(of: index))
                if self.clock.now < intended {
                    try? await self.clock.sleep(until: intended)
                }
                if inFlight >= configuration.concurrency {
                    await group.next()
                    inFlight -= 1
                }
                guard let phase = recorder.begin(limit: limit) else { break }
                if phase == .measured, schedule.lateness(of: index, actual: (self.clock.now - start).seconds) > 0.001 {
                    recorder.state.withLock { $0.delayedStarts += 1 }
                }
                var generator = SplitMix64(seed: configuration.seed ^ (index &* 0xD1B5_4A32_D192_ED03))
                let connection = Int(index % UInt64(max(configuration.connections, 1)))
                inFlight += 1
                index += 1
                group.addTask {
                    let kind = configuration.workload.pick(using: &generator)
                    let outcome = configuration.handshakes
                        ? await BenchWorkload.handshake(configuration: configuration)
                        : await workload.execute(kind, connection: connection, generator: &generator)
                    recorder.record(outcome, phase: phase, latencyMicroseconds: (self.clock.now - intended).microseconds)
                }
            }
        }
    }

    // MARK: - Results

    private func currentProgress(
        recorder: BenchRecorder,
        measuredStart: Locked<MeasuredStart?>,
        loadStart: ContinuousClock.Instant
    ) -> BenchProgress {
        let now = self.clock.now
        let start = measuredStart.withLock { $0?.instant }
        return recorder.state.withLock { state in
            let elapsed = (now - (start ?? loadStart)).seconds
            return BenchProgress(
                warmingUp: start == nil,
                elapsed: elapsed,
                operations: state.total.operations,
                operationsPerSecond: elapsed > 0 ? Double(state.total.operations) / elapsed : 0,
                errors: state.errors.values.reduce(0, +)
            )
        }
    }

    private func result(
        recorder: BenchRecorder,
        elapsed: Double,
        bytes: (start: CKContainer.TransportStatistics, end: CKContainer.TransportStatistics),
        workload: BenchWorkload
    ) -> BenchResult {
        let configuration = self.configuration
        let state = recorder.state.withLock { $0 }
        let perSecond = { (value: UInt64) in elapsed > 0 ? Double(value) / elapsed : 0 }
        let bytesIn = bytes.end.bytesReceived &- bytes.start.bytesReceived &+ state.extraBytesIn
        let bytesOut = bytes.end.bytesSent &- bytes.start.bytesSent &+ state.extraBytesOut
        var byKind: [String: BenchResult.PerKind] = [:]
        for (kind, counts) in state.byKind {
            byKind[kind.rawValue] = BenchResult.PerKind(
                counts: counts, latency: LatencySummary(state.histogramByKind[kind] ?? BenchRecorder.makeHistogram()))
        }
        return BenchResult(
            mode: configuration.handshakes ? "handshakes" : "operations",
            settings: BenchResult.Settings(
                server: "\(configuration.client.host):\(configuration.client.port)",
                connections: configuration.handshakes ? 0 : configuration.connections,
                concurrency: configuration.concurrency,
                stop: configuration.stop,
                warmupSeconds: configuration.warmup,
                mix: configuration.workload,
                recordsPerOperation: configuration.recordsPerOperation,
                payloadBytes: configuration.payloadBytes,
                zones: configuration.zones,
                seed: configuration.seed,
                rate: configuration.rate,
                eventsPerStream: configuration.workload.streams ? configuration.eventsPerStream : nil,
                assetBytes: configuration.workload.movesAssets ? configuration.assetBytes : nil
            ),
            elapsedSeconds: elapsed,
            counts: state.total,
            operationsPerSecond: perSecond(state.total.operations),
            recordsPerSecond: perSecond(state.total.records),
            bytesIn: bytesIn,
            bytesOut: bytesOut,
            bytesInPerSecond: perSecond(bytesIn),
            bytesOutPerSecond: perSecond(bytesOut),
            latency: LatencySummary(state.histogram),
            byKind: byKind,
            errorsByCode: state.errors,
            firstErrorMessages: state.errorMessages,
            warmup: state.warmup,
            delayedStarts: state.delayedStarts,
            preloadedRecordsPerZone: configuration.handshakes || !configuration.workload.reads
                ? 0 : configuration.preloadRecordsPerZone,
            zoneNames: configuration.handshakes ? [] : workload.usedZoneIDs.map(\.zoneName),
            runID: workload.runID
        )
    }

    private static func bytes(of containers: [CKContainer]) -> CKContainer.TransportStatistics {
        containers.reduce(into: CKContainer.TransportStatistics()) { total, container in
            let statistics = container.transportStatistics
            total.bytesSent += statistics.bytesSent
            total.bytesReceived += statistics.bytesReceived
            total.connectionsEstablished += statistics.connectionsEstablished
        }
    }

    static func describe(_ error: CKError) -> String {
        error.message.map { "\(BenchOutcome.codeName(error.code)): \($0)" } ?? BenchOutcome.codeName(error.code)
    }
}

extension Duration {
    var seconds: Double {
        let (seconds, attoseconds) = self.components
        return Double(seconds) + Double(attoseconds) / 1e18
    }

    var microseconds: UInt64 {
        let value = self.seconds * 1e6
        return value <= 0 ? 0 : UInt64(min(value, Double(UInt64.max / 2)))
    }
}
