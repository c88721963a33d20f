#ifndef CIRRUS_SYSTEM_SHIM_H
#define CIRRUS_SYSTEM_SHIM_H

// System calls Swift's Glibc module does not import (they are declared only with
// _GNU_SOURCE), as static inline functions Swift can call.

#include <stdint.h>
#include <sys/types.h>

#if defined(__linux__)
int sync_file_range(int fd, __off64_t offset, __off64_t count, unsigned int flags);
#endif

/// Starts writing the dirty pages of `count` bytes of `fd` at `offset` to the disk and returns
/// without waiting for them (Linux's `sync_file_range` with `SYNC_FILE_RANGE_WRITE`): a large
/// file written chunk by chunk then reaches the disk while the next chunks arrive, and the
/// `fsync` that makes it durable waits only for what is still in flight. It makes nothing
/// durable by itself (no metadata, no disk cache flush). 0 on success, -1 with errno set; a
/// no-op returning 0 where the call does not exist.
static inline int cirrus_start_writeback(int fd, int64_t offset, int64_t count) {
#if defined(__linux__)
    return sync_file_range(fd, offset, count, 2 /* SYNC_FILE_RANGE_WRITE */);
#else
    (void)fd;
    (void)offset;
    (void)count;
    return 0;
#endif
}

#endif
