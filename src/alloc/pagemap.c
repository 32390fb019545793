/*
 * pagemap.c: the page map, from a page number to the extent_t that owns
 * the page.  A static root of leaf pointers (sparse .bss: untouched entries
 * cost nothing) and leaves mapped on first use, installed with a CAS so
 * that lookups never lock.  Each leaf covers 1 GiB of address space with
 * 4 KiB pages.
 *
 * Invariants: every page of a slab maps to the slab; the first and last
 * page of every other extent (large or free) map to it; a page inside a
 * free or large extent maps to NULL or to that extent.  Entries of slab
 * pages and of a large block's first page carry its size class in their
 * low bits (internal.h, PAGEMAP_TAG_MASK); all others carry none.
 */
#include "malloc_prof/internal/internal.h"

_Atomic(pagemap_leaf_t *) pagemap_root[PAGEMAP_ROOT_LEN];

static pagemap_leaf_t *leaf_get(uintptr_t key) {
	_Atomic(pagemap_leaf_t *) *slot = &pagemap_root[key >>
	    PAGEMAP_LEAF_BITS];
	pagemap_leaf_t *leaf = atomic_load_explicit(slot,
	    memory_order_acquire);
	if (likely(leaf != NULL))
		return leaf;
	pagemap_leaf_t *fresh = os_map(sizeof(pagemap_leaf_t), PAGE);
	if (fresh == NULL)
		return NULL;
	pagemap_leaf_t *expected = NULL;
	if (atomic_compare_exchange_strong_explicit(slot, &expected, fresh,
	    memory_order_acq_rel, memory_order_acquire))
		return fresh;
	os_unmap(fresh, sizeof(pagemap_leaf_t));
	return expected;
}

static bool set_entries(const void *addr, size_t size, uintptr_t entry) {
	uintptr_t key = (uintptr_t)addr >> LG_PAGE;
	uintptr_t end = key + (size >> LG_PAGE);
	if (end > ((uintptr_t)1 << PAGEMAP_KEY_BITS))
		return true;
	while (key < end) {
		pagemap_leaf_t *leaf = leaf_get(key);
		if (leaf == NULL)
			return true;
		do {
			atomic_store_explicit(
			    &(*leaf)[key & (PAGEMAP_LEAF_LEN - 1)],
			    (extent_t *)entry, memory_order_release);
			key++;
		} while (key < end && (key & (PAGEMAP_LEAF_LEN - 1)) != 0);
	}
	return false;
}

bool pagemap_set_range(const void *addr, size_t size, extent_t *e) {
	return set_entries(addr, size, (uintptr_t)e);
}

bool pagemap_set_class(const void *addr, size_t size, extent_t *e) {
	uintptr_t tag = (uintptr_t)e->szind + 1;
	if (tag > PAGEMAP_TAG_MASK)
		tag = 0;
	return set_entries(addr, size, (uintptr_t)e | tag);
}

bool pagemap_set_bounds(extent_t *e) {
	if (pagemap_set_range(e->addr, PAGE, e))
		return true;
	if (e->size > PAGE &&
	    pagemap_set_range(e->addr + e->size - PAGE, PAGE, e))
		return true;
	return false;
}

/* Create the leaves covering [addr, addr + size) now, so that later
 * updates inside a mapping cannot fail. */
bool pagemap_prepare(const void *addr, size_t size) {
	uintptr_t key = (uintptr_t)addr >> LG_PAGE;
	uintptr_t last = key + (size >> LG_PAGE) - 1;
	if (last >= ((uintptr_t)1 << PAGEMAP_KEY_BITS))
		return true;
	for (uintptr_t k = key >> PAGEMAP_LEAF_BITS;
	    k <= last >> PAGEMAP_LEAF_BITS; k++) {
		if (leaf_get(k << PAGEMAP_LEAF_BITS) == NULL)
			return true;
	}
	return false;
}
