// A page cache that wraps SQLite's own (pcache1) and keeps the locking page's number out of it
// (see cirrus_page_cache.h).
//
// Why: when SQLite rebalances a B-tree (`balance_nonroot`), it puts its new pages in ascending
// order by swapping page numbers, and parks one page for a moment under the number of the
// locking page (PENDING_BYTE / page size + 1: 262,145 with 4 KiB pages), a number no page of a
// database under 1 GiB has. pcache1 remembers the largest number it ever held (`iMaxKey`), and
// at the end of every write transaction it drops the pages past the database's size
// (`sqlite3PcacheTruncate`): with `iMaxKey` at 262,145 it walks every slot of its hash table
// and every page it holds to find none, with the cache cold by then, then forgets the number
// until the next rebalance. The writer's cache holds up to 16,384 pages (64 MiB), so a commit
// after any page split paid a walk over up to 16,384 slots and as many pages: measured under
// 400-record saves, 4.6 % of `cirrusd`'s CPU time in that one loop.
//
// Here the locking page's number is given to pcache1 as 0, a number SQLite never uses for a
// page (page numbers start at 1, and a truncation never drops below 1), so the largest number
// pcache1 holds stays a real page's. Every other call and number goes to pcache1 as it is.

#include "cirrus_page_cache.h"

#include <sqlite3.h>
#include <stdatomic.h>

enum {
    /// SQLite's PENDING_BYTE (the locking range's first byte), unchanged outside SQLite's own
    /// tests: the locking page is the page that holds it.
    LOCKING_BYTE = 0x40000000,
};

typedef struct KeyedCache {
    /// pcache1's cache, for the pages of one connection's database.
    sqlite3_pcache *inner;
    /// The locking page's number with this cache's page size.
    unsigned int lockingPage;
} KeyedCache;

static sqlite3_pcache_methods2 innerMethods;
static _Atomic unsigned long long parkedMoves;
static int configured;

/// The number pcache1 holds `key` under.
static inline unsigned int innerKey(const KeyedCache *cache, unsigned int key) {
    return key == cache->lockingPage ? 0 : key;
}

static int cacheInit(void *arg) {
    (void)arg;
    return innerMethods.xInit ? innerMethods.xInit(innerMethods.pArg) : SQLITE_OK;
}

static void cacheShutdown(void *arg) {
    (void)arg;
    if (innerMethods.xShutdown) innerMethods.xShutdown(innerMethods.pArg);
}

static sqlite3_pcache *cacheCreate(int szPage, int szExtra, int bPurgeable) {
    KeyedCache *cache = sqlite3_malloc(sizeof *cache);
    if (cache == NULL) return NULL;
    cache->inner = innerMethods.xCreate(szPage, szExtra, bPurgeable);
    if (cache->inner == NULL) {
        sqlite3_free(cache);
        return NULL;
    }
    // A page size is a power of two from 512 to 65,536; anything else would have no locking
    // page to keep out (0 matches no key SQLite asks for).
    cache->lockingPage = szPage > 0 ? (unsigned int)(LOCKING_BYTE / szPage) + 1 : 0;
    return (sqlite3_pcache *)cache;
}

static void cacheCachesize(sqlite3_pcache *p, int nCachesize) {
    KeyedCache *cache = (KeyedCache *)p;
    innerMethods.xCachesize(cache->inner, nCachesize);
}

static int cachePagecount(sqlite3_pcache *p) {
    KeyedCache *cache = (KeyedCache *)p;
    return innerMethods.xPagecount(cache->inner);
}

static sqlite3_pcache_page *cacheFetch(sqlite3_pcache *p, unsigned int key, int createFlag) {
    KeyedCache *cache = (KeyedCache *)p;
    return innerMethods.xFetch(cache->inner, innerKey(cache, key), createFlag);
}

static void cacheUnpin(sqlite3_pcache *p, sqlite3_pcache_page *page, int discard) {
    KeyedCache *cache = (KeyedCache *)p;
    innerMethods.xUnpin(cache->inner, page, discard);
}

static void cacheRekey(sqlite3_pcache *p, sqlite3_pcache_page *page, unsigned int oldKey, unsigned int newKey) {
    KeyedCache *cache = (KeyedCache *)p;
    if (newKey == cache->lockingPage) atomic_fetch_add_explicit(&parkedMoves, 1, memory_order_relaxed);
    innerMethods.xRekey(cache->inner, page, innerKey(cache, oldKey), innerKey(cache, newKey));
}

static void cacheTruncate(sqlite3_pcache *p, unsigned int iLimit) {
    KeyedCache *cache = (KeyedCache *)p;
    innerMethods.xTruncate(cache->inner, iLimit);
}

static void cacheDestroy(sqlite3_pcache *p) {
    KeyedCache *cache = (KeyedCache *)p;
    innerMethods.xDestroy(cache->inner);
    sqlite3_free(cache);
}

static void cacheShrink(sqlite3_pcache *p) {
    KeyedCache *cache = (KeyedCache *)p;
    innerMethods.xShrink(cache->inner);
}

int cirrus_page_cache_configure(void) {
    sqlite3_pcache_methods2 current;
    int rc = sqlite3_config(SQLITE_CONFIG_GETPCACHE2, &current);
    if (rc != SQLITE_OK) return rc;
    // Version 1 is every method this file forwards; a cache without them is left alone.
    if (current.iVersion < 1 || current.xCreate == NULL || current.xFetch == NULL || current.xRekey == NULL
        || current.xTruncate == NULL || current.xShrink == NULL) {
        return SQLITE_ERROR;
    }
    innerMethods = current;
    sqlite3_pcache_methods2 keyed = {
        .iVersion = 1,
        .pArg = NULL,
        .xInit = cacheInit,
        .xShutdown = cacheShutdown,
        .xCreate = cacheCreate,
        .xCachesize = cacheCachesize,
        .xPagecount = cachePagecount,
        .xFetch = cacheFetch,
        .xUnpin = cacheUnpin,
        .xRekey = cacheRekey,
        .xTruncate = cacheTruncate,
        .xDestroy = cacheDestroy,
        .xShrink = cacheShrink,
    };
    rc = sqlite3_config(SQLITE_CONFIG_PCACHE2, &keyed);
    configured = rc == SQLITE_OK;
    return rc;
}

int cirrus_page_cache_configured(void) {
    return configured;
}

unsigned long long cirrus_page_cache_parked_moves(void) {
    return atomic_load_explicit(&parkedMoves, memory_order_relaxed);
}
