/*
 * test/integration/extent_hooks.c - jemalloc's extent hooks and the
 * manual arena lifecycle (issue 18, items 1 and 2): the default hooks are
 * readable and callable; hooks that wrap them and count see every page
 * their arena maps and gives back (every byte their alloc returned comes
 * back through dalloc or destroy by the arena's end, and every block the
 * arena hands out lies in one of their mappings); NULL members mean
 * "cannot"; arena.<i>.reset and destroy return the memory (counted) and
 * destroy's index is reused; arena.<i>.dss and retain_grow_limit.  The
 * behaviour of jemalloc's test/integration/extent.c and arena_reset.c,
 * written anew.
 */
#include "../test_util.h"

#include <sys/mman.h>

/* ---- counting hooks that wrap the defaults ----
 * They must not allocate (doc/design.md, "Extent hooks"): fixed tables. */

#define MAPS_MAX 256

static extent_hooks_t *def;          /* the default hooks */
static extent_hooks_t counting;      /* wrappers, or NULL members */
static unsigned hooks_arena;         /* the arena they belong to */
static struct {
	char *addr;
	size_t size;
} maps[MAPS_MAX];
static unsigned nmaps;
static size_t bytes_alloc, bytes_back, max_alloc;
static unsigned n_alloc, n_dalloc, n_destroy, n_commit, n_decommit,
    n_purge_lazy, n_purge_forced, n_split, n_merge, n_wrong_arena,
    n_outside;
static bool try_dalloc;              /* dalloc gives the pages back */
static bool try_decommit;            /* decommit does */
static bool alloc_uncommitted;       /* alloc says *commit = false */

static void counts_reset(void) {
	nmaps = 0;
	bytes_alloc = bytes_back = max_alloc = 0;
	n_alloc = n_dalloc = n_destroy = n_commit = n_decommit = 0;
	n_purge_lazy = n_purge_forced = n_split = n_merge = 0;
	n_wrong_arena = n_outside = 0;
	try_dalloc = try_decommit = alloc_uncommitted = false;
}

/* Whether [addr, addr + size) lies inside one mapping alloc returned. */
static bool in_maps(const void *addr, size_t size) {
	const char *a = addr;
	for (unsigned i = 0; i < nmaps; i++) {
		if (a >= maps[i].addr && a + size <= maps[i].addr +
		    maps[i].size)
			return true;
	}
	return false;
}

static void note(void *addr, size_t size, unsigned ind) {
	if (ind != hooks_arena)
		n_wrong_arena++;
	if (!in_maps(addr, size))
		n_outside++;
}

static void *c_alloc(extent_hooks_t *h, void *new_addr, size_t size,
    size_t align, bool *zero, bool *commit, unsigned ind) {
	(void)h;
	n_alloc++;
	if (ind != hooks_arena)
		n_wrong_arena++;
	void *p = def->alloc(def, new_addr, size, align, zero, commit, ind);
	if (p != NULL) {
		if (nmaps < MAPS_MAX) {
			maps[nmaps].addr = p;
			maps[nmaps].size = size;
			nmaps++;
		}
		bytes_alloc += size;
		if (size > max_alloc)
			max_alloc = size;
		if (alloc_uncommitted) {
			def->decommit(def, p, size, 0, size, ind);
			*commit = false;
			*zero = false;
		}
	}
	return p;
}

static bool c_dalloc(extent_hooks_t *h, void *addr, size_t size,
    bool committed, unsigned ind) {
	(void)h; (void)committed;
	n_dalloc++;
	note(addr, size, ind);
	if (!try_dalloc)
		return true;
	/* The default dalloc keeps pages with retain on: unmap them. */
	def->destroy(def, addr, size, committed, ind);
	bytes_back += size;
	return false;
}

static void c_destroy(extent_hooks_t *h, void *addr, size_t size,
    bool committed, unsigned ind) {
	(void)h;
	n_destroy++;
	note(addr, size, ind);
	def->destroy(def, addr, size, committed, ind);
	bytes_back += size;
}

static bool c_commit(extent_hooks_t *h, void *addr, size_t size, size_t off,
    size_t len, unsigned ind) {
	(void)h;
	n_commit++;
	note(addr, size, ind);
	return def->commit(def, addr, size, off, len, ind);
}

static bool c_decommit(extent_hooks_t *h, void *addr, size_t size,
    size_t off, size_t len, unsigned ind) {
	(void)h;
	n_decommit++;
	note(addr, size, ind);
	if (!try_decommit)
		return true;
	return def->decommit(def, addr, size, off, len, ind);
}

static bool c_purge_lazy(extent_hooks_t *h, void *addr, size_t size,
    size_t off, size_t len, unsigned ind) {
	(void)h;
	n_purge_lazy++;
	note(addr, size, ind);
	return def->purge_lazy(def, addr, size, off, len, ind);
}

static bool c_purge_forced(extent_hooks_t *h, void *addr, size_t size,
    size_t off, size_t len, unsigned ind) {
	(void)h;
	n_purge_forced++;
	note(addr, size, ind);
	return def->purge_forced(def, addr, size, off, len, ind);
}

