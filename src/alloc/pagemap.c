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
 *
 * The tags are also kept in a flat table of one byte per page over the
 * user half of the address space (pagemap_tags: 32 GiB of address space
 * with 4 KiB pages, reserved without memory; each 4 KiB of it that is
 * written covers 16 MiB of heap), which free's fast path reads with one
 * shift, one bound compare and one load instead of the two dependent
 * loads and the range and NULL tests of the tree.  Every entry written
 * after the table exists is mirrored there, by set_entries, under the
 * same locks; an entry written before (none in practice: the table is
 * made at start-up, pagemap_boot) reads as tag 0 there, which only sends
 * its free to the slow path, where the tree is read.  When the
 * reservation is not made (strict overcommit, an address-space limit:
 * os_map_sparse) the table stays absent, pagemap_tags_pages 0, and every
 * free takes the slow path.
 */
#include "malloc_prof/internal/internal.h"

_Atomic(pagemap_leaf_t *) pagemap_root[PAGEMAP_ROOT_LEN];
_Atomic(uint8_t *) pagemap_tags;
uintptr_t pagemap_tags_pages;

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

/*
 * The tag table, reserved once at start-up (malloc_init_hard, under the
 * init lock, before malloc_initialized is published): every thread's
 * first call waits for that, so frees, which read the bound as a plain
 * variable, are ordered after its only write.  Made at the first update
 * instead, a thread freeing a block it got before the table existed read
 * the bound while another thread wrote it (ThreadSanitizer: test/stress/
 * first_op).  Refused, it stays absent (NULL, bound 0) for good.
 */
void pagemap_boot(void) {
	if (atomic_load_explicit(&pagemap_tags, memory_order_relaxed) != NULL)
		return;
	uint8_t *fresh = os_map_sparse(PAGEMAP_TAGS_PAGES);
	if (fresh == NULL)
		return;
	atomic_store_explicit(&pagemap_tags, fresh, memory_order_release);
	pagemap_tags_pages = PAGEMAP_TAGS_PAGES;
}

/* Mirror tag into the table for pages [key, end).  A 0 over a 0 is not
 * written: the table's pages that only ever saw clears (of extents never
 * tagged) stay unwritten, and read from the zero page. */
static void tags_set(uintptr_t key, uintptr_t end, uint8_t tag) {
	_Atomic uint8_t *t = (_Atomic uint8_t *)atomic_load_explicit(
	    &pagemap_tags, memory_order_acquire);
	if (unlikely(t == NULL))
		return;
	if (end > PAGEMAP_TAGS_PAGES)
		end = PAGEMAP_TAGS_PAGES;
	if (tag != 0) {
		for (uintptr_t k = key; k < end; k++)
			atomic_store_explicit(&t[k], tag, memory_order_relaxed);
		return;
	}
	for (uintptr_t k = key; k < end; k++) {
		if (atomic_load_explicit(&t[k], memory_order_relaxed) != 0)
			atomic_store_explicit(&t[k], 0, memory_order_relaxed);
	}
}

static bool set_entries(const void *addr, size_t size, uintptr_t entry) {
	uintptr_t key = (uintptr_t)addr >> LG_PAGE;
	uintptr_t end = key + (size >> LG_PAGE);
	if (end > ((uintptr_t)1 << PAGEMAP_KEY_BITS))
		return true;
	tags_set(key, end, (uint8_t)(entry & PAGEMAP_TAG_MASK));
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
	pagemap_set_page(e->addr, e);
	if (e->size > PAGE)
		pagemap_set_page(e->addr + e->size - PAGE, e);
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
