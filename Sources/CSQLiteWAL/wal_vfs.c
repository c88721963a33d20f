// A SQLite VFS that wraps the default one and gathers the writes of write-ahead logs
// (see cirrus_wal_vfs.h).
//
// Why: SQLite appends a transaction's log frames with two `pwrite`s each (the 24-byte frame
// header, then the page), so a one-record save that touches 20 pages made 40 system calls
// before its `fdatasync`, and every one of them paid the kernel's per-call cost (entry, file
// lookup, inode lock, timestamps) on the writer thread, on the save's path.
//
// When the buffer is written (one `xWrite` of the wrapped file, one `pwrite`):
// - once the page that follows a commit frame's header is in it: the transaction's frames
//   are all there. This is in `walFrames`, before the commit is published in the shared
//   wal-index, whatever `synchronous` is, so no other connection can look for a frame that
//   is still here, and a failed write fails the commit as an unbuffered one would;
// - before a write anywhere but at its end, or one that would pass `GATHER_LIMIT` (128 KiB);
// - before any other call on the log (read, sync, size, truncate, file control, lock,
//   close): nothing ever reads the file around the buffer.
// Frames of a transaction that spills before its commit (bigger than the page cache) stay
// here until one of those; only their own connection may read them, and its read writes the
// buffer first.

#include "cirrus_wal_vfs.h"
#include "cirrus_page_cache.h"

#include <pthread.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum {
    /// The most bytes a log's buffer holds; a transaction writing more is written in parts.
    /// The "unix" VFS writes at most this much per call (`seekAndWriteFd` masks the length
    /// with 0x1ffff, as SQLite itself never writes more than a page at once): 31 frames of
    /// 4 KiB pages.
    GATHER_LIMIT = 0x1ffff,
    /// The buffer's first capacity.
    GATHER_INITIAL = 64 << 10,
    /// A log frame's header; SQLite writes it alone, then the frame's page.
    FRAME_HEADER_BYTES = 24,
};

typedef struct GatherFile {
    sqlite3_file base;
    /// The wrapped VFS's file, in the same allocation, after this struct.
    sqlite3_file *real;
    /// Opened as a write-ahead log: only those are gathered.
    int isLog;
    /// The last write was the header of a commit frame: the next one (its page) ends the
    /// transaction's frames.
    int commitPageNext;
    unsigned char *buffer;
    size_t length;
    size_t capacity;
    /// The file offset of `buffer[0]`.
    sqlite3_int64 start;
    /// What cirrus_wal_vfs_connection_counters reports.
    unsigned long long gatheredWrites;
    unsigned long long flushes;
} GatherFile;

static sqlite3_vfs *wrapped;
static sqlite3_vfs gatherVFS;
static sqlite3_io_methods methodsByVersion[3];
static int realOffset;

static inline sqlite3_file *real(sqlite3_file *file) { return ((GatherFile *)file)->real; }

/// Writes the buffer to the file with one call and empties it. A failed write is reported
/// to SQLite and its bytes are dropped: SQLite fails the transaction whose frames they were.
static int flushBuffer(GatherFile *file) {
    if (file->length == 0) return SQLITE_OK;
    int rc = file->real->pMethods->xWrite(file->real, file->buffer, (int)file->length, file->start);
    file->length = 0;
    file->commitPageNext = 0;
    file->flushes += 1;
    return rc;
}

/// Room for `needed` bytes (at most GATHER_LIMIT); 0 when memory ran out.
static int reserve(GatherFile *file, size_t needed) {
    if (needed <= file->capacity) return 1;
    size_t capacity = file->capacity == 0 ? GATHER_INITIAL : file->capacity;
    while (capacity < needed) capacity *= 2;
    if (capacity > GATHER_LIMIT) capacity = GATHER_LIMIT;
    unsigned char *grown = realloc(file->buffer, capacity);
    if (grown == NULL) return 0;
    file->buffer = grown;
    file->capacity = capacity;
    return 1;
}

