/*
 * test/integration/hook_reentrancy.c - hooks that call back into the
 * library do not deadlock (issue 18).  A custom extent hook runs with its
 * arena's lock held; jemalloc lets it allocate (its reentrant allocations
 * go to arena 0), and programs rely on that (a hook that logs, or keeps
 * its mappings in a malloc'd table).  Here what a hook allocates comes
 * from the hook arena, a hidden arena whose locks rank above every other
 * arena's (hook.c).  Checked:
 *   - hooks of a manual arena that allocate and free small and large
 *     blocks at every call, with the calling thread itself moved onto
 *     that arena (the worst case: its cache refills from there);
 *   - the same hooks on arena 0, the main thread's;
 *   - several threads at once, and a fork while one of them is inside
 *     the hooks;
 *   - the large blocks a hook allocates come from the hook arena, never
 *     from the arena whose lock it holds;
 *   - an experimental.hooks alloc hook that allocates is not called for
 *     its own allocation.
 * A deadlock ends the program through the hang detector (mp_test_init).
 */
#include "../test_util.h"

static extent_hooks_t *default_hooks;
static _Atomic unsigned hook_calls, hook_null;
/* One large block kept per hook call (up to KEEP_MAX), freed and looked
 * up after the hooks have run. */
#define KEEP_MAX 64
static void *_Atomic keep[KEEP_MAX];
static _Atomic unsigned nkeep;

/* What each hook does before the default one: small and large blocks in
 * and out, one large block kept. */
static void reenter(void) {
	atomic_fetch_add(&hook_calls, 1);
	void *a = malloc(opaque_size(64));
	void *b = calloc(1, opaque_size(3000));
	void *c = malloc(opaque_size(100 * MP_KiB));
	void *d = mallocx(opaque_size(3 * MP_MiB), MALLOCX_TCACHE_NONE);
	if (a == NULL || b == NULL || c == NULL || d == NULL)
		atomic_fetch_add(&hook_null, 1);
	free(a);
	free(b);
	free(c);
	unsigned k = atomic_fetch_add(&nkeep, 1);
	if (k < KEEP_MAX)
		atomic_store(&keep[k], d);
	else
		free(d);
}

static void *r_alloc(extent_hooks_t *h, void *new_addr, size_t size,
    size_t align, bool *zero, bool *commit, unsigned ind) {
	(void)h;
	reenter();
	return default_hooks->alloc(default_hooks, new_addr, size, align,
	    zero, commit, ind);
}

static bool r_dalloc(extent_hooks_t *h, void *addr, size_t size,
    bool committed, unsigned ind) {
	(void)h;
	reenter();
	return default_hooks->dalloc(default_hooks, addr, size, committed,
	    ind);
}

static void r_destroy(extent_hooks_t *h, void *addr, size_t size,
    bool committed, unsigned ind) {
	(void)h;
	reenter();
	default_hooks->destroy(default_hooks, addr, size, committed, ind);
}

static bool r_purge_forced(extent_hooks_t *h, void *addr, size_t size,
    size_t off, size_t len, unsigned ind) {
	(void)h;
	reenter();
	return default_hooks->purge_forced(default_hooks, addr, size, off,
	    len, ind);
}

static bool r_split(extent_hooks_t *h, void *addr, size_t size,
    size_t size_a, size_t size_b, bool committed, unsigned ind) {
	(void)h;
	reenter();
	return default_hooks->split(default_hooks, addr, size, size_a, size_b,
	    committed, ind);
}

static bool r_merge(extent_hooks_t *h, void *addr_a, size_t size_a,
    void *addr_b, size_t size_b, bool committed, unsigned ind) {
	(void)h;
	reenter();
	return default_hooks->merge(default_hooks, addr_a, size_a, addr_b,
	    size_b, committed, ind);
}

static extent_hooks_t r_hooks;

static void prep(void) {
	size_t len = sizeof(default_hooks);
	assert_int_equal(mallctl("arena.0.extent_hooks", &default_hooks, &len,
	    NULL, 0), 0);
	r_hooks = *default_hooks;
	r_hooks.alloc = r_alloc;
	r_hooks.dalloc = r_dalloc;
	r_hooks.destroy = r_destroy;
	r_hooks.purge_forced = r_purge_forced;
	r_hooks.split = r_split;
	r_hooks.merge = r_merge;
	atomic_store(&hook_calls, 0);
	atomic_store(&hook_null, 0);
	atomic_store(&nkeep, 0);
}

