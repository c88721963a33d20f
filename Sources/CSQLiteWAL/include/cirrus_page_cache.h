#ifndef CIRRUS_PAGE_CACHE_H
#define CIRRUS_PAGE_CACHE_H

/// Makes the process's SQLite page cache a wrapper of its default one (pcache1) that holds the
/// locking page's number (where B-tree rebalancing parks a page for a moment) under 0, so that
/// pcache1's largest page number stays a real page's and ending a write transaction does not
/// walk the whole cache (see page_cache.c). Everything else goes to pcache1 unchanged.
///
/// Only before SQLite initializes: returns SQLITE_OK, or SQLITE_MISUSE after (SQLite then keeps
/// its own cache as it is). Called by `cirrus_wal_vfs_install`.
int cirrus_page_cache_configure(void);

/// 1 once `cirrus_page_cache_configure` has made the wrapper the process's page cache, else 0.
int cirrus_page_cache_configured(void);

/// Pages parked under the locking page's number since the process started, in every cache (for
/// tests and diagnostics).
unsigned long long cirrus_page_cache_parked_moves(void);

#endif
