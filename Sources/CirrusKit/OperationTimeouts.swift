import Dispatch
import NIOConcurrencyHelpers

/// Watches the timeouts of every running operation with one timer for all of them.
///
/// An operation registers when it starts and leaves when it finishes. The timer ticks at the
/// shortest check interval any registered operation asked for (a quarter of its shortest
/// timeout, between 10 ms and 1 s) and stops a tick after the last operation left. A tick only
/// reads each operation's deadlines; one that looks due is checked again on its own callback
/// queue, which ends it (``CKOperation/checkTimeouts(request:resource:)``). A timer per
/// operation cost a timer source made and cancelled through libdispatch's manager thread for
/// every call.
final class OperationTimeouts: @unchecked Sendable {
    // @unchecked Sendable: `state` (which holds the timer source, not Sendable itself) is read
    // and written only under its lock; `queue` is immutable.
    /// The timeouts of one running operation.
    struct Watch: Sendable {
        let operation: CKOperation
        let request: Double
        let resource: Double
        let interval: Double
    }

    private struct State {
        var watches: [ObjectIdentifier: Watch] = [:]
        var timer: DispatchSourceTimer?
        var interval = Double.infinity
    }

    static let shared = OperationTimeouts(queue: DispatchQueue(label: "CirrusKit.OperationTimeouts"))

    private let queue: DispatchQueue
    private let state = NIOLockedValueBox(State())

    init(queue: DispatchQueue) {
        self.queue = queue
    }

    /// Whether `operation` is watched now (tests).
    func isWatching(_ operation: CKOperation) -> Bool {
        self.state.withLockedValue { $0.watches[ObjectIdentifier(operation)] != nil }
    }

    /// Starts watching `watch.operation`.
    func register(_ watch: Watch) {
        self.state.withLockedValue { state in
            state.watches[ObjectIdentifier(watch.operation)] = watch
            if state.timer == nil || watch.interval < state.interval {
                self.schedule(&state, interval: min(watch.interval, state.interval))
            }
        }
    }

    /// Stops watching `operation` (it finished).
    func unregister(_ operation: CKOperation) {
        _ = self.state.withLockedValue { $0.watches.removeValue(forKey: ObjectIdentifier(operation)) }
    }

    private func schedule(_ state: inout State, interval: Double) {
        state.timer?.cancel()
        let timer = DispatchSource.makeTimerSource(queue: self.queue)
        let nanoseconds = Int(interval * 1e9)
        timer.schedule(deadline: .now() + .nanoseconds(nanoseconds), repeating: .nanoseconds(nanoseconds))
        timer.setEventHandler { [weak self] in self?.tick() }
        state.timer = timer
        state.interval = interval
        timer.resume()
    }

    private func tick() {
        let watches = self.state.withLockedValue { state -> [Watch] in
            if state.watches.isEmpty {
                state.timer?.cancel()
                state.timer = nil
                state.interval = .infinity
                return []
            }
            // The shortest interval asked for by an operation still running.
            let shortest = state.watches.values.map(\.interval).min() ?? state.interval
            if shortest > state.interval {
                self.schedule(&state, interval: shortest)
            }
            return Array(state.watches.values)
        }
        let now = DispatchTime.now().uptimeNanoseconds
        for watch in watches where watch.operation.mayHaveTimedOut(now: now, request: watch.request, resource: watch.resource) {
            watch.operation.callbackQueue.async {
                watch.operation.checkTimeouts(request: watch.request, resource: watch.resource)
            }
        }
    }
}