/* Blocks of every kind from arena a (0: the thread's), freed, then a
 * purge of arena a, n times. */
static void churn(unsigned a, unsigned n) {
	int flags = a != 0 ? MALLOCX_ARENA(a) : 0;
	for (unsigned i = 0; i < n; i++) {
		void *p = mallocx(opaque_size((size_t)1 << (20 + i % 4)),
		    flags | MALLOCX_TCACHE_NONE);
		void *q = malloc(opaque_size(64 + i * 4000));
		void *r = mallocx(opaque_size(200 * MP_KiB), flags);
		MP_CHECK(p != NULL && q != NULL && r != NULL, "churn %u", i);
		memset(p, 1, 4096);
		if (q != NULL)
			memset(q, 2, 64);
		dallocx(p, MALLOCX_TCACHE_NONE);
		free(q);
		dallocx(r, 0);
		(void)mallctl_fmt(NULL, NULL, NULL, 0, "arena.%u.purge", a);
	}
}

/* The kept blocks: each a block of the hook arena, not of `held` (the
 * arena whose hooks made it). */
static void check_kept(unsigned held) {
	unsigned n = atomic_load(&nkeep);
	MP_ASSERT(n > 0, "no hook call kept a block");
	if (n > KEEP_MAX)
		n = KEEP_MAX;
	for (unsigned k = 0; k < n; k++) {
		void *p = atomic_exchange(&keep[k], NULL);
		unsigned ind = UINT_MAX;
		size_t len = sizeof(ind);
		assert_int_equal(mallctl("arenas.lookup", &ind, &len, &p,
		    sizeof(p)), 0);
		MP_ASSERT(ind != held, "a hook's block came from arena %u, "
		    "whose lock the hook held", held);
		free(p);
	}
}

static void test_manual_arena(void **state) {
	(void)state;
	prep();
	unsigned a = 0, old = 0;
	size_t len = sizeof(a);
	extent_hooks_t *h = &r_hooks;
	assert_int_equal(mallctl("arenas.create", &a, &len, &h, sizeof(h)),
	    0);
	/* The hooks read back as given. */
	extent_hooks_t *got = NULL;
	len = sizeof(got);
	assert_int_equal(mallctl_fmt(&got, &len, NULL, 0,
	    "arena.%u.extent_hooks", a), 0);
	assert_ptr_equal(got, &r_hooks);
	/* The thread itself onto the hooked arena. */
	len = sizeof(old);
	assert_int_equal(mallctl("thread.arena", &old, &len, &a, sizeof(a)),
	    0);
	churn(a, 40);
	assert_int_equal(mallctl("thread.arena", NULL, NULL, &old,
	    sizeof(old)), 0);
	mp_tcache_flush();
	MP_ASSERT(atomic_load(&hook_calls) > 0, "hooks never called");
	assert_int_equal(atomic_load(&hook_null), 0);
	check_kept(a);
	/* destroy calls dalloc / destroy, which allocate too. */
	assert_int_equal(mallctl_fmt(NULL, NULL, NULL, 0, "arena.%u.destroy",
	    a), 0);
	assert_int_equal(atomic_load(&hook_null), 0);
	assert_int_equal(atomic_load(&mp_failures), 0);
}

static void test_arena0(void **state) {
	(void)state;
	prep();
	extent_hooks_t *h = &r_hooks, *old = NULL;
	size_t len = sizeof(old);
	unsigned zero = 0, prev = 0;
	size_t ulen = sizeof(prev);
	assert_int_equal(mallctl("thread.arena", &prev, &ulen, &zero,
	    sizeof(zero)), 0);
	assert_int_equal(mallctl("arena.0.extent_hooks", &old, &len, &h,
	    sizeof(h)), 0);
	assert_ptr_equal(old, default_hooks);
	churn(0, 40);
	assert_int_equal(mallctl("arena.0.extent_hooks", NULL, NULL, &old,
	    sizeof(old)), 0);
	assert_int_equal(mallctl("thread.arena", NULL, NULL, &prev,
	    sizeof(prev)), 0);
	MP_ASSERT(atomic_load(&hook_calls) > 0, "hooks never called");
	assert_int_equal(atomic_load(&hook_null), 0);
	check_kept(0);
	assert_int_equal(atomic_load(&mp_failures), 0);
}

static unsigned shared_arena;