static bool c_split(extent_hooks_t *h, void *addr, size_t size,
    size_t size_a, size_t size_b, bool committed, unsigned ind) {
	(void)h;
	n_split++;
	note(addr, size, ind);
	if (size_a + size_b != size)
		n_outside++;
	return def->split(def, addr, size, size_a, size_b, committed, ind);
}

static bool c_merge(extent_hooks_t *h, void *addr_a, size_t size_a,
    void *addr_b, size_t size_b, bool committed, unsigned ind) {
	(void)h;
	n_merge++;
	note(addr_a, size_a, ind);
	note(addr_b, size_b, ind);
	if ((char *)addr_a + size_a != (char *)addr_b)
		n_outside++;
	return def->merge(def, addr_a, size_a, addr_b, size_b, committed,
	    ind);
}

static void counting_all(void) {
	counting = (extent_hooks_t){
		c_alloc, c_dalloc, c_destroy, c_commit, c_decommit,
		c_purge_lazy, c_purge_forced, c_split, c_merge,
	};
}

static void read_default_hooks(void) {
	size_t sz = sizeof(def);
	assert_int_equal(mallctl("arena.0.extent_hooks", &def, &sz, NULL, 0),
	    0);
	assert_non_null(def);
}

/* A manual arena with `hooks` (NULL: the defaults). */
static unsigned arena_new(extent_hooks_t *hooks) {
	unsigned ind;
	size_t sz = sizeof(ind);
	extent_hooks_t *h = hooks;
	assert_int_equal(mallctl("arenas.create", &ind, &sz,
	    hooks != NULL ? &h : NULL, hooks != NULL ? sizeof(h) : 0), 0);
	return ind;
}

static int arena_ctl(unsigned ind, const char *leaf, void *oldp,
    size_t *oldlenp, void *newp, size_t newlen) {
	char name[64];
	snprintf(name, sizeof(name), "arena.%u.%s", ind, leaf);
	return mallctl(name, oldp, oldlenp, newp, newlen);
}

static size_t arena_pactive(unsigned ind) {
	uint64_t epoch = 1;
	assert_int_equal(mallctl("epoch", NULL, NULL, &epoch, sizeof(epoch)),
	    0);
	char name[64];
	size_t v = 0, sz = sizeof(v);
	snprintf(name, sizeof(name), "stats.arenas.%u.pactive", ind);
	assert_int_equal(mallctl(name, &v, &sz, NULL, 0), 0);
	return v;
}

static bool mapped(void *addr) {
	unsigned char vec;
	return mincore(addr, (size_t)sysconf(_SC_PAGESIZE), &vec) == 0;
}

/* ---- the default hooks ---- */

static void test_default_hooks_callable(void **state) {
	(void)state;
	read_default_hooks();
	assert_non_null(def->alloc);
	assert_non_null(def->dalloc);
	assert_non_null(def->destroy);
	assert_non_null(def->commit);
	assert_non_null(def->decommit);
	assert_non_null(def->purge_lazy);
	assert_non_null(def->purge_forced);
	assert_non_null(def->split);
	assert_non_null(def->merge);
	size_t size = 4 * MP_MiB, align = 2 * MP_MiB;
	bool zero = false, commit = false;
	char *p = def->alloc(def, NULL, size, align, &zero, &commit, 0);
	assert_non_null(p);
	assert_int_equal((uintptr_t)p % align, 0);
	assert_true(zero);
	assert_true(commit);
	assert_int_equal(p[0], 0);
	memset(p, 0xa5, size);
	assert_false(def->purge_forced(def, p, size, 0, size, 0));
	assert_int_equal(p[size - 1], 0);
	assert_false(def->split(def, p, size, size / 2, size / 2, true, 0));
	assert_false(def->merge(def, p, size / 2, p + size / 2, size / 2,
	    true, 0));
	assert_false(def->decommit(def, p, size, 0, size / 2, 0));
	assert_false(def->commit(def, p, size, 0, size / 2, 0));
	p[0] = 1;
	assert_int_equal(p[0], 1);
	def->destroy(def, p, size, true, 0);
	assert_false(mapped(p));
	/* A size that is not a page multiple cannot be mapped. */
	assert_null(def->alloc(def, NULL, 100, 4096, &zero, &commit,
	    0));
}

/* ---- hooks that see every page of their arena ---- */

