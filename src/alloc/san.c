/*
 * san.c: guard pages (jemalloc's opt.san_guard_large and
 * opt.san_guard_small).  Every Nth large block a thread carves from an
 * arena (not the ones its cache hands back), and every Nth slab it carves
 * for small regions (as jemalloc: the slab, not each region; a slab kept
 * empty for reuse keeps its guards), gets an inaccessible (PROT_NONE)
 * page right before and right after it, so that an overrun past the
 * block's (the slab's last region's) pages or an underrun faults at once.
 * The extent is carved two pages longer and then narrowed to the
 * usable pages (addr and size describe the block, as for any large one);
 * its free widens it back and unprotects the guards before the pages
 * return to the arena, so free extents never hold a guard.  The guards
 * are purged before they are protected: they are never resident.
 */
#include "malloc_prof/internal/internal.h"

#include <sys/mman.h>

size_t opt_san_guard_large = 0;
size_t opt_san_guard_small = 0;

/* Large carvings of this thread since its last guarded one: a count per
 * thread, as jemalloc's. */
static __thread size_t san_large_seen __attribute__((tls_model("initial-exec")));
static __thread size_t san_slab_seen __attribute__((tls_model("initial-exec")));

bool san_large_decide(arena_t *arena, size_t usize, size_t align) {
	size_t n = opt_san_guard_large;
	if (n == 0 || align > PAGE || usize > SC_LARGE_MAXCLASS - 2 * PAGE)
		return false;
	/* Pages the hooks own are not ours to protect (jemalloc guards
	 * only with its default hooks). */
	if (extent_hooks_custom(arena))
		return false;
	if (++san_large_seen < n)
		return false;
	san_large_seen = 0;
	return true;
}

bool san_slab_decide(arena_t *arena) {
	size_t n = opt_san_guard_small;
	if (n == 0 || extent_hooks_custom(arena))
		return false;
	if (++san_slab_seen < n)
		return false;
	san_slab_seen = 0;
	return true;
}

bool san_guard(extent_t *e, size_t dirty_off, size_t dirty_len) {
	char *lo = e->addr, *hi = e->addr + e->size - PAGE;
	e->addr += PAGE;
	e->size -= 2 * PAGE;
	e->guarded = true;
	/* A reused run may have its guard pages resident: drop them. */
	if (dirty_len != 0 && dirty_off == 0)
		os_purge_forced(lo, PAGE);
	if (dirty_len != 0 && dirty_off + dirty_len == e->size + 2 * PAGE)
		os_purge_forced(hi, PAGE);
	/* A refusal (the process's map count at its limit) leaves the
	 * block between two ordinary pages rather than failing it. */
	if (mprotect(lo, PAGE, PROT_NONE) != 0)
		return false;
	if (mprotect(hi, PAGE, PROT_NONE) != 0) {
		mprotect(lo, PAGE, PROT_READ | PROT_WRITE);
		return false;
	}
	return true;
}

void san_unguard(extent_t *e) {
	/* The block's first page loses its class tag: free extents keep
	 * only their bounds (extent.c). */
	pagemap_set_range(e->addr, PAGE, NULL);
	e->addr -= PAGE;
	e->size += 2 * PAGE;
	e->guarded = false;
	mprotect(e->addr, PAGE, PROT_READ | PROT_WRITE);
	mprotect(e->addr + e->size - PAGE, PAGE, PROT_READ | PROT_WRITE);
}
