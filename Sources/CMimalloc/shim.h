// mimalloc (Debian `libmimalloc-dev`), the allocator of `cirrusd` and `cirrus`. Linking the
// library is what counts: its malloc, free and the rest come before glibc's in the process's
// symbol lookup, so every library in the process (the Swift runtime, Foundation, SQLite,
// OpenSSL, protobuf-c) allocates through it. Measured in Docs/MEASUREMENTS.md, "The allocator".
#include <mimalloc.h>
#include <stdio.h>

// "mimalloc 2.0.9": what the process allocates with, for its startup log and bench results.
// Calling it also keeps the library linked where the linker drops unused ones (--as-needed).
static inline const char *cirrus_allocator_description(void) {
    static _Thread_local char description[32];  // one per thread: callers never share it
    int version = mi_version();
    snprintf(description, sizeof description, "mimalloc %d.%d.%d", version / 100, (version / 10) % 10, version % 10);
    return description;
}
