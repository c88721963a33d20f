import Dispatch
import GRDB
import GRDBSQLite
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
///
/// A passive checkpoint running beside the writer never catches up with it
/// under sustained writes: it copies the frames that were in the log when it
/// began, the writer has appended more by then, and SQLite starts the log over
/// only when a writer begins with every frame copied. So the log grew without
/// bound (605 MB during a 100,000-row import, 280 MB in 8 s of 400-record
/// saves), and with it the work of every read that looks a page up in it.
/// The writer counts the log's frames after each commit (SQLite's WAL hook,
/// ``watch(_:)``); once the log is above `logLimitBytes`, it runs a passive
/// checkpoint itself between two transactions (``writerShouldCheckpoint``):
/// nothing is appended meanwhile, so it copies what the background checkpoints
/// have not yet copied, and the next transaction starts the log over
/// (`journal_size_limit` cuts the file back). It never waits: while the
/// background checkpoint runs, or a reader still reads older frames, it tries
/// again after the next commit. Saves wait for that copy once per
/// `logLimitBytes` of log instead of the log growing.
final class WALCheckpointer: Sendable {
    private struct State {
        var scheduled = false
        var closed = false
    }

    /// The frames in the log after the writer's last commit. A class of its own that SQLite's
    /// WAL hook retains and never releases (a few bytes per storage opened): the writer
    /// connection may still commit after this checkpointer is gone, while the storage
    /// deinitializes.
    private final class LogFrames: Sendable {
        let count = Atomic<Int>(0)
    }
    private let logFrames = LogFrames()

    private let connection: DatabaseQueue
    private let state = Mutex(State())
    private let interval: DispatchTimeInterval
    /// Frames (pages) the log may hold before the writer checkpoints.
    private let logLimitFrames: Int

    /// Opens a connection of its own to the database file at `path`.
    ///
    /// - throws: `DatabaseError` when SQLite cannot open the file.
    init(
        path: String, interval: DispatchTimeInterval = .milliseconds(200),
        logLimitBytes: Int = SQLiteStorage.defaultWALLimitBytes
    ) throws {
        var configuration = Configuration()
        configuration.label = "CirrusStore.checkpointer"
        configuration.busyMode = .immediateError
        connection = try DatabaseQueue(path: path, configuration: configuration)
        let pageSize = try connection.read { db in try Int.fetchOne(db, sql: "PRAGMA page_size") } ?? 4096
        // A frame is a page and its 24-byte header.
        self.logLimitFrames = max(1, logLimitBytes / (pageSize + 24))
        self.interval = interval
    }

    /// Counts the log's frames after each commit of `writer` (the writer connection).
    func watch(_ writer: Database) {
        let context = Unmanaged.passRetained(self.logFrames).toOpaque()
        sqlite3_wal_hook(
            writer.sqliteConnection,
            { context, _, _, frames in
                if let context {
                    Unmanaged<LogFrames>.fromOpaque(context).takeUnretainedValue().count.store(
                        Int(frames), ordering: .relaxed)
                }
                return SQLITE_OK
            }, context)
    }

    /// Whether the writer should checkpoint now, between two transactions: its last commit
    /// left the log above the limit. Writer queue.
    var writerShouldCheckpoint: Bool {
        self.logFrames.count.load(ordering: .relaxed) > self.logLimitFrames
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