static int gatherWrite(sqlite3_file *f, const void *data, int amount, sqlite3_int64 offset) {
    GatherFile *file = (GatherFile *)f;
    if (!file->isLog || amount <= 0) return file->real->pMethods->xWrite(file->real, data, amount, offset);
    size_t count = (size_t)amount;
    int endsCommit = file->commitPageNext && amount != FRAME_HEADER_BYTES;
    if (file->length > 0
        && (offset != file->start + (sqlite3_int64)file->length || file->length + count > GATHER_LIMIT)) {
        int rc = flushBuffer(file);
        if (rc != SQLITE_OK) return rc;
    }
    if (count > GATHER_LIMIT || !reserve(file, file->length + count)) {
        int rc = flushBuffer(file);
        if (rc != SQLITE_OK) return rc;
        return file->real->pMethods->xWrite(file->real, data, amount, offset);
    }
    if (file->length == 0) file->start = offset;
    memcpy(file->buffer + file->length, data, count);
    file->length += count;
    file->gatheredWrites += 1;
    if (amount == FRAME_HEADER_BYTES) {
        // Bytes 4–7 of a frame header: the database's size in pages after a commit, 0 in
        // the frames before it.
        const unsigned char *header = data;
        uint32_t pagesAfterCommit = ((uint32_t)header[4] << 24) | ((uint32_t)header[5] << 16)
            | ((uint32_t)header[6] << 8) | (uint32_t)header[7];
        file->commitPageNext = pagesAfterCommit != 0;
        return SQLITE_OK;
    }
    file->commitPageNext = 0;
    return endsCommit ? flushBuffer(file) : SQLITE_OK;
}

/// The buffer goes to the file before any call other than a write reaches it.
#define FLUSH_FIRST(f)                                                                                                 \
    do {                                                                                                               \
        GatherFile *gathered = (GatherFile *)(f);                                                                      \
        if (gathered->length > 0) {                                                                                    \
            int flushed = flushBuffer(gathered);                                                                       \
            if (flushed != SQLITE_OK) return flushed;                                                                  \
        }                                                                                                              \
    } while (0)

static int gatherClose(sqlite3_file *f) {
    GatherFile *file = (GatherFile *)f;
    int flushed = flushBuffer(file);
    int closed = file->real->pMethods->xClose(file->real);
    free(file->buffer);
    file->buffer = NULL;
    file->capacity = 0;
    return flushed != SQLITE_OK ? flushed : closed;
}

static int gatherRead(sqlite3_file *f, void *data, int amount, sqlite3_int64 offset) {
    FLUSH_FIRST(f);
    return real(f)->pMethods->xRead(real(f), data, amount, offset);
}

static int gatherTruncate(sqlite3_file *f, sqlite3_int64 size) {
    FLUSH_FIRST(f);
    return real(f)->pMethods->xTruncate(real(f), size);
}

static int gatherSync(sqlite3_file *f, int flags) {
    FLUSH_FIRST(f);
    return real(f)->pMethods->xSync(real(f), flags);
}

static int gatherFileSize(sqlite3_file *f, sqlite3_int64 *size) {
    FLUSH_FIRST(f);
    return real(f)->pMethods->xFileSize(real(f), size);
}

static int gatherLock(sqlite3_file *f, int level) {
    FLUSH_FIRST(f);
    return real(f)->pMethods->xLock(real(f), level);
}

static int gatherUnlock(sqlite3_file *f, int level) {
    FLUSH_FIRST(f);
    return real(f)->pMethods->xUnlock(real(f), level);
}

static int gatherCheckReservedLock(sqlite3_file *f, int *result) {
    FLUSH_FIRST(f);
    return real(f)->pMethods->xCheckReservedLock(real(f), result);
}

static int gatherFileControl(sqlite3_file *f, int op, void *argument) {
    FLUSH_FIRST(f);
    return real(f)->pMethods->xFileControl(real(f), op, argument);
}

static int gatherSectorSize(sqlite3_file *f) { return real(f)->pMethods->xSectorSize(real(f)); }

static int gatherDeviceCharacteristics(sqlite3_file *f) {
    return real(f)->pMethods->xDeviceCharacteristics(real(f));
}

static int gatherShmMap(sqlite3_file *f, int region, int size, int extend, void volatile **pages) {
    return real(f)->pMethods->xShmMap(real(f), region, size, extend, pages);
}

static int gatherShmLock(sqlite3_file *f, int offset, int count, int flags) {
    return real(f)->pMethods->xShmLock(real(f), offset, count, flags);
}

static void gatherShmBarrier(sqlite3_file *f) { real(f)->pMethods->xShmBarrier(real(f)); }

static int gatherShmUnmap(sqlite3_file *f, int deleteFlag) {
    return real(f)->pMethods->xShmUnmap(real(f), deleteFlag);
}

static int gatherFetch(sqlite3_file *f, sqlite3_int64 offset, int amount, void **pointer) {
    return real(f)->pMethods->xFetch(real(f), offset, amount, pointer);
}

static int gatherUnfetch(sqlite3_file *f, sqlite3_int64 offset, void *pointer) {
    return real(f)->pMethods->xUnfetch(real(f), offset, pointer);
}

