import Synchronization

/// GRDB's reader connections, counted by the storage, so that a read runs in place (on the
/// calling thread) only when a reader is free for it.
///
/// A synchronous `DatabasePool.read` on a thread of Swift's cooperative pool waits on GRDB's
/// semaphore when every reader is taken. An `await pool.read` gives its reader back only when
/// its task runs again, on a cooperative thread: with every cooperative thread waiting in a
/// synchronous read, no reader ever comes back (a deadlock, seen with 64 one-record fetches
/// beside 8 large ones on 2 cores). So every read of the storage holds one of these slots, as
/// many as GRDB has readers, for at least as long as it holds its reader: a read in place takes
/// a slot only when one is free now (``takeIfFree()``) and never waits; the others wait for one
/// suspended (``take()``), not blocking a thread. A slot holder always finds a reader free.
final class ReaderSlots: Sendable {
    private struct State {
        var free: Int
        /// Reads waiting for a slot, first come first served (a few at most: one per read in
        /// flight beyond the readers).
        var waiting: [CheckedContinuation<Void, Never>] = []
    }

    private let state: Mutex<State>

    /// `count` slots: the pool's `maximumReaderCount`.
    init(count: Int) {
        self.state = Mutex(State(free: count))
    }

    /// Takes a slot if one is free and no read is waiting for one; false otherwise.
    func takeIfFree() -> Bool {
        self.state.withLock { state in
            guard state.free > 0 else { return false }
            state.free -= 1
            return true
        }
    }

    /// Takes a slot, suspended until one is free. It does not end early when its task is
    /// cancelled: slots come back as fast as reads end.
    func take() async {
        if self.takeIfFree() { return }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = self.state.withLock { state -> Bool in
                if state.free > 0 {
                    state.free -= 1
                    return true
                }
                state.waiting.append(continuation)
                return false
            }
            if now { continuation.resume() }
        }
    }

    /// How many reads wait for a slot now.
    var waitingCount: Int {
        self.state.withLock { $0.waiting.count }
    }

    /// Gives a slot back: to the read waiting longest, or to the free ones.
    func giveBack() {
        let next = self.state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard !state.waiting.isEmpty else {
                state.free += 1
                return nil
            }
            return state.waiting.removeFirst()
        }
        next?.resume()
    }
}