static void test_hooks_see_every_map(void **state) {
	(void)state;
	read_default_hooks();
	counts_reset();
	counting_all();
	unsigned a = arena_new(&counting);
	hooks_arena = a;
	size_t sz = sizeof(extent_hooks_t *);
	extent_hooks_t *got = NULL;
	assert_int_equal(arena_ctl(a, "extent_hooks", &got, &sz, NULL, 0), 0);
	assert_ptr_equal(got, &counting);
	int flags = MALLOCX_ARENA(a) | MALLOCX_TCACHE_NONE;
	size_t sizes[] = {16, 4000, 20000, 100 * MP_KiB, MP_MiB, 3 * MP_MiB,
	    40 * MP_MiB};
	void *p[MP_ARRAY_SIZE(sizes)];
	for (size_t i = 0; i < MP_ARRAY_SIZE(sizes); i++) {
		p[i] = mallocx(sizes[i], flags);
		assert_non_null(p[i]);
		memset(p[i], 1, sizes[i]);
		/* Every block lies in a mapping the hooks made. */
		assert_true(in_maps(p[i], sizes[i]));
	}
	assert_true(n_alloc >= 2);
	assert_true(n_split >= 1);     /* large blocks carved from mappings */
	for (size_t i = 0; i < MP_ARRAY_SIZE(sizes); i++)
		dallocx(p[i], flags);
	assert_true(n_merge >= 1);     /* freed blocks coalesce */
	/* A purge asks dalloc first (it keeps the pages here), then
	 * decommit (refused), then purges. */
	assert_int_equal(arena_ctl(a, "purge", NULL, NULL, NULL, 0), 0);
	assert_true(n_dalloc >= 1);
	assert_true(n_decommit >= 1);
	assert_true(n_purge_forced >= 1);
	assert_int_equal(bytes_back, 0);
	/* A large block shrunk in place, then purged with dalloc allowed:
	 * the tail goes back, and the memory is reused afterwards. */
	try_dalloc = true;
	void *q = mallocx(2 * MP_MiB, flags);
	assert_non_null(q);
	unsigned splits = n_split;
	size_t x = xallocx(q, MP_MiB, 0, flags);
	if (x == MP_MiB)
		assert_true(n_split > splits);
	assert_int_equal(arena_ctl(a, "purge", NULL, NULL, NULL, 0), 0);
	assert_true(bytes_back > 0);
	dallocx(q, flags);
	/* Decommit allowed: a purge decommits, and a block carved there
	 * again is committed first.  Page-aligned, so that cache_oblivious
	 * does not make the extent a page longer than the chunk it fills. */
	try_dalloc = false;
	try_decommit = true;
	q = mallocx(8 * MP_MiB, flags | MALLOCX_ALIGN(4096));
	assert_non_null(q);
	dallocx(q, flags);
	assert_int_equal(arena_ctl(a, "purge", NULL, NULL, NULL, 0), 0);
	unsigned commits = n_commit;
	q = mallocx(8 * MP_MiB, flags | MALLOCX_ALIGN(4096));
	assert_non_null(q);
	memset(q, 2, 8 * MP_MiB);
	assert_true(n_commit > commits);
	dallocx(q, flags);
	/* destroy: everything alloc gave comes back, through the hooks,
	 * on this arena's index, within their mappings. */
	assert_int_equal(arena_ctl(a, "destroy", NULL, NULL, NULL, 0), 0);
	assert_true(n_destroy >= 1);
	assert_int_equal(n_wrong_arena, 0);
	assert_int_equal(n_outside, 0);
	assert_int_equal(bytes_back, bytes_alloc);
	for (unsigned i = 0; i < nmaps; i++)
		assert_false(mapped(maps[i].addr));
}

/* jemalloc's extent.c body: a block shrunk in place and purged sees the
 * cascade (dalloc, decommit, purge) and a split; grown back in place
 * over the decommitted tail it sees a merge and a commit. */
static void test_xallocx_cascade(void **state) {
	(void)state;
	read_default_hooks();
	counts_reset();
	counting_all();
	unsigned a = arena_new(&counting);
	hooks_arena = a;
	int flags = MALLOCX_ARENA(a) | MALLOCX_TCACHE_NONE;
	size_t large0 = 0, sz = sizeof(large0);
	assert_int_equal(mallctl("arenas.lextent.0.size", &large0, &sz, NULL,
	    0), 0);
	void *p = mallocx(large0 * 2, flags);
	assert_non_null(p);
	assert_true(n_alloc >= 1);
	unsigned splits = n_split;
	bool shrunk = xallocx(p, large0, 0, flags) == large0;
	assert_int_equal(arena_ctl(a, "purge", NULL, NULL, NULL, 0), 0);
	if (shrunk) {
		assert_true(n_split > splits);
		assert_true(n_dalloc >= 1);
		assert_true(n_decommit >= 1);
		assert_true(n_purge_forced + n_purge_lazy >= 1);
	}
	dallocx(p, flags);

	try_decommit = true;
	p = mallocx(large0 * 2, flags);
	assert_non_null(p);
	unsigned decommits = n_decommit, commits = n_commit, merges = n_merge;
	splits = n_split;
	shrunk = xallocx(p, large0, 0, flags) == large0;
	assert_int_equal(arena_ctl(a, "purge", NULL, NULL, NULL, 0), 0);
	if (shrunk)
		assert_true(n_split > splits);
	bool grown = xallocx(p, large0 * 2, 0, flags) == large0 * 2;
	/* Both in place here (jemalloc's test allows either). */
	assert_true(shrunk);
	assert_true(grown);
	if (shrunk && grown) {
		assert_true(n_merge > merges);
		/* Other free extents may be decommitted too (booleans, as
		 * jemalloc checks them). */
		assert_true(n_decommit > decommits);
		assert_true(n_commit > commits);
		memset(p, 7, large0 * 2);
	}
	dallocx(p, flags);
	/* A small allocation works on such an arena too. */
	p = mallocx(42, flags);
	assert_non_null(p);
	dallocx(p, flags);
	try_decommit = false;
	assert_int_equal(arena_ctl(a, "destroy", NULL, NULL, NULL, 0), 0);
	assert_int_equal(n_wrong_arena, 0);
	assert_int_equal(n_outside, 0);
	assert_int_equal(bytes_back, bytes_alloc);
}

