#!/usr/bin/env bash
# The machine's raw durable-write limits, the "raw limit here" column of #12 (storage engine v2),
# to print beside `cirrus bench` figures: the system's SQLite (WAL, synchronous = FULL) inserting
# 400 rows of a 250-byte blob per transaction for 5 s, then a 4 KiB pwrite + fdatasync loop for
# 3 s, in a temporary directory (or DIR: put it on the file system cirrusd's data is on); then
# three CPU-side costs the server leans on (an atomic add, a system call, a thread wake-up and
# back), and the latency of a dependent load over 1, 8 and 64 MiB (cache and memory).
# Needs a C compiler and SQLite's headers (libsqlite3-dev). Usage: Scripts/raw-limits.sh [DIR]
set -euo pipefail
parent="${1:-${TMPDIR:-/tmp}}"
work="$(mktemp -d "$parent/cirrus-raw-limits.XXXXXX")"
trap 'rm -rf "$work"' EXIT
cat > "$work/raw.c" <<'C'
#include <fcntl.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static int check(int rc, sqlite3 *db, const char *what) {
    if (rc != SQLITE_OK && rc != SQLITE_DONE) {
        fprintf(stderr, "%s: %s\n", what, sqlite3_errmsg(db));
        return 1;
    }
    return 0;
}

static int ping[2], pong[2];

static void *echo(void *unused) {
    (void)unused;
    char byte;
    while (read(ping[0], &byte, 1) == 1) {
        if (write(pong[1], &byte, 1) != 1) break;
    }
    return 0;
}

int main(int argc, char **argv) {
    char path[4096];
    snprintf(path, sizeof path, "%s/raw.db", argv[1]);
    sqlite3 *db;
    if (check(sqlite3_open(path, &db), db, "open")) return 1;
    if (check(sqlite3_exec(db, "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL;"
                               "CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT UNIQUE, data BLOB);",
                           0, 0, 0), db, "schema")) return 1;
    sqlite3_stmt *insert;
    if (check(sqlite3_prepare_v2(db, "INSERT INTO t (name, data) VALUES (?, ?)", -1, &insert, 0), db, "prepare")) return 1;
    char blob[250], name[32];
    memset(blob, 7, sizeof blob);
    long rows = 0;
    double start = now();
    while (now() - start < 5) {
        if (check(sqlite3_exec(db, "BEGIN", 0, 0, 0), db, "begin")) return 1;
        for (int i = 0; i < 400; i++) {
            snprintf(name, sizeof name, "record-%09ld", rows++);
            sqlite3_bind_text(insert, 1, name, -1, SQLITE_TRANSIENT);
            sqlite3_bind_blob(insert, 2, blob, sizeof blob, SQLITE_STATIC);
            if (check(sqlite3_step(insert), db, "insert")) return 1;
            sqlite3_reset(insert);
        }
        if (check(sqlite3_exec(db, "COMMIT", 0, 0, 0), db, "commit")) return 1;
    }
    printf("SQLite %s, WAL, synchronous = FULL, 400 rows per transaction: %.0f rows/s\n", sqlite3_libversion(),
           rows / (now() - start));
    sqlite3_finalize(insert);
    sqlite3_close(db);

    snprintf(path, sizeof path, "%s/sync.bin", argv[1]);
    int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
    if (fd < 0) { perror("open"); return 1; }
    char page[4096];
    memset(page, 1, sizeof page);
    long syncs = 0;
    start = now();
    while (now() - start < 3) {
        if (pwrite(fd, page, sizeof page, 0) != sizeof page || fdatasync(fd) != 0) { perror("write"); return 1; }
        syncs++;
    }
    printf("4 KiB pwrite + fdatasync: %.0f /s\n", syncs / (now() - start));
    close(fd);

    // What the server's own path leans on besides SQLite, to tell the machine's states apart
    // (the same build's CPU per save has moved 2.8-fold between days while the two figures above
    // stayed within 20 %): an uncontended atomic add (every retain and release), a system call,
    // and a wake-up of another thread and back (every hand-off between event loop, task pool and
    // writer).
    static volatile long counter;
    long adds = 100000000;
    start = now();
    for (long i = 0; i < adds; i++) __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED);
    printf("atomic add: %.1f ns\n", (now() - start) / adds * 1e9);
    long calls = 1000000;
    start = now();
    for (long i = 0; i < calls; i++) syscall(SYS_getppid);
    printf("system call (getppid): %.0f ns\n", (now() - start) / calls * 1e9);
    if (pipe(ping) != 0 || pipe(pong) != 0) { perror("pipe"); return 1; }
    pthread_t thread;
    if (pthread_create(&thread, 0, echo, 0) != 0) { perror("pthread_create"); return 1; }
    long trips = 50000;
    char byte = 1;
    start = now();
    for (long i = 0; i < trips; i++) {
        if (write(ping[1], &byte, 1) != 1 || read(pong[0], &byte, 1) != 1) { perror("pipe"); return 1; }
    }
    printf("thread wake-up and back (pipe ping-pong): %.1f us\n", (now() - start) / trips * 1e6);
    close(ping[1]);
    pthread_join(thread, 0);

    // A dependent load at random over 1, 8 and 64 MiB (a pointer chase: each load's address is
    // the last one's value): the cache and memory latency the server's working set meets. The
    // three costs above fit in a core's first-level cache and stayed put between the machine's
    // states; these are the ones to read beside them.
    size_t sizes[] = {1 << 20, 8 << 20, 64 << 20};
    for (int s = 0; s < 3; s++) {
        size_t n = sizes[s] / sizeof(size_t);
        size_t *next = malloc(n * sizeof(size_t)), *order = malloc(n * sizeof(size_t));
        if (!next || !order) { perror("malloc"); return 1; }
        for (size_t i = 0; i < n; i++) order[i] = i;
        unsigned long long seed = 42;
        for (size_t i = n - 1; i > 0; i--) {
            seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
            size_t j = (size_t)(seed >> 33) % (i + 1), t = order[i];
            order[i] = order[j];
            order[j] = t;
        }
        for (size_t i = 0; i < n; i++) next[order[i]] = order[(i + 1) % n];
        size_t at = 0;
        long loads = 20000000;
        start = now();
        for (long i = 0; i < loads; i++) at = next[at];
        printf("dependent load at random over %zu MiB: %.1f ns%s\n", sizes[s] >> 20, (now() - start) / loads * 1e9,
               at == (size_t)-1 ? " " : "");
        free(next);
        free(order);
    }
    return 0;
}
C
cc -O2 -o "$work/raw" "$work/raw.c" -lsqlite3 -lpthread
"$work/raw" "$work"
