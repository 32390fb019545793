/*
 * test/stress/threads.c - many threads allocating, handing objects to each
 * other for cross-thread free, and short-lived thread churn.
 *
 *   test_cross_thread: 8 threads x ITERS iterations of random sizes and entry
 *     points; every object carries a content pattern that is verified before
 *     it is freed; about half of the objects are freed by another thread
 *     (per-thread lock-protected inboxes).
 *   test_thread_churn: 2,000 short-lived threads (a few at a time) each
 *     allocating objects, freeing some (including objects the main thread
 *     made), and leaving the rest behind for the main thread to free.
 *   test_allocated_returns: stats.allocated (after epoch) is back near its
 *     value from before the first test.
 *
 * Worker threads never use cmocka assertions: they count failures with
 * MP_CHECK and the main thread asserts the count is zero.
 */
#include "../test_util.h"

#include <sched.h>

#define NTHREADS 8
#define ITERS 150000
#define SLOTS 256
#define INBOX_CAP 4096
#define CHURN_THREADS 2000
#define CHURN_BATCH 8
#define CHURN_OBJS 24
#define CHURN_LEFT 12

static size_t baseline_allocated;

/* ------------------------------------------------------------------------ */
/* Objects.                                                                 */

struct obj {
	unsigned char *p;
	size_t n;	/* requested size */
	uint64_t seed;	/* pattern seed */
	int flags;	/* alignment flags valid for sdallocx, or 0 */
};

/*
 * Pattern over the whole object when small; the first and last 512 bytes
 * plus one word per 4 KiB page when large (keeps the test fast).
 */
static void obj_fill(const struct obj *o) {
	if (o->n <= 2048) {
		pattern_fill(o->p, o->n, o->seed);
		return;
	}
	pattern_fill(o->p, 512, o->seed);
	pattern_fill(o->p + o->n - 512, 512, o->seed ^ 1);
	for (size_t off = 4096; off + 8 <= o->n - 512; off += 4096) {
		uint64_t w = o->seed + off;
		memcpy(o->p + off, &w, 8);
	}
}

static bool obj_ok(const struct obj *o) {
	if (o->n <= 2048) {
		return pattern_check(o->p, o->n, o->seed) == SIZE_MAX;
	}
	if (pattern_check(o->p, 512, o->seed) != SIZE_MAX ||
	    pattern_check(o->p + o->n - 512, 512, o->seed ^ 1) != SIZE_MAX) {
		return false;
	}
	for (size_t off = 4096; off + 8 <= o->n - 512; off += 4096) {
		uint64_t w;
		memcpy(&w, o->p + off, 8);
		if (w != o->seed + off) {
			return false;
		}
	}
	return true;
}

static size_t random_size(mp_rng_t *r) {
	uint64_t x = mp_rng_next(r);
	unsigned bucket = (unsigned)(x % 100);
	x >>= 8;
	if (bucket < 70) {
		return (size_t)(x % 256) + 1;
	} else if (bucket < 90) {
		return (size_t)(x % 3840) + 257;
	} else if (bucket < 99) {
		return (size_t)(x % 61440) + 4097;
	}
	return (size_t)(x % (1024 * 1024)) + 65537;
}

