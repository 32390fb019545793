/*
 * test/stress/thread_churn.c - 100,000 short-lived threads, and the memory
 * comes back.
 *
 * Threads are started in waves of WAVE and joined.  Each allocates NOBJ
 * blocks of mixed sizes (mostly small, some page-sized, a few large),
 * frees some, frees up to LEFT blocks other threads left in a shared
 * stack and leaves LEFT of its own there.  Every block carries a pattern
 * checked before it is freed.  At the end the main thread frees what is
 * left, flushes its tcache (thread.tcache.flush) and purges every arena
 * (arena.4096.purge); then stats.allocated is back within ALLOC_SLACK of
 * its value before the churn, stats.active within ACTIVE_SLACK and
 * stats.resident within RESIDENT_SLACK (doc/reliability.md explains the
 * bounds).  Sanitizer
 * builds start NTHREADS_SAN threads.
 */
#include "../test_util.h"

#define NTHREADS 100000
#define NTHREADS_SAN 10000
#define WAVE 8
#define NOBJ 16
#define LEFT 4
#define STACK_CAP 4096
/* Nothing the churn allocated is live at the end: only the main thread's
 * own bookkeeping may differ. */
#define ALLOC_SLACK (256 * MP_KiB)
/* Every block the churn made is freed and its slabs emptied: active
 * pages come back exactly (measured: no difference); the slack is for a
 * slab per size class the main thread's own use may start.  Resident
 * also holds metadata, which is never returned: two base chunks (2 MiB
 * each) of extent records and thread caches made during the churn. */
#define ACTIVE_SLACK (1 * MP_MiB)
#define RESIDENT_SLACK (4 * MP_MiB)

typedef struct {
	unsigned char *p;
	size_t n;
	uint64_t seed;
} blk_t;

static pthread_mutex_t stack_mtx = PTHREAD_MUTEX_INITIALIZER;
static blk_t stack[STACK_CAP];
static size_t stack_n;

static bool blk_new(blk_t *b, mp_rng_t *rng) {
	uint64_t r = mp_rng_next(rng);
	if (r % 64 == 0) {
		b->n = (size_t)(r >> 8) % (448 * MP_KiB) + 64 * MP_KiB;
	} else if (r % 8 == 0) {
		b->n = (size_t)(r >> 8) % (30 * MP_KiB) + 2 * MP_KiB;
	} else {
		b->n = (size_t)(r >> 8) % 2048 + 1;
	}
	b->seed = r;
	b->p = LAUNDER((unsigned char *)malloc(b->n));
	if (b->p == NULL) {
		return false;
	}
	pattern_fill(b->p, b->n, b->seed);
	return true;
}

static void blk_free(blk_t *b) {
	MP_CHECK(pattern_check(b->p, b->n, b->seed) == SIZE_MAX,
	    "block of %zu bytes corrupted", b->n);
	free(b->p);
	b->p = NULL;
}

static void *churn(void *argp) {
	mp_rng_t rng = {(uint64_t)(uintptr_t)argp * 0x9e3779b97f4a7c15ULL + 1};
	blk_t mine[NOBJ];
	for (unsigned i = 0; i < NOBJ; i++) {
		MP_CHECK(blk_new(&mine[i], &rng), "malloc failed");
	}
	/* Half freed at once. */
	for (unsigned i = LEFT; i < NOBJ; i += 2) {
		if (mine[i].p != NULL) {
			blk_free(&mine[i]);
		}
	}
	/* Others' blocks out, LEFT of ours in. */
	blk_t theirs[LEFT];
	unsigned ntheirs = 0, kept = 0;
	pthread_mutex_lock(&stack_mtx);
	while (ntheirs < LEFT && stack_n > 0) {
		theirs[ntheirs++] = stack[--stack_n];
	}
	for (unsigned i = 0; i < LEFT && stack_n < STACK_CAP; i++) {
		if (mine[i].p != NULL) {
			stack[stack_n++] = mine[i];
			mine[i].p = NULL;
			kept++;
		}
	}
	pthread_mutex_unlock(&stack_mtx);
	(void)kept;
	for (unsigned i = 0; i < ntheirs; i++) {
		blk_free(&theirs[i]);
	}
	for (unsigned i = 0; i < NOBJ; i++) {
		if (mine[i].p != NULL) {
			blk_free(&mine[i]);
		}
	}
	return NULL;
}

