import NIOConcurrencyHelpers
import NIOCore

/// One repeating timer per event loop (and interval) that checks the timers of every connection
/// on that loop, instead of a repeating task per connection: an idle connection costs an entry
/// in a dictionary, not a scheduled task, its promise and its closure.
///
/// A connection registers in `handlerAdded` and leaves when it closes; the timer stops with the
/// last connection of its loop and starts again with the next.
///
/// For example: `self.tick = ConnectionTicker.register(on: loop, every: .seconds(1)) { … }`,
/// later `self.tick?.cancel()`.
final class ConnectionTicker: @unchecked Sendable {
    // @unchecked Sendable: `connections`, `task` and `nextID` are read and written only on
    // `eventLoop` (connections register and leave on their own loop; every method asserts it);
    // the registry that finds a ticker is locked.

    /// A connection's registration: cancel it (on the loop) when the connection closes.
    struct Registration {
        fileprivate let ticker: ConnectionTicker
        fileprivate let id: UInt64

        func cancel() {
            self.ticker.remove(self.id)
        }
    }

    private struct Key: Hashable {
        let eventLoop: ObjectIdentifier
        let interval: Int64
    }

    private static let registry = NIOLockedValueBox<[Key: ConnectionTicker]>([:])

    private let key: Key
    private let eventLoop: any EventLoop
    private let interval: TimeAmount
    private var connections: [UInt64: () -> Void] = [:]
    private var nextID: UInt64 = 0
    private var task: RepeatedTask?

    private init(key: Key, eventLoop: any EventLoop, interval: TimeAmount) {
        self.key = key
        self.eventLoop = eventLoop
        self.interval = interval
    }

    /// Calls `tick` every `interval` on `eventLoop` (the caller's loop) until the registration
    /// is cancelled.
    static func register(
        on eventLoop: any EventLoop, every interval: TimeAmount, _ tick: @escaping () -> Void
    ) -> Registration {
        eventLoop.assertInEventLoop()
        let key = Key(eventLoop: ObjectIdentifier(eventLoop), interval: interval.nanoseconds)
        let ticker = Self.registry.withLockedValue { tickers in
            if let ticker = tickers[key] { return ticker }
            let ticker = ConnectionTicker(key: key, eventLoop: eventLoop, interval: interval)
            tickers[key] = ticker
            return ticker
        }
        return ticker.add(tick)
    }

    private func add(_ tick: @escaping () -> Void) -> Registration {
        self.eventLoop.assertInEventLoop()
        self.nextID += 1
        self.connections[self.nextID] = tick
        if self.task == nil {
            let loopBound = NIOLoopBound(self, eventLoop: self.eventLoop)
            self.task = self.eventLoop.scheduleRepeatedTask(initialDelay: self.interval, delay: self.interval) { _ in
                loopBound.value.fire()
            }
        }
        return Registration(ticker: self, id: self.nextID)
    }

    private func remove(_ id: UInt64) {
        self.eventLoop.assertInEventLoop()
        guard self.connections.removeValue(forKey: id) != nil, self.connections.isEmpty else { return }
        self.task?.cancel()
        self.task = nil
        // Forgotten with its last connection, so tickers of finished loops do not pile up.
        Self.registry.withLockedValue { tickers in
            if tickers[self.key] === self { tickers[self.key] = nil }
        }
    }

    /// Whether a timer runs on `eventLoop` at `interval` now (tests).
    static func isRunning(on eventLoop: any EventLoop, every interval: TimeAmount) -> Bool {
        let key = Key(eventLoop: ObjectIdentifier(eventLoop), interval: interval.nanoseconds)
        return Self.registry.withLockedValue { $0[key] != nil }
    }

    private func fire() {
        // A tick may close connections, which then leave: call a snapshot.
        for tick in Array(self.connections.values) { tick() }
    }
}
