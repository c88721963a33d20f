import Dispatch
import GRDB
import Synchronization

/// Copies the write-ahead log into the database file on a connection of its
/// own, so that the writer never runs a checkpoint after its commit.
///
/// SQLite's automatic checkpoint runs on the committing connection: every
/// thousand pages a save waited for the log to be copied and the database file
/// to be synced before it could report success. The writer turns it off
/// (`wal_autocheckpoint = 0`) and tells this checkpointer after each commit; a
/// passive checkpoint follows at most every `interval`, never waiting for the
/// writer or for readers, so a commit never waits for it either. Durability
/// does not depend on it: a commit is durable once its log frames are synced.
final class WALCheckpointer: Sendable {
    private struct State {
        var scheduled = false
        var closed = false
    }

    private let connection: DatabaseQueue
    private let state = Mutex(State())
    private let interval: DispatchTimeInterval

    /// Opens a connection of its own to the database file at `path`.
    ///
    /// - throws: `DatabaseError` when SQLite cannot open the file.
    init(path: String, interval: DispatchTimeInterval = .milliseconds(200)) throws {
        var configuration = Configuration()
        configuration.label = "CirrusStore.checkpointer"
        configuration.busyMode = .immediateError
        connection = try DatabaseQueue(path: path, configuration: configuration)
        self.interval = interval
    }

    /// Called after a commit: schedules a passive checkpoint unless one is already due.
    func committed() {
        let schedule = state.withLock { state in
            if state.scheduled || state.closed { return false }
            state.scheduled = true
            return true
        }
        guard schedule else { return }
        DispatchQueue.global(qos: .utility).asyncAfter(deadline: .now() + interval) {
            self.connection.asyncWriteWithoutTransaction { db in
                // Checked on the connection's queue, where `close()` runs too.
                let closed = self.state.withLock { state in
                    state.scheduled = false
                    return state.closed
                }
                guard !closed else { return }
                // A passive checkpoint that could not finish (readers on old
                // frames, the writer busy) is simply tried again after the next commit.
                _ = try? db.checkpoint(.passive)
            }
        }
    }

    /// Stops checkpointing and closes the connection (after a checkpoint in progress).
    ///
    /// - throws: `DatabaseError` when SQLite refuses to close.
    func close() throws {
        state.withLock { $0.closed = true }
        try connection.close()
    }
}
