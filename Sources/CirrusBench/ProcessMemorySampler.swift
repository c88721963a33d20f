import CirrusModel
import Foundation

/// Samples the resident memory of a local process (Linux `/proc/<pid>/status`, `VmRSS`) every
/// `interval` while a benchmark runs: `cirrus bench --server-pid` reports how much the server
/// grew while it was measured.
///
/// For example:
/// ```swift
/// let sampler = ProcessMemorySampler(pid: serverPID)
/// sampler.start()
/// sampler.restartFromNow()        // when measuring begins
/// let memory = sampler.stop()      // baseline, peak, growth in bytes
/// ```
public final class ProcessMemorySampler: Sendable {
    /// What the samples showed.
    public struct Summary: Sendable, Codable, Hashable {
        /// Resident bytes when measuring began.
        public var baselineBytes: UInt64
        /// The most resident bytes seen after that.
        public var peakBytes: UInt64
        /// `peakBytes - baselineBytes`.
        public var growthBytes: UInt64 { self.peakBytes > self.baselineBytes ? self.peakBytes - self.baselineBytes : 0 }
    }

    private struct State {
        var summary: Summary?
        var task: Task<Void, Never>?
    }

    public let pid: Int32
    private let interval: Duration
    private let state = Locked(State())

    public init(pid: Int32, interval: Duration = .milliseconds(20)) {
        self.pid = pid
        self.interval = interval
    }

    /// The process's resident bytes now, nil when it cannot be read.
    public func residentBytes() -> UInt64? {
        guard let text = try? String(contentsOfFile: "/proc/\(self.pid)/status", encoding: .utf8) else { return nil }
        for line in text.split(separator: "\n") where line.hasPrefix("VmRSS:") {
            let kilobytes = line.split(separator: " ").dropFirst().first.flatMap { UInt64($0) }
            return kilobytes.map { $0 * 1024 }
        }
        return nil
    }

    /// Starts sampling (the baseline is the first sample).
    public func start() {
        self.restartFromNow()
        let task = Task { [interval] in
            while !Task.isCancelled {
                self.sample()
                try? await Task.sleep(for: interval)
            }
        }
        self.state.withLock { $0.task = task }
    }

    /// Takes the current size as the baseline and the peak (measuring begins).
    public func restartFromNow() {
        let now = self.residentBytes()
        self.state.withLock { state in
            state.summary = now.map { Summary(baselineBytes: $0, peakBytes: $0) }
        }
    }

    private func sample() {
        guard let now = self.residentBytes() else { return }
        self.state.withLock { state in
            if var summary = state.summary {
                summary.peakBytes = max(summary.peakBytes, now)
                state.summary = summary
            } else {
                state.summary = Summary(baselineBytes: now, peakBytes: now)
            }
        }
    }

    /// Stops sampling; what it saw, nil when the process could not be read.
    public func stop() -> Summary? {
        self.sample()
        return self.state.withLock { state in
            state.task?.cancel()
            return state.summary
        }
    }
}