static void *thread_churn(void *arg) {
	(void)arg;
	churn(shared_arena, 20);
	return NULL;
}

/* Four threads on one hooked arena: the hooks run under its lock one at
 * a time, each allocating from the hook arena. */
static void test_threads(void **state) {
	(void)state;
	prep();
	extent_hooks_t *h = &r_hooks;
	size_t len = sizeof(shared_arena);
	assert_int_equal(mallctl("arenas.create", &shared_arena, &len, &h,
	    sizeof(h)), 0);
	pthread_t t[4];
	for (unsigned i = 0; i < MP_ARRAY_SIZE(t); i++)
		assert_int_equal(pthread_create(&t[i], NULL, thread_churn,
		    NULL), 0);
	for (unsigned i = 0; i < MP_ARRAY_SIZE(t); i++)
		assert_int_equal(pthread_join(t[i], NULL), 0);
	assert_int_equal(atomic_load(&hook_null), 0);
	check_kept(shared_arena);
	assert_int_equal(atomic_load(&mp_failures), 0);
}

/* fork while another thread runs inside the hooks: the child gets
 * every arena lock free (the hook arena's are taken last at fork, after
 * every arena's mtx, which the hook's thread holds while it takes
 * them), allocates and exits. */
static _Atomic bool fork_stop;

static void *thread_churn_until(void *arg) {
	(void)arg;
	while (!atomic_load(&fork_stop))
		churn(shared_arena, 2);
	return NULL;
}

static void test_fork(void **state) {
	(void)state;
	prep();
	extent_hooks_t *h = &r_hooks;
	size_t len = sizeof(shared_arena);
	assert_int_equal(mallctl("arenas.create", &shared_arena, &len, &h,
	    sizeof(h)), 0);
	atomic_store(&fork_stop, false);
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, thread_churn_until, NULL),
	    0);
	for (int i = 0; i < 20; i++) {
		pid_t pid = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			void *p = mallocx(3 * MP_MiB, MALLOCX_TCACHE_NONE);
			free(malloc(64));
			_exit(p != NULL ? 0 : 1);
		}
		int status = 0;
		assert_int_equal(waitpid(pid, &status, 0), pid);
		MP_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		    "child %d: status 0x%x", i, status);
	}
	atomic_store(&fork_stop, true);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(atomic_load(&hook_null), 0);
	check_kept(shared_arena);
	assert_int_equal(atomic_load(&mp_failures), 0);
}

/* experimental.hooks: an alloc hook that allocates is called once per
 * program allocation, not for its own.  jemalloc's hooks_t, which
 * programs declare themselves (its header keeps it internal). */
typedef struct {
	void (*alloc_hook)(void *, int, void *, uintptr_t, uintptr_t[3]);
	void (*dalloc_hook)(void *, int, void *, uintptr_t[3]);
	void (*expand_hook)(void *, int, void *, size_t, size_t, uintptr_t,
	    uintptr_t[4]);
	void *extra;
} hook_set_t;
static _Atomic unsigned xhook_calls;

static void xhook_alloc(void *extra, int type, void *result,
    uintptr_t result_raw, uintptr_t args_raw[3]) {
	(void)extra;
	(void)type;
	(void)result;
	(void)result_raw;
	(void)args_raw;
	atomic_fetch_add(&xhook_calls, 1);
	free(malloc(opaque_size(48)));
	free(malloc(opaque_size(2 * MP_MiB)));
}

static void test_experimental_hook(void **state) {
	(void)state;
	hook_set_t set = {0};
	set.alloc_hook = xhook_alloc;
	void *handle = NULL;
	size_t len = sizeof(handle);
	assert_int_equal(mallctl("experimental.hooks.install", &handle, &len,
	    &set, sizeof(set)), 0);
	atomic_store(&xhook_calls, 0);
	for (int i = 0; i < 10; i++)
		free(malloc(opaque_size(100)));
	unsigned n = atomic_load(&xhook_calls);
	assert_int_equal(mallctl("experimental.hooks.remove", NULL, NULL,
	    &handle, sizeof(handle)), 0);
	MP_ASSERT(n == 10, "alloc hook called %u times for 10 mallocs", n);
}

int main(void) {
	mp_test_init(120);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_manual_arena),
		cmocka_unit_test(test_arena0),
		cmocka_unit_test(test_threads),
		cmocka_unit_test(test_fork),
		cmocka_unit_test(test_experimental_hook),
	};
	return mp_run_tests(tests);
}