typedef struct {
	size_t allocated, active, resident;
} mem_t;

static mem_t mem_settle(void) {
	mp_tcache_flush();
	MALLCTL_CALL("arena.4096.purge");
	mem_t m;
	m.allocated = mp_stat("stats.allocated");
	MALLCTL_READ("stats.active", m.active);
	MALLCTL_READ("stats.resident", m.resident);
	return m;
}

static void test_thread_churn(void **state) {
	(void)state;
	bool san = mp_env_sanitizer()[0] != '\0';
	unsigned nthreads = san ? NTHREADS_SAN : NTHREADS;
	/* The library is initialised before the threads start (racing
	 * first calls are test/stress/first_op's subject). */
	free(LAUNDER(malloc(1)));
	/* One wave first, so that what any thread sets up once for good is
	 * in the baseline. */
	pthread_t th[WAVE];
	for (unsigned i = 0; i < WAVE; i++) {
		assert_int_equal(pthread_create(&th[i], NULL, churn,
		    (void *)(uintptr_t)(nthreads + i)), 0);
	}
	for (unsigned i = 0; i < WAVE; i++) {
		assert_int_equal(pthread_join(th[i], NULL), 0);
	}
	while (stack_n > 0) {
		blk_free(&stack[--stack_n]);
	}
	mem_t m0 = mem_settle();

	uint64_t t0 = mp_now_ns();
	for (unsigned w = 0; w < nthreads; w += WAVE) {
		for (unsigned i = 0; i < WAVE; i++) {
			int r = pthread_create(&th[i], NULL, churn,
			    (void *)(uintptr_t)(w + i));
			MP_ASSERT(r == 0, "pthread_create (thread %u): %s",
			    w + i, strerror(r));
		}
		for (unsigned i = 0; i < WAVE; i++) {
			assert_int_equal(pthread_join(th[i], NULL), 0);
		}
	}
	double secs = (double)(mp_now_ns() - t0) / 1e9;
	size_t left = stack_n;
	while (stack_n > 0) {
		blk_free(&stack[--stack_n]);
	}
	assert_int_equal(atomic_load(&mp_failures), 0);
	mem_t m1 = mem_settle();
	printf("# %u threads (%d at a time) in %.1f s; %zu blocks left at the "
	    "end\n", nthreads, WAVE, secs, left);
	printf("# stats.allocated %zu -> %zu, stats.active %zu -> %zu, "
	    "stats.resident %zu -> %zu\n", m0.allocated, m1.allocated,
	    m0.active, m1.active, m0.resident, m1.resident);
	size_t diff = m1.allocated > m0.allocated ? m1.allocated -
	    m0.allocated : m0.allocated - m1.allocated;
	MP_ASSERT(diff <= ALLOC_SLACK, "stats.allocated %zu before the churn, "
	    "%zu after (limit: %zu more or less)", m0.allocated, m1.allocated,
	    (size_t)ALLOC_SLACK);
	MP_ASSERT(m1.active <= m0.active + ACTIVE_SLACK, "stats.active %zu "
	    "before the churn, %zu after (limit: %zu more)", m0.active,
	    m1.active, (size_t)ACTIVE_SLACK);
	if (strcmp(mp_env_sanitizer(), "tsan") != 0) {
		MP_ASSERT(m1.resident <= m0.resident + RESIDENT_SLACK,
		    "stats.resident %zu before the churn, %zu after (limit: "
		    "%zu more)", m0.resident, m1.resident,
		    (size_t)RESIDENT_SLACK);
	}
}

int main(void) {
	mp_test_init(600);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_thread_churn),
	};
	return mp_run_tests(tests);
}