/* Allocates an object through a randomly chosen entry point. */
static bool obj_alloc(struct obj *o, mp_rng_t *r) {
	size_t n = random_size(r);
	unsigned how = (unsigned)mp_rng_below(r, 8);
	void *p = NULL;
	int flags = 0;
	bool zero = false;
	switch (how) {
	case 0:
		p = calloc(1, n);
		zero = true;
		break;
	case 1:
		if (posix_memalign(&p, 64, n) != 0) {
			p = NULL;
		}
		flags = MALLOCX_ALIGN(64);
		break;
	case 2:
		p = mallocx(n, MALLOCX_ZERO);
		zero = true;
		break;
	case 3:
		p = mallocx(n, MALLOCX_TCACHE_NONE);
		break;
	case 4:
		flags = MALLOCX_LG_ALIGN(4 + (int)mp_rng_below(r, 9));
		p = mallocx(n, flags);
		break;
	default:
		p = malloc(n);
		break;
	}
	p = LAUNDER(p);
	MP_CHECK(p != NULL, "allocation of %zu bytes (way %u) failed", n, how);
	if (p == NULL) {
		return false;
	}
	MP_CHECK(malloc_usable_size(p) >= n, "usable %zu < %zu",
	    malloc_usable_size(p), n);
	if (flags != 0) {
		size_t a = (size_t)1 << (flags & 0x3f);
		MP_CHECK(mp_is_aligned(p, a), "%p not aligned to %zu", p, a);
	} else {
		MP_CHECK(mp_is_aligned(p, 16), "%p not 16-aligned", p);
	}
	if (zero) {
		size_t check = n < 4096 ? n : 4096;
		MP_CHECK(first_nonzero(p, check) == SIZE_MAX &&
		    first_nonzero((unsigned char *)p + n - check, check) ==
		    SIZE_MAX, "zeroed allocation of %zu bytes is not zero", n);
	}
	o->p = p;
	o->n = n;
	o->seed = mp_rng_next(r);
	o->flags = flags;
	obj_fill(o);
	return true;
}

static void obj_free(struct obj *o, mp_rng_t *r) {
	MP_CHECK(obj_ok(o), "object %p (%zu bytes) was corrupted", (void *)o->p,
	    o->n);
	switch (mp_rng_below(r, 4)) {
	case 0:
		sdallocx(o->p, o->n, o->flags);
		break;
	case 1:
		dallocx(o->p, MALLOCX_TCACHE_NONE);
		break;
	default:
		free(o->p);
		break;
	}
	o->p = NULL;
}

/* Grows or shrinks an object with realloc, keeping its pattern valid. */
static void obj_realloc(struct obj *o, mp_rng_t *r) {
	MP_CHECK(obj_ok(o), "object %p (%zu bytes) corrupted before realloc",
	    (void *)o->p, o->n);
	size_t n = random_size(r);
	unsigned char *q = LAUNDER((unsigned char *)realloc(o->p, n));
	MP_CHECK(q != NULL, "realloc(%zu -> %zu) failed", o->n, n);
	if (q == NULL) {
		free(o->p);
		o->p = NULL;
		return;
	}
	/* Objects over 2 KiB carry the full pattern in their first 512 bytes. */
	size_t keep = o->n < n ? o->n : n;
	if (o->n > 2048 && keep > 512) {
		keep = 512;
	}
	MP_CHECK(pattern_check(q, keep, o->seed) == SIZE_MAX,
	    "realloc(%zu -> %zu) lost content", o->n, n);
	o->p = q;
	o->n = n;
	o->flags = 0;
	o->seed = mp_rng_next(r);
	obj_fill(o);
}

/* ------------------------------------------------------------------------ */
/* Inboxes for cross-thread frees.                                          */

struct inbox {
	pthread_mutex_t mu;
	size_t head, count;
	struct obj items[INBOX_CAP];
};

static struct inbox inboxes[NTHREADS];
static atomic_uint producers_done;
static atomic_ulong cross_frees, local_frees, handoffs;

static bool inbox_push(struct inbox *b, const struct obj *o) {
	bool ok = false;
	pthread_mutex_lock(&b->mu);
	if (b->count < INBOX_CAP) {
		b->items[(b->head + b->count) % INBOX_CAP] = *o;
		b->count++;
		ok = true;
	}
	pthread_mutex_unlock(&b->mu);
	return ok;
}

/* Frees everything in the inbox; returns how many. */
static size_t inbox_drain(struct inbox *b, mp_rng_t *r) {
	struct obj batch[256];
	size_t total = 0;
	for (;;) {
		size_t k = 0;
		pthread_mutex_lock(&b->mu);
		while (b->count > 0 && k < MP_ARRAY_SIZE(batch)) {
			batch[k++] = b->items[b->head];
			b->head = (b->head + 1) % INBOX_CAP;
			b->count--;
		}
		pthread_mutex_unlock(&b->mu);
		if (k == 0) {
			return total;
		}
		for (size_t i = 0; i < k; i++) {
			obj_free(&batch[i], r);
		}
		total += k;
	}
}

