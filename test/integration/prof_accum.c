/*
 * test/integration/prof_accum.c - prof_accum: the [accum] columns count
 * every sampled object ever allocated, freed or not (jemalloc's
 * test/unit/prof_accum.c).
 *
 * prof_accum.conf: prof:true,prof_accum:true,lg_prof_sample:0.  A stack
 * whose objects were all freed stays in the dumps as "0: 0 [n: bytes]";
 * 4 threads each allocate and free at 50 backtraces of their own (200 in
 * all, made by bt0/bt1 recursion) with a dump after each, and every dump
 * a thread takes has at least one backtrace more than its previous one; a
 * moving realloc counts the new block once, the old one stays in the accum
 * counts of its own stack; a realloc within the size class counts nothing,
 * and a large block resized in place is a new sample at the resizing call.
 */
#include "../test_util.h"

static char tmpdir[256];

void *accum_site(size_t size);
void *bt0(unsigned bits, unsigned n, size_t size);
void *bt1(unsigned bits, unsigned n, size_t size);

MP_SITE void *accum_site(size_t size) {
	void *p = malloc(size);
	__asm__ volatile("" : : "r"(p) : "memory");
	return p;
}

/*
 * A distinct backtrace for each value of `bits` (n bits, low bit first):
 * one frame in bt0 or bt1 per bit, then the malloc call.
 */
MP_SITE void *bt0(unsigned bits, unsigned n, size_t size) {
	void *p;
	if (n == 0) {
		p = malloc(size);
	} else if (bits & 1) {
		p = bt1(bits >> 1, n - 1, size);
	} else {
		p = bt0(bits >> 1, n - 1, size);
	}
	__asm__ volatile("" : : "r"(p) : "memory");
	return p;
}

MP_SITE void *bt1(unsigned bits, unsigned n, size_t size) {
	void *p;
	if (n == 0) {
		p = malloc(size);
	} else if (bits & 1) {
		p = bt1(bits >> 1, n - 1, size);
	} else {
		p = bt0(bits >> 1, n - 1, size);
	}
	__asm__ volatile("" : : "r"(p) : "memory");
	return p;
}

#define BT_BITS 8

static void dump_parse(const char *tag, mp_heap_t *h) {
	char path[600];
	snprintf(path, sizeof(path), "%s/%s.heap", tmpdir, tag);
	assert_int_equal(mp_prof_dump(path), 0);
	MP_HEAP_PARSE(path, h);
}

/* The counters of all stacks whose first user frame is in fn. */
static mp_cnts_t site_cnts(const mp_heap_t *h, const void *fn) {
	uintptr_t lo, hi;
	mp_fn_range(fn, &lo, &hi);
	mp_cnts_t sum = {0, 0, 0, 0};
	for (size_t i = 0; i < h->nstacks; i++) {
		size_t u = mp_heap_user_frame(&h->stacks[i]);
		if (h->stacks[i].nframes > u && mp_ra_in(h->stacks[i].frames[u],
		    lo, hi)) {
			mp_cnts_add(&sum, &h->stacks[i].total);
		}
	}
	return sum;
}

static void test_freed_stays(void **state) {
	(void)state;
	bool b = false;
	MALLCTL_READ("opt.prof_accum", b);
	assert_true(b);
	void *p[10];
	for (int i = 0; i < 10; i++) {
		p[i] = accum_site(opaque_size(200));	/* usize 224 */
	}
	mp_heap_t h;
	dump_parse("live", &h);
	mp_heap_check_sums(&h, true);
	const mp_heap_stack_t *s = mp_heap_find_site(&h, (void *)accum_site,
	    1);
	assert_non_null(s);
	mp_cnts_t want = {10, 2240, 10, 2240};
	MP_ASSERT(mp_cnts_eq(&s->total, &want), "%" PRIu64 ": %" PRIu64 " [%"
	    PRIu64 ": %" PRIu64 "]", s->total.co, s->total.cb, s->total.ao,
	    s->total.ab);
	assert_true(h.total.ao >= h.total.co && h.total.ab >= h.total.cb);
	mp_heap_free(&h);

	for (int i = 0; i < 10; i++) {
		free(p[i]);
	}
	dump_parse("freed", &h);
	mp_heap_check_sums(&h, true);
	s = mp_heap_find_site(&h, (void *)accum_site, 1);
	MP_ASSERT(s != NULL, "with prof_accum a freed stack stays");
	mp_cnts_t want2 = {0, 0, 10, 2240};
	MP_ASSERT(mp_cnts_eq(&s->total, &want2), "%" PRIu64 ": %" PRIu64 " [%"
	    PRIu64 ": %" PRIu64 "]", s->total.co, s->total.cb, s->total.ao,
	    s->total.ab);
	assert_int_equal(s->nthr, 1);
	assert_true(mp_cnts_eq(&s->thr[0].c, &want2));
	mp_heap_free(&h);

	/* Twenty more from one call, freed: accum keeps counting. */
	void *q[20];
	for (int i = 0; i < 20; i++) {
		q[i] = accum_site(opaque_size(200));
	}
	for (int i = 0; i < 20; i++) {
		free(q[i]);
	}
	dump_parse("again", &h);
	mp_heap_check_sums(&h, true);
	mp_cnts_t sum = site_cnts(&h, (void *)accum_site);
	mp_cnts_t want3 = {0, 0, 30, 30 * 224};
	MP_ASSERT(mp_cnts_eq(&sum, &want3), "%" PRIu64 ": %" PRIu64 " [%"
	    PRIu64 ": %" PRIu64 "]", sum.co, sum.cb, sum.ao, sum.ab);
	mp_heap_free(&h);
}

