import GRDB
import Synchronization

/// Read-only connections the storage keeps for its reads in place
/// (``SQLiteStorage/readInPlaceIfFree(_:)``), one `DatabaseQueue` each, taken from a free list
/// and never waited for: a read finding none free goes to GRDB's pool instead.
///
/// GRDB's synchronous `DatabasePool.read` checks a reader out of its pool on every call (a
/// dispatch barrier, a semaphore, a dispatch group, a lock, a key path built at run time) and
/// reads the schema version before the read: about half of what the read of a one-record fetch
/// cost beside its three lookups. A queue of its own skips all of it: one dispatch `sync` onto
/// its idle queue (which runs the block on the calling thread), and a read transaction begun
/// and committed with cached statements (GRDB prepares its `BEGIN` and `COMMIT` anew for each
/// transaction). That is the one place the store runs them itself (``RawStatement`` says
/// never): on a read-only connection GRDB has no transaction observers to tell, and it asks
/// SQLite, not its own bookkeeping, whether a transaction is open.
///
/// The schema never changes under them: the storage migrates before it opens any.
final class InPlaceReaders: Sendable {
    private struct State {
        var free: [DatabaseQueue] = []
        var opened = 0
        var isClosed = false
    }

    private let state = Mutex(State())
    private let path: String
    private let configuration: Configuration
    private let limit: Int

    /// Up to `limit` connections to the database at `path`, opened when first needed with
    /// `configuration` made read-only.
    init(path: String, configuration: Configuration, limit: Int) {
        var configuration = configuration
        configuration.readonly = true
        configuration.label = "CirrusStore.inPlace"
        self.path = path
        self.configuration = configuration
        self.limit = limit
    }

    /// `body` on a snapshot, on a free connection (one more opened while fewer than the limit
    /// are); nil without running it when every one is busy (or they are closed).
    ///
    /// - throws: what `body` throws, or `DatabaseError` when a connection cannot be opened or
    ///   the read fails.
    func readIfFree<T>(_ body: (Database) throws -> T) throws -> T? {
        guard let queue = try self.take() else { return nil }
        defer { self.giveBack(queue) }
        return try queue.inDatabase { db in
            try RawStatement(db, sql: "BEGIN DEFERRED").run()
            let value: T
            do {
                value = try body(db)
                try RawStatement(db, sql: "COMMIT").run()
            } catch {
                // Ends the snapshot whatever failed: GRDB traps on a transaction left open.
                if db.isInsideTransaction { try? RawStatement(db, sql: "ROLLBACK").run() }
                throw error
            }
            return value
        }
    }

    /// Closes every connection, and each busy one as it comes back.
    func close() throws {
        let free = self.state.withLock { state in
            state.isClosed = true
            defer { state.free = [] }
            return state.free
        }
        for queue in free { try queue.close() }
    }

    private func take() throws -> DatabaseQueue? {
        enum Next {
            case reuse(DatabaseQueue)
            case open
            case none
        }
        let next = self.state.withLock { state -> Next in
            guard !state.isClosed else { return .none }
            if let queue = state.free.popLast() { return .reuse(queue) }
            guard state.opened < self.limit else { return .none }
            state.opened += 1
            return .open
        }
        switch next {
        case .reuse(let queue):
            return queue
        case .open:
            do {
                return try DatabaseQueue(path: self.path, configuration: self.configuration)
            } catch {
                self.state.withLock { $0.opened -= 1 }
                throw error
            }
        case .none:
            return nil
        }
    }

    private func giveBack(_ queue: DatabaseQueue) {
        let keep = self.state.withLock { state -> Bool in
            guard !state.isClosed else { return false }
            state.free.append(queue)
            return true
        }
        if !keep { try? queue.close() }
    }
}
