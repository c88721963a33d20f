#ifndef CIRRUS_WAL_VFS_H
#define CIRRUS_WAL_VFS_H

/// Installs, once per process, a SQLite VFS that wraps the default one ("unix") and gathers
/// the writes of each write-ahead-log file: the frames a transaction appends (a 24-byte header
/// and a page each, two `pwrite`s per page) are copied into one buffer and written with one
/// call when the transaction's commit frame is complete, before the log is read, synced,
/// truncated or closed, before any write elsewhere in the file, and when the buffer is full.
/// Every other file, and every other call, goes straight to the wrapped VFS. The wrapper
/// becomes the default VFS, so connections opened afterwards use it.
///
/// Before it initializes SQLite it turns SQLite's memory statistics off, makes multi-thread
/// mode the default (connections without a mutex of their own) and wraps the page cache
/// (`cirrus_page_cache_configure`): see `install` in wal_vfs.c.
///
/// Returns SQLITE_OK, or the error of `sqlite3_initialize`/`sqlite3_vfs_register` (the wrapper
/// is then not installed and SQLite goes on with its own VFS).
int cirrus_wal_vfs_install(void);

/// 1 when the process-wide settings `cirrus_wal_vfs_install` makes were taken (SQLite was not
/// initialized before it ran), else 0. Installs the VFS first if it was not.
int cirrus_sqlite_settings_taken(void);

/// What the wrapper did with one log file since it was opened (for tests and diagnostics).
typedef struct {
    /// Writes it kept in its buffer.
    unsigned long long gatheredWrites;
    /// Buffers it wrote to the file, one call each.
    unsigned long long flushes;
} cirrus_wal_vfs_counters;

struct sqlite3;

/// The counters of one connection's log file (its main database's), into `counters`:
/// SQLITE_OK, SQLITE_NOTFOUND when the connection has no log open through this VFS, or the
/// error of `sqlite3_file_control`.
int cirrus_wal_vfs_connection_counters(struct sqlite3 *connection, cirrus_wal_vfs_counters *counters);

#endif
