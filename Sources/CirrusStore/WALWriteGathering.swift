import CSQLiteWAL
import GRDB

/// The SQLite VFS that writes each write-ahead-log transaction with one call instead of two
/// `pwrite`s per page (`Sources/CSQLiteWAL/wal_vfs.c`). It wraps SQLite's default VFS, changes
/// nothing else, and becomes the process's default, so every connection opened after
/// ``install()`` uses it. Durability is unchanged: a commit still returns after SQLite's
/// `fdatasync` of the log (`synchronous = FULL`), and the buffer is written before that sync.
enum WALWriteGathering {
    /// Installs the VFS once per process; false when SQLite refused it (it then goes on with
    /// its own VFS, writing each frame as it always did).
    @discardableResult
    static func install() -> Bool {
        cirrus_wal_vfs_install() == 0
    }

    /// Whether the process-wide SQLite settings ``install()`` makes were taken: no memory
    /// statistics (every allocation SQLite makes would otherwise take a global mutex) and
    /// multi-thread mode (connections without a mutex of their own; GRDB uses each connection
    /// from one thread at a time). False when SQLite was initialized before ``install()`` ran,
    /// as in a process that opened a database first; SQLite then keeps its defaults.
    static var processSettingsTaken: Bool {
        cirrus_sqlite_settings_taken() != 0
    }

    /// Log writes kept in a buffer, and buffers written, by `db`'s own log file; nil when it has none open through this VFS (not
    /// in WAL mode, or opened before ``install()``).
    static func counters(of db: Database) -> (gatheredWrites: UInt64, flushes: UInt64)? {
        var counters = cirrus_wal_vfs_counters()
        guard let connection = db.sqliteConnection,
            cirrus_wal_vfs_connection_counters(connection, &counters) == 0
        else { return nil }
        return (UInt64(counters.gatheredWrites), UInt64(counters.flushes))
    }
}

/// SQLite's page cache as ``WALWriteGathering/install()`` makes it, before SQLite initializes: its
/// default cache (pcache1), wrapped so that the locking page's number, under which B-tree
/// rebalancing parks a page for a moment, is held under 0 (`Sources/CSQLiteWAL/page_cache.c`).
/// pcache1 otherwise takes that number (262,145 with 4 KiB pages) for its largest page and
/// walks its whole hash table and every page it holds at the end of each write transaction that
/// followed a page split.
enum SQLitePageCache {
    /// Whether the wrapper is the process's page cache (false when SQLite was initialized before
    /// ``WALWriteGathering/install()`` ran; SQLite then keeps pcache1 as it is).
    static var isWrapped: Bool {
        WALWriteGathering.install()
        return cirrus_page_cache_configured() != 0
    }

    /// Pages parked under the locking page's number since the process started, in every cache.
    static var parkedMoves: UInt64 { UInt64(cirrus_page_cache_parked_moves()) }
}