struct worker_arg {
	unsigned id;
};

static void *worker(void *argp) {
	struct worker_arg *arg = argp;
	mp_rng_t rng = {0x1234567ull * (arg->id + 1)};
	struct obj slots[SLOTS];
	memset(slots, 0, sizeof(slots));
	unsigned long cross = 0, local = 0, sent = 0;

	for (unsigned it = 0; it < ITERS; it++) {
		struct obj *o = &slots[mp_rng_below(&rng, SLOTS)];
		if (o->p != NULL) {
			unsigned what = (unsigned)mp_rng_below(&rng, 16);
			if (what < 8) {
				/* Hand it to another thread. */
				unsigned to = (arg->id + 1 + (unsigned)
				    mp_rng_below(&rng, NTHREADS - 1)) % NTHREADS;
				MP_CHECK(obj_ok(o), "corrupted before handoff");
				if (inbox_push(&inboxes[to], o)) {
					sent++;
					o->p = NULL;
				} else {
					obj_free(o, &rng);
					local++;
				}
			} else if (what < 10) {
				obj_realloc(o, &rng);
				continue;
			} else {
				obj_free(o, &rng);
				local++;
			}
		}
		obj_alloc(o, &rng);
		if (it % 32 == 0) {
			cross += inbox_drain(&inboxes[arg->id], &rng);
		}
	}
	for (size_t i = 0; i < SLOTS; i++) {
		if (slots[i].p != NULL) {
			obj_free(&slots[i], &rng);
			local++;
		}
	}
	/* Keep draining until nobody can send to us any more. */
	atomic_fetch_add(&producers_done, 1);
	while (atomic_load(&producers_done) < NTHREADS) {
		cross += inbox_drain(&inboxes[arg->id], &rng);
		sched_yield();
	}
	cross += inbox_drain(&inboxes[arg->id], &rng);
	atomic_fetch_add(&cross_frees, cross);
	atomic_fetch_add(&local_frees, local);
	atomic_fetch_add(&handoffs, sent);
	return NULL;
}

static void test_cross_thread(void **state) {
	(void)state;
	mp_tcache_flush();
	baseline_allocated = mp_stat("stats.allocated");
	atomic_store(&mp_failures, 0);
	for (unsigned i = 0; i < NTHREADS; i++) {
		pthread_mutex_init(&inboxes[i].mu, NULL);
		inboxes[i].head = inboxes[i].count = 0;
	}
	pthread_t threads[NTHREADS];
	struct worker_arg args[NTHREADS];
	uint64_t t0 = mp_now_ns();
	for (unsigned i = 0; i < NTHREADS; i++) {
		args[i].id = i;
		assert_int_equal(pthread_create(&threads[i], NULL, worker,
		    &args[i]), 0);
	}
	for (unsigned i = 0; i < NTHREADS; i++) {
		assert_int_equal(pthread_join(threads[i], NULL), 0);
	}
	uint64_t ms = (mp_now_ns() - t0) / 1000000;
	printf("# %d threads x %d iterations in %" PRIu64 " ms: %lu handed "
	    "off, %lu freed by another thread, %lu freed locally\n", NTHREADS,
	    ITERS, ms, atomic_load(&handoffs), atomic_load(&cross_frees),
	    atomic_load(&local_frees));
	for (unsigned i = 0; i < NTHREADS; i++) {
		assert_int_equal(inboxes[i].count, 0);
	}
	assert_int_equal(atomic_load(&handoffs), atomic_load(&cross_frees));
	assert_true(atomic_load(&cross_frees) > (unsigned long)ITERS);
	assert_int_equal(atomic_load(&mp_failures), 0);
}

/* ------------------------------------------------------------------------ */
/* Thread churn.                                                            */

static struct obj leftovers[CHURN_THREADS][CHURN_LEFT];
static struct obj gifts[CHURN_THREADS];

struct churn_arg {
	unsigned id;
};