/* ---- 4 threads x 50 backtraces (jemalloc's prof_accum test). */

#define NTHREADS 4
#define NBT 50

static void *accum_thread(void *arg) {
	unsigned id = (unsigned)(uintptr_t)arg;
	size_t prev = 0;
	for (unsigned i = 0; i < NBT; i++) {
		/* Unique over all threads: id * NBT + i. */
		free(bt0(id * NBT + i, BT_BITS, 64));
		char path[600];
		snprintf(path, sizeof(path), "%s/thr%u.heap", tmpdir, id);
		MP_CHECK(mp_prof_dump(path) == 0, "dump");
		mp_heap_t h;
		if (!mp_heap_parse(path, &h)) {
			MP_CHECK(false, "parse: %s", h.err);
			continue;
		}
		MP_CHECK(h.nstacks >= prev + 1, "thread %u round %u: %zu "
		    "stacks, %zu before", id, i, h.nstacks, prev);
		prev = h.nstacks;
		mp_heap_free(&h);
	}
	return NULL;
}

static void test_threads(void **state) {
	(void)state;
	pthread_t t[NTHREADS];
	for (unsigned i = 0; i < NTHREADS; i++) {
		assert_int_equal(pthread_create(&t[i], NULL, accum_thread,
		    (void *)(uintptr_t)i), 0);
	}
	for (unsigned i = 0; i < NTHREADS; i++) {
		assert_int_equal(pthread_join(t[i], NULL), 0);
	}
	assert_int_equal(atomic_load(&mp_failures), 0);
	/* Each thread's 50 objects at its 50 stacks, all freed. */
	mp_heap_t h;
	dump_parse("threads", &h);
	mp_heap_check_sums(&h, true);
	uintptr_t lo0, hi0, lo1, hi1;
	mp_fn_range((void *)bt0, &lo0, &hi0);
	mp_fn_range((void *)bt1, &lo1, &hi1);
	uint64_t objs = 0, live = 0;
	size_t nstacks = 0;
	for (size_t i = 0; i < h.nstacks; i++) {
		const mp_heap_stack_t *s = &h.stacks[i];
		size_t u = mp_heap_user_frame(s);
		if (s->nframes > u && (mp_ra_in(s->frames[u], lo0, hi0) ||
		    mp_ra_in(s->frames[u], lo1, hi1))) {
			nstacks++;
			objs += s->total.ao;
			live += s->total.co;
		}
	}
	assert_int_equal(objs, NTHREADS * NBT);
	assert_int_equal(live, 0);
	MP_ASSERT(nstacks == NTHREADS * NBT, "%zu stacks for %d backtraces",
	    nstacks, NTHREADS * NBT);
	mp_heap_free(&h);
}

void *accum_realloc(void *p, size_t size);

MP_SITE void *accum_realloc(void *p, size_t size) {
	void *q = realloc(p, size);
	__asm__ volatile("" : : "r"(q) : "memory");
	return q;
}