/* arena.<i>.extent_hooks written on an arena in use: later pages go
 * through the new hooks; the old pointer is read back. */
static void test_hooks_replaced(void **state) {
	(void)state;
	read_default_hooks();
	counts_reset();
	counting_all();
	unsigned a = arena_new(NULL);
	hooks_arena = a;
	int flags = MALLOCX_ARENA(a) | MALLOCX_TCACHE_NONE;
	void *before = mallocx(MP_MiB, flags);
	assert_non_null(before);
	extent_hooks_t *old = NULL, *h = &counting;
	size_t sz = sizeof(old);
	assert_int_equal(arena_ctl(a, "extent_hooks", &old, &sz, &h,
	    sizeof(h)), 0);
	assert_ptr_equal(old, def);
	/* Wrong size, NULL: EINVAL; MALLCTL_ARENAS_ALL: EFAULT. */
	assert_int_equal(arena_ctl(a, "extent_hooks", NULL, NULL, &h, 1),
	    EINVAL);
	extent_hooks_t *null = NULL;
	assert_int_equal(arena_ctl(a, "extent_hooks", NULL, NULL, &null,
	    sizeof(null)), EINVAL);
	assert_int_equal(arena_ctl(MALLCTL_ARENAS_ALL, "extent_hooks", &old,
	    &sz, NULL, 0), EFAULT);
	void *big = mallocx(100 * MP_MiB, flags);
	assert_non_null(big);
	assert_true(n_alloc >= 1);
	assert_true(in_maps(big, 100 * MP_MiB));
	dallocx(big, flags);
	dallocx(before, flags);
	assert_int_equal(arena_ctl(a, "destroy", NULL, NULL, NULL, 0), 0);
	assert_true(n_destroy >= 1);
	assert_int_equal(n_wrong_arena, 0);
}

/* Hooks on an automatic arena: its new mappings come from them; the
 * default hooks back in place, it goes on as before. */
static void test_auto_arena_hooks(void **state) {
	(void)state;
	read_default_hooks();
	counts_reset();
	counting_all();
	unsigned n = 0;
	size_t sz = sizeof(n);
	assert_int_equal(mallctl("opt.narenas", &n, &sz, NULL, 0), 0);
	unsigned a = n - 1;
	hooks_arena = a;
	extent_hooks_t *h = &counting, *old = NULL;
	sz = sizeof(old);
	assert_int_equal(arena_ctl(a, "extent_hooks", &old, &sz, &h,
	    sizeof(h)), 0);
	assert_ptr_equal(old, def);
	int flags = MALLOCX_ARENA(a) | MALLOCX_TCACHE_NONE;
	/* Bigger than any free extent the arena may hold: a new mapping. */
	void *p = mallocx(300 * MP_MiB, flags);
	assert_non_null(p);
	assert_true(n_alloc >= 1);
	assert_true(in_maps(p, 300 * MP_MiB));
	dallocx(p, flags);
	assert_int_equal(arena_ctl(a, "purge", NULL, NULL, NULL, 0), 0);
	assert_true(n_dalloc >= 1);
	assert_int_equal(n_wrong_arena, 0);
	/* Automatic arenas are not reset or destroyed. */
	assert_int_equal(arena_ctl(a, "reset", NULL, NULL, NULL, 0), EFAULT);
	assert_int_equal(arena_ctl(a, "destroy", NULL, NULL, NULL, 0), EFAULT);
	assert_int_equal(arena_ctl(a, "extent_hooks", NULL, NULL, &def,
	    sizeof(def)), 0);
	unsigned before = n_alloc;
	p = mallocx(300 * MP_MiB, flags);
	assert_non_null(p);
	memset(p, 9, MP_MiB);
	dallocx(p, flags);
	assert_int_equal(n_alloc, before);
}

/* An alloc that leaves its pages uncommitted: the arena commits the
 * whole mapping before using it; a refused commit gives it back. */
static void test_alloc_uncommitted(void **state) {
	(void)state;
	read_default_hooks();
	counts_reset();
	counting_all();
	alloc_uncommitted = true;
	unsigned a = arena_new(&counting);
	hooks_arena = a;
	int flags = MALLOCX_ARENA(a) | MALLOCX_TCACHE_NONE;
	char *p = mallocx(5 * MP_MiB, flags);
	assert_non_null(p);
	assert_true(n_commit >= 1);
	memset(p, 10, 5 * MP_MiB);      /* decommitted pages would fault */
	dallocx(p, flags);
	/* No commit hook: the mapping cannot be used and goes back. */
	counting.commit = NULL;
	unsigned allocs = n_alloc;
	size_t back = bytes_back;
	assert_null(mallocx(500 * MP_MiB, flags));
	assert_true(n_alloc > allocs);
	assert_true(bytes_back > back);  /* dalloc or destroy took it back */
	counting.commit = c_commit;
	alloc_uncommitted = false;
	assert_int_equal(arena_ctl(a, "destroy", NULL, NULL, NULL, 0), 0);
	assert_int_equal(bytes_back, bytes_alloc);
	assert_int_equal(n_outside, 0);
}