static int gatherOpen(sqlite3_vfs *vfs, sqlite3_filename name, sqlite3_file *f, int flags, int *outFlags) {
    (void)vfs;
    GatherFile *file = (GatherFile *)f;
    memset(file, 0, sizeof *file);
    file->real = (sqlite3_file *)((char *)file + realOffset);
    int rc = wrapped->xOpen(wrapped, name, file->real, flags, outFlags);
    // SQLite closes a file whose methods are set even when its open failed: mirror the
    // wrapped file's, so its close is forwarded exactly when SQLite would have called it.
    const sqlite3_io_methods *methods = file->real->pMethods;
    if (methods == NULL) {
        file->base.pMethods = NULL;
        return rc;
    }
    file->isLog = (flags & SQLITE_OPEN_WAL) != 0;
    int version = methods->iVersion < 1 ? 1 : (methods->iVersion > 3 ? 3 : methods->iVersion);
    // A wrapped file without shared memory (version 1) must not appear to have it: SQLite
    // decides from the methods whether the log can be used.
    if (version >= 2 && methods->xShmMap == NULL) version = 1;
    if (version == 3 && methods->xFetch == NULL) version = 2;
    file->base.pMethods = &methodsByVersion[version - 1];
    return rc;
}

// The VFS's other calls go to the wrapped VFS, as it, so that what it keeps in its own struct
// (its locking style, its path length) is what it reads.
static int gatherDelete(sqlite3_vfs *vfs, const char *name, int syncDirectory) {
    (void)vfs;
    return wrapped->xDelete(wrapped, name, syncDirectory);
}

static int gatherAccess(sqlite3_vfs *vfs, const char *name, int flags, int *result) {
    (void)vfs;
    return wrapped->xAccess(wrapped, name, flags, result);
}

static int gatherFullPathname(sqlite3_vfs *vfs, const char *name, int size, char *out) {
    (void)vfs;
    return wrapped->xFullPathname(wrapped, name, size, out);
}

static void *gatherDlOpen(sqlite3_vfs *vfs, const char *name) {
    (void)vfs;
    return wrapped->xDlOpen(wrapped, name);
}

static void gatherDlError(sqlite3_vfs *vfs, int size, char *message) {
    (void)vfs;
    wrapped->xDlError(wrapped, size, message);
}

static void (*gatherDlSym(sqlite3_vfs *vfs, void *library, const char *symbol))(void) {
    (void)vfs;
    return wrapped->xDlSym(wrapped, library, symbol);
}

static void gatherDlClose(sqlite3_vfs *vfs, void *library) {
    (void)vfs;
    wrapped->xDlClose(wrapped, library);
}

static int gatherRandomness(sqlite3_vfs *vfs, int size, char *out) {
    (void)vfs;
    return wrapped->xRandomness(wrapped, size, out);
}

static int gatherSleep(sqlite3_vfs *vfs, int microseconds) {
    (void)vfs;
    return wrapped->xSleep(wrapped, microseconds);
}

static int gatherCurrentTime(sqlite3_vfs *vfs, double *now) {
    (void)vfs;
    return wrapped->xCurrentTime(wrapped, now);
}

static int gatherGetLastError(sqlite3_vfs *vfs, int size, char *message) {
    (void)vfs;
    return wrapped->xGetLastError(wrapped, size, message);
}

static int gatherCurrentTimeInt64(sqlite3_vfs *vfs, sqlite3_int64 *now) {
    (void)vfs;
    return wrapped->xCurrentTimeInt64(wrapped, now);
}

static int gatherSetSystemCall(sqlite3_vfs *vfs, const char *name, sqlite3_syscall_ptr call) {
    (void)vfs;
    return wrapped->xSetSystemCall(wrapped, name, call);
}

static sqlite3_syscall_ptr gatherGetSystemCall(sqlite3_vfs *vfs, const char *name) {
    (void)vfs;
    return wrapped->xGetSystemCall(wrapped, name);
}

static const char *gatherNextSystemCall(sqlite3_vfs *vfs, const char *name) {
    (void)vfs;
    return wrapped->xNextSystemCall(wrapped, name);
}

static pthread_once_t installOnce = PTHREAD_ONCE_INIT;
static int installResult = SQLITE_ERROR;
static int settingsTaken = 0;