static void *churn_thread(void *argp) {
	struct churn_arg *arg = argp;
	mp_rng_t rng = {0xabcdefull + arg->id};
	struct obj objs[CHURN_OBJS];
	/* First free the object the main thread made for us. */
	obj_free(&gifts[arg->id], &rng);
	for (int i = 0; i < CHURN_OBJS; i++) {
		if (!obj_alloc(&objs[i], &rng)) {
			objs[i].p = NULL;
		}
	}
	for (int i = 0; i < CHURN_OBJS; i++) {
		if (i < CHURN_LEFT) {
			leftovers[arg->id][i] = objs[i];	/* main frees */
		} else if (objs[i].p != NULL) {
			obj_free(&objs[i], &rng);
		}
	}
	/* Some threads also toggle or flush their tcache before exiting. */
	if (arg->id % 5 == 0) {
		(void)mallctl("thread.tcache.flush", NULL, NULL, NULL, 0);
	} else if (arg->id % 7 == 0) {
		bool off = false;
		(void)mallctl("thread.tcache.enabled", NULL, NULL, &off,
		    sizeof(off));
		void *p = malloc(100);
		free(p);
	}
	return NULL;
}

static void test_thread_churn(void **state) {
	(void)state;
	atomic_store(&mp_failures, 0);
	size_t metadata0 = mp_stat("stats.metadata");
	size_t rss0 = read_rss_bytes();
	mp_rng_t rng = {777};
	for (unsigned i = 0; i < CHURN_THREADS; i++) {
		assert_true(obj_alloc(&gifts[i], &rng));
	}
	static struct churn_arg args[CHURN_THREADS];
	uint64_t t0 = mp_now_ns();
	for (unsigned base = 0; base < CHURN_THREADS; base += CHURN_BATCH) {
		pthread_t th[CHURN_BATCH];
		unsigned n = 0;
		for (unsigned i = base; i < base + CHURN_BATCH &&
		    i < CHURN_THREADS; i++) {
			args[i].id = i;
			int r = pthread_create(&th[n], NULL, churn_thread,
			    &args[i]);
			MP_ASSERT(r == 0, "pthread_create #%u: %d", i, r);
			n++;
		}
		for (unsigned i = 0; i < n; i++) {
			assert_int_equal(pthread_join(th[i], NULL), 0);
		}
	}
	size_t freed = 0;
	for (unsigned i = 0; i < CHURN_THREADS; i++) {
		for (unsigned j = 0; j < CHURN_LEFT; j++) {
			if (leftovers[i][j].p != NULL) {
				obj_free(&leftovers[i][j], &rng);
				freed++;
			}
		}
	}
	printf("# %d short-lived threads in %" PRIu64 " ms; main freed %zu "
	    "objects they left behind\n", CHURN_THREADS,
	    (mp_now_ns() - t0) / 1000000, freed);
	assert_int_equal(freed, (size_t)CHURN_THREADS * CHURN_LEFT);
	assert_int_equal(atomic_load(&mp_failures), 0);
	/* Per-thread state of exited threads is recycled, not leaked. */
	size_t metadata1 = mp_stat("stats.metadata");
	size_t rss1 = read_rss_bytes();
	printf("# stats.metadata %zu KiB -> %zu KiB, RSS %zu MiB -> %zu MiB "
	    "over the churn\n", metadata0 / 1024, metadata1 / 1024,
	    rss0 / MP_MiB, rss1 / MP_MiB);
	MP_ASSERT(metadata1 <= metadata0 + 16 * MP_MiB, "stats.metadata grew "
	    "from %zu to %zu over %d short-lived threads", metadata0,
	    metadata1, CHURN_THREADS);
}

static void test_allocated_returns(void **state) {
	(void)state;
	mp_tcache_flush();
	size_t now = mp_stat("stats.allocated");
	size_t diff = now > baseline_allocated ? now - baseline_allocated :
	    baseline_allocated - now;
	printf("# stats.allocated: %zu before, %zu after\n", baseline_allocated,
	    now);
	MP_ASSERT(diff <= 2 * MP_MiB, "stats.allocated %zu at start, %zu at "
	    "the end (difference %zu)", baseline_allocated, now, diff);
}

int main(void) {
	mp_test_init(300);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cross_thread),
		cmocka_unit_test(test_thread_churn),
		cmocka_unit_test(test_allocated_returns),
	};
	return mp_run_tests(tests);
}