/* ---- NULL members: "cannot" ---- */

static void test_null_hooks(void **state) {
	(void)state;
	read_default_hooks();
	counts_reset();
	/* Only alloc: no split (exact mappings), no merge, no purge, no
	 * giving back; the arena still works. */
	counting = (extent_hooks_t){ .alloc = c_alloc };
	unsigned a = arena_new(&counting);
	hooks_arena = a;
	int flags = MALLOCX_ARENA(a) | MALLOCX_TCACHE_NONE;
	size_t sizes[] = {64, MP_MiB, 5 * MP_MiB, 3 * MP_MiB};
	for (unsigned round = 0; round < 2; round++) {
		for (size_t i = 0; i < MP_ARRAY_SIZE(sizes); i++) {
			void *p = mallocx(sizes[i], flags);
			assert_non_null(p);
			memset(p, 3, sizes[i]);
			assert_true(in_maps(p, sizes[i]));
			dallocx(p, flags);
		}
	}
	/* Without split every block had a mapping of its size class (and
	 * a page more with cache_oblivious). */
	for (unsigned i = 0; i < nmaps; i++) {
		if (maps[i].size >= MP_MiB)
			assert_true(maps[i].size <= 5 * MP_MiB + 4096);
	}
	assert_int_equal(arena_ctl(a, "purge", NULL, NULL, NULL, 0), 0);
	assert_int_equal(arena_ctl(a, "destroy", NULL, NULL, NULL, 0), 0);
	/* Nothing could be given back: the pages are still mapped (leaked,
	 * as jemalloc leaks them). */
	assert_int_equal(bytes_back, 0);
	assert_true(nmaps > 0 && mapped(maps[0].addr));
	for (unsigned i = 0; i < nmaps; i++)
		munmap(maps[i].addr, maps[i].size);

	/* No alloc at all: the arena cannot get pages. */
	counts_reset();
	counting = (extent_hooks_t){ .destroy = c_destroy };
	a = arena_new(&counting);
	flags = MALLOCX_ARENA(a) | MALLOCX_TCACHE_NONE;
	assert_null(mallocx(MP_MiB, flags));
	assert_null(mallocx(64, flags));
	assert_int_equal(arena_ctl(a, "destroy", NULL, NULL, NULL, 0), 0);
}

/* ---- reset and destroy ---- */

static void test_reset(void **state) {
	(void)state;
	read_default_hooks();
	counts_reset();
	counting_all();
	unsigned a = arena_new(&counting);
	hooks_arena = a;
	int flags = MALLOCX_ARENA(a) | MALLOCX_TCACHE_NONE;
	void *p[64];
	for (unsigned i = 0; i < 64; i++) {
		size_t size = i % 2 == 0 ? 48 + i : 70 * MP_KiB * (i + 1);
		p[i] = mallocx(size, flags);
		assert_non_null(p[i]);
		memset(p[i], 4, size);
	}
	assert_true(arena_pactive(a) > 0);
	unsigned maps_before = n_alloc;
	/* Action only; not for automatic arenas or the "all" index. */
	size_t v = 0, sz = sizeof(v);
	assert_int_equal(arena_ctl(a, "reset", &v, &sz, NULL, 0), EPERM);
	assert_int_equal(arena_ctl(a, "reset", NULL, NULL, &v, sizeof(v)),
	    EPERM);
	assert_int_equal(arena_ctl(0, "reset", NULL, NULL, NULL, 0), EFAULT);
	assert_int_equal(arena_ctl(MALLCTL_ARENAS_ALL, "reset", NULL, NULL,
	    NULL, 0), EFAULT);
	assert_int_equal(arena_ctl(a, "reset", NULL, NULL, NULL, 0), 0);
	assert_int_equal(arena_pactive(a), 0);
	/* The pages stay the arena's and serve it again: no new mapping
	 * for the same requests. */
	for (unsigned i = 0; i < 64; i++) {
		size_t size = i % 2 == 0 ? 48 + i : 70 * MP_KiB * (i + 1);
		p[i] = mallocx(size, flags);
		assert_non_null(p[i]);
		assert_true(in_maps(p[i], size));
	}
	assert_int_equal(n_alloc, maps_before);
	assert_int_equal(arena_ctl(a, "reset", NULL, NULL, NULL, 0), 0);
	assert_int_equal(arena_pactive(a), 0);
	assert_int_equal(arena_ctl(a, "destroy", NULL, NULL, NULL, 0), 0);
	assert_int_equal(bytes_back, bytes_alloc);
	assert_int_equal(n_wrong_arena, 0);
	assert_int_equal(n_outside, 0);
}

