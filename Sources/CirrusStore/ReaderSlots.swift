import Synchronization

/// GRDB's reader connections, counted by the storage, so that a read of its pool never blocks
/// a thread waiting for one.
///
/// GRDB checks a reader out of its pool by waiting on a semaphore, on the calling thread (for
/// an `await pool.read`, on a cooperative thread inside an actor of its own). An `await
/// pool.read` gives its reader back only when its task runs again, on a cooperative thread:
/// with every cooperative thread waiting for a reader, no reader ever comes back (a deadlock,
/// seen with 64 one-record fetches beside 8 large ones on 2 cores, when reads in place still
/// used the pool's readers). So every read of the pool holds one of these slots, as many as
/// GRDB has readers, for at least as long as it holds its reader, and waits for one suspended
/// (``take()``), not blocking a thread. A slot holder always finds a reader free. Reads in
/// place use connections of their own (``InPlaceReaders``), which they never wait for.
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

    /// Takes a slot if one is free; false otherwise.
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