static void install(void) {
    // Process-wide settings, taken only before SQLite initializes (SQLITE_MISUSE after, which
    // leaves SQLite as it was):
    // - no memory statistics: with them on, every allocation and free SQLite makes takes a
    //   global mutex to count it, and nothing here reads the counts;
    // - multi-thread mode: connections open without a mutex of their own (SQLITE_OPEN_NOMUTEX),
    //   so every bind, step and column read does not lock and unlock one. Safe because every
    //   connection is GRDB's, and GRDB uses each from one thread at a time (its serialized
    //   queues); a connection opened with SQLITE_OPEN_FULLMUTEX still gets its mutex.
    settingsTaken = sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0) == SQLITE_OK
        && sqlite3_config(SQLITE_CONFIG_MULTITHREAD) == SQLITE_OK;
    // - the page cache that keeps the locking page's number out of pcache1 (page_cache.c).
    (void)cirrus_page_cache_configure();
    int rc = sqlite3_initialize();
    if (rc != SQLITE_OK) {
        installResult = rc;
        return;
    }
    wrapped = sqlite3_vfs_find(NULL);
    // Version 3 is what this file forwards (the "unix" VFS's); an older one is left alone.
    if (wrapped == NULL || wrapped->iVersion < 3) {
        installResult = SQLITE_ERROR;
        return;
    }
    realOffset = (int)((sizeof(GatherFile) + 15) & ~(size_t)15);

    sqlite3_io_methods methods = {
        .iVersion = 3,
        .xClose = gatherClose,
        .xRead = gatherRead,
        .xWrite = gatherWrite,
        .xTruncate = gatherTruncate,
        .xSync = gatherSync,
        .xFileSize = gatherFileSize,
        .xLock = gatherLock,
        .xUnlock = gatherUnlock,
        .xCheckReservedLock = gatherCheckReservedLock,
        .xFileControl = gatherFileControl,
        .xSectorSize = gatherSectorSize,
        .xDeviceCharacteristics = gatherDeviceCharacteristics,
        .xShmMap = gatherShmMap,
        .xShmLock = gatherShmLock,
        .xShmBarrier = gatherShmBarrier,
        .xShmUnmap = gatherShmUnmap,
        .xFetch = gatherFetch,
        .xUnfetch = gatherUnfetch,
    };
    methodsByVersion[2] = methods;
    methods.iVersion = 2;
    methods.xFetch = NULL;
    methods.xUnfetch = NULL;
    methodsByVersion[1] = methods;
    methods.iVersion = 1;
    methods.xShmMap = NULL;
    methods.xShmLock = NULL;
    methods.xShmBarrier = NULL;
    methods.xShmUnmap = NULL;
    methodsByVersion[0] = methods;

    gatherVFS = (sqlite3_vfs){
        .iVersion = 3,
        .szOsFile = realOffset + wrapped->szOsFile,
        .mxPathname = wrapped->mxPathname,
        .zName = "cirrus-wal-gather",
        .xOpen = gatherOpen,
        .xDelete = gatherDelete,
        .xAccess = gatherAccess,
        .xFullPathname = gatherFullPathname,
        .xDlOpen = gatherDlOpen,
        .xDlError = gatherDlError,
        .xDlSym = gatherDlSym,
        .xDlClose = gatherDlClose,
        .xRandomness = gatherRandomness,
        .xSleep = gatherSleep,
        .xCurrentTime = gatherCurrentTime,
        .xGetLastError = gatherGetLastError,
        .xCurrentTimeInt64 = gatherCurrentTimeInt64,
        .xSetSystemCall = gatherSetSystemCall,
        .xGetSystemCall = gatherGetSystemCall,
        .xNextSystemCall = gatherNextSystemCall,
    };
    installResult = sqlite3_vfs_register(&gatherVFS, 1);
}

int cirrus_wal_vfs_install(void) {
    pthread_once(&installOnce, install);
    return installResult;
}

int cirrus_sqlite_settings_taken(void) {
    pthread_once(&installOnce, install);
    return settingsTaken;
}

int cirrus_wal_vfs_connection_counters(struct sqlite3 *connection, cirrus_wal_vfs_counters *counters) {
    sqlite3_file *file = NULL;
    int rc = sqlite3_file_control(connection, "main", SQLITE_FCNTL_JOURNAL_POINTER, &file);
    if (rc != SQLITE_OK) return rc;
    if (file == NULL || file->pMethods < &methodsByVersion[0] || file->pMethods > &methodsByVersion[2]) {
        return SQLITE_NOTFOUND;
    }
    GatherFile *gathered = (GatherFile *)file;
    if (!gathered->isLog) return SQLITE_NOTFOUND;
    counters->gatheredWrites = gathered->gatheredWrites;
    counters->flushes = gathered->flushes;
    return SQLITE_OK;
}