static void test_destroy_reuse(void **state) {
	(void)state;
	read_default_hooks();
	unsigned a = arena_new(NULL);
	int flags = MALLOCX_ARENA(a) | MALLOCX_TCACHE_NONE;
	void *big = mallocx(10 * MP_MiB, flags), *small = mallocx(100, flags);
	assert_non_null(big);
	assert_non_null(small);
	assert_int_equal(arena_ctl(0, "destroy", NULL, NULL, NULL, 0), EFAULT);
	/* A thread attached to it: EFAULT (the thread is on it while its
	 * cache lives, past its exit: jemalloc's count). */
	unsigned cur;
	size_t len = sizeof(cur);
	assert_int_equal(mallctl("thread.arena", &cur, &len, &a, sizeof(a)),
	    0);
	assert_int_equal(arena_ctl(a, "destroy", NULL, NULL, NULL, 0),
	    EFAULT);
	assert_int_equal(mallctl("thread.arena", NULL, NULL, &cur,
	    sizeof(cur)), 0);
	assert_int_equal(arena_ctl(a, "destroy", NULL, NULL, NULL, 0), 0);
	/* Its pages went back to the OS (default hooks: unmapped). */
	assert_false(mapped(big));
	bool init = true;
	len = sizeof(init);
	assert_int_equal(arena_ctl(a, "initialized", &init, &len, NULL, 0), 0);
	assert_false(init);
	assert_int_equal(arena_ctl(a, "destroy", NULL, NULL, NULL, 0), EFAULT);
	assert_int_equal(arena_ctl(a, "reset", NULL, NULL, NULL, 0), EFAULT);
	/* The next arenas.create gets the index back, and it works. */
	unsigned b = arena_new(NULL);
	assert_int_equal(b, a);
	void *p = mallocx(MP_MiB, MALLOCX_ARENA(b) | MALLOCX_TCACHE_NONE);
	assert_non_null(p);
	memset(p, 5, MP_MiB);
	dallocx(p, MALLOCX_TCACHE_NONE);
	unsigned c = arena_new(NULL);
	assert_int_not_equal(c, b);
}

/* ---- dss and retain_grow_limit ---- */

static void test_dss(void **state) {
	(void)state;
	const char *s = NULL;
	size_t sz = sizeof(s);
	assert_int_equal(mallctl("opt.dss", &s, &sz, NULL, 0), 0);
	assert_string_equal(s, "disabled");
	unsigned a = arena_new(NULL);
	assert_int_equal(arena_ctl(a, "dss", &s, &sz, NULL, 0), 0);
	assert_string_equal(s, "disabled");
	const char *bad = "tertiary";
	assert_int_equal(arena_ctl(a, "dss", NULL, NULL, &bad, sizeof(bad)),
	    EINVAL);
	const char *none = NULL;
	assert_int_equal(arena_ctl(a, "dss", &s, &sz, &none, sizeof(none)), 0);
	assert_string_equal(s, "disabled");
	const char *primary = "primary";
	assert_int_equal(arena_ctl(a, "dss", &s, &sz, &primary,
	    sizeof(primary)), 0);
	assert_string_equal(s, "disabled");
	assert_int_equal(arena_ctl(a, "dss", &s, &sz, NULL, 0), 0);
	assert_string_equal(s, "primary");
	/* The arena's statistics name its own mode, not opt.dss's. */
	uint64_t epoch = 1;
	assert_int_equal(mallctl("epoch", NULL, NULL, &epoch, sizeof(epoch)),
	    0);
	char name[64];
	snprintf(name, sizeof(name), "stats.arenas.%u.dss", a);
	assert_int_equal(mallctl(name, &s, &sz, NULL, 0), 0);
	assert_string_equal(s, "primary");
	/* primary: the arena's new pages come from the program break. */
	char *brk0 = sbrk(0);
	int flags = MALLOCX_ARENA(a) | MALLOCX_TCACHE_NONE;
	char *p = mallocx(3 * MP_MiB, flags);
	assert_non_null(p);
	char *brk1 = sbrk(0);
	assert_true(p >= brk0 && p + 3 * MP_MiB <= brk1);
	memset(p, 6, 3 * MP_MiB);
	dallocx(p, flags);
	assert_int_equal(arena_ctl(a, "purge", NULL, NULL, NULL, 0), 0);
	/* secondary: mmap first. */
	const char *secondary = "secondary";
	assert_int_equal(arena_ctl(a, "dss", NULL, NULL, &secondary,
	    sizeof(secondary)), 0);
	p = mallocx(200 * MP_MiB, flags);
	assert_non_null(p);
	assert_true(p + 200 * MP_MiB <= brk0 || p >= (char *)sbrk(0));
	dallocx(p, flags);
	/* MALLCTL_ARENAS_ALL: the mode of arenas made from now on. */
	assert_int_equal(arena_ctl(MALLCTL_ARENAS_ALL, "dss", NULL, NULL,
	    &secondary, sizeof(secondary)), 0);
	unsigned b = arena_new(NULL);
	assert_int_equal(arena_ctl(b, "dss", &s, &sz, NULL, 0), 0);
	assert_string_equal(s, "secondary");
	const char *disabled = "disabled";
	assert_int_equal(arena_ctl(MALLCTL_ARENAS_ALL, "dss", NULL, NULL,
	    &disabled, sizeof(disabled)), 0);
	assert_int_equal(mallctl("opt.dss", &s, &sz, NULL, 0), 0);
	assert_string_equal(s, "disabled");
	/* Pages of the break are never unmapped. */
	assert_int_equal(arena_ctl(a, "destroy", NULL, NULL, NULL, 0), 0);
	assert_true(mapped(brk1 - 4096));
	assert_int_equal(arena_ctl(b, "destroy", NULL, NULL, NULL, 0), 0);
}

