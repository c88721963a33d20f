import Foundation
import Synchronization

/// How `cirrus import` and `cirrus export` show their progress (`--progress`).
package enum ProgressStyle: String, Sendable, CaseIterable {
    /// A bar on a terminal, nothing otherwise.
    case auto
    /// A line rewritten in place: done/total, per second and the time left.
    case bar
    /// One JSON object a line, every second and once at the end, for scripts and supervisors.
    case json
    case none
}

/// Shows how far a long transfer got: how many rows (or records) are done, how many per
/// second in this run, and, when the total is known, the time left. Updates may come as often
/// as the caller likes; a bar is redrawn at most ten times a second and a JSON line written at
/// most once per `interval`.
///
/// For example:
/// ```swift
/// let reporter = ProgressReporter(style: .json, unit: "rows") { line in FileHandle.standardError.write(Data(line.utf8)) }
/// reporter.update(done: 400, total: 10_000)
/// reporter.finish(done: 10_000, total: 10_000)
/// ```
package final class ProgressReporter: Sendable {
    fileprivate struct State {
        var started: ContinuousClock.Instant?
        /// Done when the first update came (rows finished before a resume), not counted in the rate.
        var baseline = 0
        var lastShown: ContinuousClock.Instant?
    }

    package let style: ProgressStyle
    /// What is counted, plural: "rows", "records".
    package let unit: String
    private let interval: Duration
    private let write: @Sendable (String) -> Void
    private let now: @Sendable () -> ContinuousClock.Instant
    private let state = Mutex(State())

    /// - parameter style: `.auto` is resolved with `isTerminal`.
    /// - parameter write: receives each piece of output (standard error, normally).
    /// - parameter now: the clock; injected by tests.
    package init(
        style: ProgressStyle, unit: String, isTerminal: Bool = false, interval: Duration = .seconds(1),
        now: @escaping @Sendable () -> ContinuousClock.Instant = { .now }, write: @escaping @Sendable (String) -> Void
    ) {
        self.style = style == .auto ? (isTerminal ? .bar : .none) : style
        self.unit = unit
        self.interval = interval
        self.now = now
        self.write = write
    }

    /// Reports `done` of `total` (nil when the total is not known).
    package func update(done: Int, total: Int?) {
        guard self.style != .none else { return }
        let now = self.now()
        let figures: Figures? = self.state.withLock { state in
            if state.started == nil {
                state.started = now
                state.baseline = done
            }
            let minimum = self.style == .bar ? Duration.milliseconds(100) : self.interval
            if let last = state.lastShown, now - last < minimum { return nil }
            state.lastShown = now
            return Figures(state: state, now: now, done: done, total: total)
        }
        guard let figures else { return }
        self.write(self.style == .bar ? "\r\u{1B}[2K" + figures.barLine(unit: self.unit) : figures.jsonLine(unit: self.unit, finished: false))
    }

    /// Ends the display: a bar is cleared, a JSON reporter writes its last line.
    package func finish(done: Int, total: Int?) {
        let now = self.now()
        let figures = self.state.withLock { state in
            if state.started == nil {
                state.started = now
                state.baseline = 0
            }
            return Figures(state: state, now: now, done: done, total: total)
        }
        switch self.style {
        case .bar: self.write("\r\u{1B}[2K")
        case .json: self.write(figures.jsonLine(unit: self.unit, finished: true))
        case .auto, .none: break
        }
    }

    /// One moment's numbers.
    struct Figures {
        var done: Int
        var total: Int?
        var elapsed: Double
        var perSecond: Double

        fileprivate init(state: State, now: ContinuousClock.Instant, done: Int, total: Int?) {
            let elapsed = state.started.map { now - $0 } ?? .zero
            let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
            self.init(done: done, total: total, elapsed: seconds, perSecond: seconds > 0 ? Double(done - state.baseline) / seconds : 0)
        }

        init(done: Int, total: Int?, elapsed: Double, perSecond: Double) {
            self.done = done
            self.total = total
            self.elapsed = elapsed
            self.perSecond = perSecond
        }

        /// Seconds left at the current rate; nil without a total or a rate.
        var secondsLeft: Double? {
            guard let total, self.perSecond > 0 else { return nil }
            return Double(max(0, total - self.done)) / self.perSecond
        }

        func barLine(unit: String) -> String {
            let rate = "\(Int(self.perSecond.rounded())) \(unit)/s"
            guard let total else { return "\(self.done) \(unit)  \(rate)  \(Self.clock(self.elapsed))" }
            let width = 30
            let fraction = total > 0 ? min(1, Double(self.done) / Double(total)) : 1
            let filled = Int(fraction * Double(width))
            let left = self.secondsLeft.map(Self.clock) ?? "--:--"
            return "[\(String(repeating: "#", count: filled))\(String(repeating: " ", count: width - filled))] "
                + "\(self.done)/\(total) \(unit)  \(rate)  ETA \(left)"
        }

        func jsonLine(unit: String, finished: Bool) -> String {
            var fields = [
                "\"event\":\"\(finished ? "done" : "progress")\"", "\"unit\":\"\(unit)\"", "\"done\":\(self.done)",
            ]
            if let total { fields.append("\"total\":\(total)") }
            fields.append("\"elapsedSeconds\":\(Self.decimal(self.elapsed))")
            fields.append("\"perSecond\":\(Self.decimal(self.perSecond))")
            if !finished, let left = self.secondsLeft { fields.append("\"etaSeconds\":\(Self.decimal(left))") }
            return "{" + fields.joined(separator: ",") + "}\n"
        }

        static func decimal(_ value: Double) -> String {
            String(format: "%.1f", value.isFinite ? value : 0)
        }

        /// `m:ss`, or `h:mm:ss` from an hour on.
        static func clock(_ seconds: Double) -> String {
            let whole = Int(seconds.rounded())
            let (hours, minutes, secs) = (whole / 3600, whole / 60 % 60, whole % 60)
            return hours > 0 ? String(format: "%d:%02d:%02d", hours, minutes, secs) : String(format: "%d:%02d", minutes, secs)
        }
    }
}