static void test_moving_realloc(void **state) {
	(void)state;
	void *p = accum_site(opaque_size(100));		/* usize 112 */
	p = accum_realloc(p, 50000);			/* moves */
	mp_heap_t h;
	dump_parse("realloc", &h);
	const mp_heap_stack_t *s = mp_heap_find_site(&h, (void *)accum_realloc,
	    1);
	assert_non_null(s);
	size_t u = malloc_usable_size(p);
	mp_cnts_t want = {1, u, 1, u};
	assert_true(mp_cnts_eq(&s->total, &want));
	assert_true(mp_heap_entry_is(s, (void *)realloc));
	mp_heap_free(&h);
	free(p);
}

void *accum_xallocx(void *p, size_t size);

MP_SITE void *accum_xallocx(void *p, size_t size) {
	size_t got = xallocx(p, size, 0, 0);
	__asm__ volatile("" : : "r"(got) : "memory");
	return got == size ? p : NULL;
}

/*
 * A realloc within the size class allocates nothing: the object stays
 * counted where it was allocated, no new sample, no accum, and
 * thread.allocated does not move.  A sampled large block resizes in
 * place, and that counts as a new allocation at the resizing call (as in
 * jemalloc): the old sample goes, the new one is made where it is.
 */
static void test_realloc_in_place(void **state) {
	(void)state;
	mp_heap_t h;
	dump_parse("before", &h);
	mp_cnts_t before = site_cnts(&h, (void *)accum_realloc);
	mp_heap_free(&h);
	/* Junk filling (debug builds' default) moves every realloc. */
	const char *junk = "false";
	MALLCTL_READ("opt.junk", junk);
	if (strcmp(junk, "false") == 0) {
		void *p = accum_site(opaque_size(100000));  /* usize 114688 */
		assert_int_equal(malloc_usable_size(p), 114688);
		uint64_t a0 = 0, a1 = 0;
		MALLCTL_READ("thread.allocated", a0);
		void *q = accum_realloc(p, 100001);
		MALLCTL_READ("thread.allocated", a1);
		assert_ptr_equal(q, p);
		assert_int_equal(a1, a0);
		dump_parse("sameclass", &h);
		mp_heap_check_sums(&h, true);
		mp_cnts_t c = site_cnts(&h, (void *)accum_realloc);
		MP_ASSERT(mp_cnts_eq(&c, &before), "same-class realloc "
		    "sampled: %" PRIu64 ": %" PRIu64 " [%" PRIu64 ": %" PRIu64
		    "]", c.co, c.cb, c.ao, c.ab);
		mp_heap_free(&h);
		free(q);
	}

	/* Shrinking a large block always succeeds in place; growing it back
	 * at once finds the pages it just gave up (nothing is allocated in
	 * between).  Each is a sample at the xallocx call; the realloc then
	 * samples the block once more (moved or not, the counts are the
	 * same). */
	size_t big = 4 << 20, small = 1 << 20;
	void *r = accum_site(opaque_size(big));
	assert_ptr_equal(accum_xallocx(r, small), r);
	assert_ptr_equal(accum_xallocx(r, big), r);
	r = accum_realloc(r, big + (1 << 20));
	assert_non_null(r);
	dump_parse("grown", &h);
	mp_heap_check_sums(&h, true);
	mp_cnts_t c = site_cnts(&h, (void *)accum_xallocx);
	mp_cnts_t want2 = {0, 0, 2, small + big};
	MP_ASSERT(mp_cnts_eq(&c, &want2), "xallocx site after growing: %"
	    PRIu64 ": %" PRIu64 " [%" PRIu64 ": %" PRIu64 "]", c.co, c.cb,
	    c.ao, c.ab);
	c = site_cnts(&h, (void *)accum_realloc);
	mp_cnts_t want3 = {1, big + (1 << 20), before.ao + 1,
	    before.ab + big + (1 << 20)};
	MP_ASSERT(mp_cnts_eq(&c, &want3), "realloc site after growing: %"
	    PRIu64 ": %" PRIu64 " [%" PRIu64 ": %" PRIu64 "]", c.co, c.cb,
	    c.ao, c.ab);
	mp_heap_free(&h);
	free(r);
}

static void test_no_profiler(void **state) {
	(void)state;
	bool b;
	size_t sz = sizeof(b);
	assert_int_equal(mallctl("opt.prof_accum", &b, &sz, NULL, 0), ENOENT);
}

int main(void) {
	mp_test_init(300);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_freed_stays),
		cmocka_unit_test(test_threads),
		cmocka_unit_test(test_moving_realloc),
		cmocka_unit_test(test_realloc_in_place),
	};
	return mp_prof_test_main("mp_prof_accum", test_no_profiler, tests);
}