static void test_retain_grow_limit(void **state) {
	(void)state;
	read_default_hooks();
	counts_reset();
	counting_all();
	unsigned a = arena_new(&counting);
	hooks_arena = a;
	size_t limit = 0, sz = sizeof(limit);
	assert_int_equal(arena_ctl(a, "retain_grow_limit", &limit, &sz, NULL,
	    0), 0);
	assert_true(limit >= 4 * MP_MiB);
	size_t small = 100;
	assert_int_equal(arena_ctl(a, "retain_grow_limit", NULL, NULL, &small,
	    sizeof(small)), EFAULT);
	assert_int_equal(arena_ctl(a, "retain_grow_limit", NULL, NULL, &small,
	    1), EINVAL);
	size_t want = 2 * MP_MiB + 100;
	assert_int_equal(arena_ctl(a, "retain_grow_limit", NULL, NULL, &want,
	    sizeof(want)), 0);
	assert_int_equal(arena_ctl(a, "retain_grow_limit", &limit, &sz, NULL,
	    0), 0);
	assert_int_equal(limit, 2 * MP_MiB);
	int flags = MALLOCX_ARENA(a) | MALLOCX_TCACHE_NONE;
	void *p[24];
	for (unsigned i = 0; i < 24; i++) {
		p[i] = mallocx(512 * MP_KiB, flags);
		assert_non_null(p[i]);
	}
	/* Growth stayed at the limit (a bigger request still gets its
	 * size). */
	assert_true(max_alloc <= 2 * MP_MiB);
	for (unsigned i = 0; i < 24; i++)
		dallocx(p[i], flags);
	assert_int_equal(arena_ctl(a, "destroy", NULL, NULL, NULL, 0), 0);
	assert_int_equal(bytes_back, bytes_alloc);
}

/* ---- several threads on one hooked arena ----
 * One arena's hooks are called under its lock, one at a time, so the
 * plain counters stay exact. */

#define THREADS 4
#define THREAD_ITERS 1500

static void *thread_body(void *arg) {
	unsigned a = *(unsigned *)arg;
	int flags = MALLOCX_ARENA(a) | MALLOCX_TCACHE_NONE;
	static const size_t sizes[] = {48, 3000, 70 * MP_KiB, 600 * MP_KiB,
	    2 * MP_MiB + 512 * MP_KiB};
	void *keep[8] = {NULL};
	for (unsigned i = 0; i < THREAD_ITERS; i++) {
		size_t size = sizes[i % MP_ARRAY_SIZE(sizes)];
		unsigned slot = i % 8;
		if (keep[slot] != NULL)
			dallocx(keep[slot], flags);
		keep[slot] = mallocx(size, flags);
		MP_CHECK(keep[slot] != NULL, "mallocx(%zu)", size);
		if (keep[slot] == NULL)
			break;
		memset(keep[slot], (int)i, size < 4096 ? size : 4096);
	}
	for (unsigned s = 0; s < 8; s++) {
		if (keep[s] != NULL)
			dallocx(keep[s], flags);
	}
	return NULL;
}

static void test_threads(void **state) {
	(void)state;
	read_default_hooks();
	counts_reset();
	counting_all();
	try_dalloc = true;
	unsigned a = arena_new(&counting);
	hooks_arena = a;
	/* Every free extent purged at once: the cascade runs all along. */
	ssize_t zero = 0;
	assert_int_equal(arena_ctl(a, "dirty_decay_ms", NULL, NULL, &zero,
	    sizeof(zero)), 0);
	pthread_t th[THREADS];
	for (unsigned i = 0; i < THREADS; i++)
		assert_int_equal(pthread_create(&th[i], NULL, thread_body, &a),
		    0);
	for (unsigned i = 0; i < THREADS; i++)
		assert_int_equal(pthread_join(th[i], NULL), 0);
	assert_int_equal(atomic_load(&mp_failures), 0);
	/* The purge first returns the empty slabs the arena's shared cache
	 * keeps. */
	assert_int_equal(arena_ctl(a, "purge", NULL, NULL, NULL, 0), 0);
	assert_int_equal(arena_pactive(a), 0);
	assert_true(n_dalloc > 0);
	assert_int_equal(arena_ctl(a, "destroy", NULL, NULL, NULL, 0), 0);
	assert_true(nmaps < MAPS_MAX);
	assert_int_equal(n_wrong_arena, 0);
	assert_int_equal(n_outside, 0);
	assert_int_equal(bytes_back, bytes_alloc);
}

/* Destroy and create again while another thread purges every arena:
 * a purge that looked a destroyed arena up finds it empty or reused,
 * never half cleared. */
static atomic_bool cycling_done;

static void *purge_all_body(void *arg) {
	(void)arg;
	while (!atomic_load(&cycling_done)) {
		MP_CHECK(mallctl("arena.4096.purge", NULL, NULL, NULL, 0) == 0,
		    "arena.4096.purge");
	}
	return NULL;
}

static void test_destroy_while_purging(void **state) {
	(void)state;
	atomic_store(&cycling_done, false);
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, purge_all_body, NULL), 0);
	unsigned first = 0;
	for (unsigned i = 0; i < 200; i++) {
		unsigned a = arena_new(NULL);
		if (i == 0)
			first = a;
		/* The destroyed index comes back each time. */
		assert_int_equal(a, first);
		int flags = MALLOCX_ARENA(a) | MALLOCX_TCACHE_NONE;
		void *p = mallocx(100 * MP_KiB, flags), *q = mallocx(64, flags);
		assert_non_null(p);
		assert_non_null(q);
		memset(p, 8, 100 * MP_KiB);
		assert_int_equal(arena_ctl(a, "destroy", NULL, NULL, NULL, 0),
		    0);
	}
	atomic_store(&cycling_done, true);
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_int_equal(atomic_load(&mp_failures), 0);
}

/* ---- reset of sampled blocks (a child with prof:true, every
 * allocation sampled): the profiler forgets them ---- */

/* Live sampled bytes, from a heap_v2 dump's "t*: objs: bytes" line. */
static size_t live_sampled_bytes(void) {
	int fd = memfd_create("extent_hooks", 0);
	if (fd < 0)
		return SIZE_MAX;
	size_t bytes = SIZE_MAX;
	if (mallctl("prof.dump_fd", NULL, NULL, &fd, sizeof(fd)) == 0) {
		char buf[512] = {0};
		if (pread(fd, buf, sizeof(buf) - 1, 0) > 0) {
			const char *t = strstr(buf, "t*: ");
			size_t objs;
			if (t == NULL || sscanf(t, "t*: %zu: %zu", &objs,
			    &bytes) != 2)
				bytes = SIZE_MAX;
		}
	}
	close(fd);
	return bytes;
}

static int child_prof_reset(void) {
	unsigned a;
	size_t sz = sizeof(a);
	MP_CHECK(mallctl("arenas.create", &a, &sz, NULL, 0) == 0,
	    "arenas.create");
	int flags = MALLOCX_ARENA(a) | MALLOCX_TCACHE_NONE;
	size_t before = live_sampled_bytes();
	MP_CHECK(before != SIZE_MAX, "no heap_v2 dump");
	void *p[8];
	for (unsigned i = 0; i < 8; i++) {
		p[i] = mallocx(MP_MiB, flags);
		MP_CHECK(p[i] != NULL, "mallocx");
	}
	size_t held = live_sampled_bytes();
	MP_CHECK(held != SIZE_MAX && held >= before + 8 * MP_MiB,
	    "sampled: %zu before, %zu with the blocks", before, held);
	MP_CHECK(arena_ctl(a, "reset", NULL, NULL, NULL, 0) == 0, "reset");
	size_t after = live_sampled_bytes();
	MP_CHECK(after != SIZE_MAX && after + 8 * MP_MiB <= held,
	    "sampled: %zu with the blocks, %zu after the reset", held, after);
	MP_CHECK(arena_ctl(a, "destroy", NULL, NULL, NULL, 0) == 0,
	    "destroy");
	return atomic_load(&mp_failures) == 0 ? 0 : 1;
}

static void test_reset_sampled(void **state) {
	(void)state;
	bool prof = false;
	size_t sz = sizeof(prof);
	if (mallctl("config.prof", &prof, &sz, NULL, 0) != 0 || !prof)
		MP_SKIP("built without the profiler");
	/* The fork's prefork takes more locks (every profiler shard's)
	 * than ThreadSanitizer's deadlock detector holds (64). */
	if (strcmp(mp_env_sanitizer(), "tsan") == 0)
		MP_SKIP("fork under ThreadSanitizer takes too many locks");
	char err[8192];
	int st = mp_run_child_conf("prof_reset",
	    "prof:true,prof_active:true,lg_prof_sample:0", err, sizeof(err),
	    NULL, 0, NULL);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
}

int main(int argc, char **argv) {
	if (argc == 3 && strcmp(argv[1], "--child") == 0 &&
	    strcmp(argv[2], "prof_reset") == 0)
		return child_prof_reset();
	mp_test_init(120);
	const struct CMUnitTest tests[] = {
		/* First: it forks, before the later tests add arenas (and
		 * their locks) for prefork to take. */
		cmocka_unit_test(test_reset_sampled),
		cmocka_unit_test(test_default_hooks_callable),
		cmocka_unit_test(test_hooks_see_every_map),
		cmocka_unit_test(test_xallocx_cascade),
		cmocka_unit_test(test_hooks_replaced),
		cmocka_unit_test(test_auto_arena_hooks),
		cmocka_unit_test(test_alloc_uncommitted),
		cmocka_unit_test(test_null_hooks),
		cmocka_unit_test(test_reset),
		cmocka_unit_test(test_destroy_reuse),
		cmocka_unit_test(test_dss),
		cmocka_unit_test(test_retain_grow_limit),
		cmocka_unit_test(test_threads),
		cmocka_unit_test(test_destroy_while_purging),
	};
	return mp_run_tests(tests);
}
