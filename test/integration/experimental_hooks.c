/*
 * test/integration/experimental_hooks.c - jemalloc's experimental hooks
 * (issue 18): experimental.hooks.install / remove with jemalloc's hooks_t,
 * each public function reported under jemalloc's hook type with its
 * pointer and raw arguments, nested calls (realloc of NULL, mallocx with
 * no flags) reported once, threads started after the install reported
 * too, the limit of four sets (EAGAIN), the error codes, and
 * experimental.thread.activity_callback and
 * experimental.hooks.safety_check_abort.
 */
#include "../test_util.h"

#include <pthread.h>

/* jemalloc's hook.h, which its public header does not carry either: the
 * types as a program written for jemalloc declares them. */
typedef enum {
	hook_alloc_malloc, hook_alloc_posix_memalign, hook_alloc_aligned_alloc,
	hook_alloc_calloc, hook_alloc_memalign, hook_alloc_valloc,
	hook_alloc_mallocx, hook_alloc_realloc, hook_alloc_rallocx,
} hook_alloc_t;
typedef enum {
	hook_dalloc_free, hook_dalloc_dallocx, hook_dalloc_sdallocx,
	hook_dalloc_realloc, hook_dalloc_rallocx,
} hook_dalloc_t;
typedef enum {
	hook_expand_realloc, hook_expand_rallocx, hook_expand_xallocx,
} hook_expand_t;
typedef void (*hook_alloc)(void *extra, hook_alloc_t type, void *result,
    uintptr_t result_raw, uintptr_t args_raw[3]);
typedef void (*hook_dalloc)(void *extra, hook_dalloc_t type, void *address,
    uintptr_t args_raw[3]);
typedef void (*hook_expand)(void *extra, hook_expand_t type, void *address,
    size_t old_usize, size_t new_usize, uintptr_t result_raw,
    uintptr_t args_raw[4]);
typedef struct hooks_s {
	hook_alloc alloc_hook;
	hook_dalloc dalloc_hook;
	hook_expand expand_hook;
	void *extra;
} hooks_t;

/* What the hooks saw, in order: plain static storage, since a hook must
 * not allocate (its allocations would not be reported anyway). */
enum { EV_ALLOC, EV_DALLOC, EV_EXPAND };
typedef struct {
	int kind, type;
	void *ptr;
	uintptr_t raw;
	size_t old_usize, new_usize;
	uintptr_t args[4];
	void *extra;
	pthread_t thread;
} event_t;

#define NEVENTS 4096
static event_t events[NEVENTS];
static atomic_uint nevents;

static event_t *record(int kind, int type, void *ptr, void *extra) {
	unsigned i = atomic_fetch_add(&nevents, 1);
	if (i >= NEVENTS)
		return NULL;
	event_t *e = &events[i];
	memset(e, 0, sizeof(*e));
	e->kind = kind;
	e->type = type;
	e->ptr = ptr;
	e->extra = extra;
	e->thread = pthread_self();
	return e;
}

static void on_alloc(void *extra, hook_alloc_t type, void *result,
    uintptr_t raw, uintptr_t args[3]) {
	event_t *e = record(EV_ALLOC, type, result, extra);
	if (e != NULL) {
		e->raw = raw;
		memcpy(e->args, args, 3 * sizeof(uintptr_t));
	}
}

static void on_dalloc(void *extra, hook_dalloc_t type, void *address,
    uintptr_t args[3]) {
	event_t *e = record(EV_DALLOC, type, address, extra);
	if (e != NULL)
		memcpy(e->args, args, 3 * sizeof(uintptr_t));
}

static void on_expand(void *extra, hook_expand_t type, void *address,
    size_t old_usize, size_t new_usize, uintptr_t raw, uintptr_t args[4]) {
	event_t *e = record(EV_EXPAND, type, address, extra);
	if (e != NULL) {
		e->raw = raw;
		e->old_usize = old_usize;
		e->new_usize = new_usize;
		memcpy(e->args, args, 4 * sizeof(uintptr_t));
	}
}

static int extra_tag;

/* Handles a test installed and has not removed: a failed test's are
 * removed by the teardown, so that the next test starts with none. */
static void *installed[8];

static void *install(hooks_t *h) {
	void *handle = NULL;
	size_t len = sizeof(handle);
	int r = mallctl("experimental.hooks.install", &handle, &len, h,
	    sizeof(*h));
	MP_ASSERT(r == 0 && handle != NULL, "install: %d", r);
	for (size_t i = 0; i < MP_ARRAY_SIZE(installed); i++) {
		if (installed[i] == NULL) {
			installed[i] = handle;
			break;
		}
	}
	return handle;
}

static void uninstall(void *handle) {
	int r = mallctl("experimental.hooks.remove", NULL, NULL, &handle,
	    sizeof(handle));
	MP_ASSERT(r == 0, "remove: %d", r);
	for (size_t i = 0; i < MP_ARRAY_SIZE(installed); i++) {
		if (installed[i] == handle)
			installed[i] = NULL;
	}
}

static int teardown(void **state) {
	(void)state;
	for (size_t i = 0; i < MP_ARRAY_SIZE(installed); i++) {
		if (installed[i] != NULL)
			(void)mallctl("experimental.hooks.remove", NULL, NULL,
			    &installed[i], sizeof(installed[i]));
		installed[i] = NULL;
	}
	return 0;
}

/* Whether this thread can run on the fast paths (its cache on, no junk,
 * no zero): thread events, and so activity callbacks, need them. */
static bool fast_paths_possible(void) {
	bool enabled = false, zero = true;
	const char *junk = NULL;
	MALLCTL_READ("thread.tcache.enabled", enabled);
	MALLCTL_READ("opt.zero", zero);
	MALLCTL_READ("opt.junk", junk);
	return enabled && !zero && strcmp(junk, "false") == 0;
}

/* The number of recorded events of kind/type on ptr since `from`. */
static unsigned seen(unsigned from, int kind, int type, const void *ptr) {
	unsigned n = atomic_load(&nevents);
	unsigned c = 0;
	for (unsigned i = from; i < n && i < NEVENTS; i++) {
		if (events[i].kind == kind && events[i].type == type &&
		    events[i].ptr == ptr)
			c++;
	}
	return c;
}

/* The last event of kind/type on ptr since `from`, or NULL. */
static const event_t *find(unsigned from, int kind, int type,
    const void *ptr) {
	unsigned n = atomic_load(&nevents);
	const event_t *found = NULL;
	for (unsigned i = from; i < n && i < NEVENTS; i++) {
		if (events[i].kind == kind && events[i].type == type &&
		    events[i].ptr == ptr)
			found = &events[i];
	}
	return found;
}

static hooks_t all_hooks = {on_alloc, on_dalloc, on_expand, &extra_tag};

/* Each allocating and freeing function, with its type and arguments. */
static void test_functions(void **state) {
	(void)state;
	void *handle = install(&all_hooks);
	unsigned from = atomic_load(&nevents);

	size_t n100 = opaque_size(100);
	void *p = malloc(n100);
	const event_t *e = find(from, EV_ALLOC, hook_alloc_malloc, p);
	MP_ASSERT(e != NULL && e->raw == (uintptr_t)p && e->args[0] == 100 &&
	    e->extra == &extra_tag, "malloc(100) = %p not reported", p);
	free(p);
	e = find(from, EV_DALLOC, hook_dalloc_free, p);
	MP_ASSERT(e != NULL && e->args[0] == (uintptr_t)p, "free(%p)", p);

	p = calloc(3, opaque_size(10));
	e = find(from, EV_ALLOC, hook_alloc_calloc, p);
	MP_ASSERT(e != NULL && e->args[0] == 3 && e->args[1] == 10, "calloc");
	free(p);

	void *q = NULL;
	int r = posix_memalign(&q, 64, opaque_size(200));
	assert_int_equal(r, 0);
	e = find(from, EV_ALLOC, hook_alloc_posix_memalign, q);
	/* args[0] is the memptr the library got: the compiler may pass a
	 * temporary of its own for &q (a builtin it knows). */
	MP_ASSERT(e != NULL && e->raw == 0 && e->args[0] != 0 &&
	    e->args[1] == 64 && e->args[2] == 200, "posix_memalign");
	free(q);

	p = aligned_alloc(128, opaque_size(256));
	e = find(from, EV_ALLOC, hook_alloc_aligned_alloc, p);
	MP_ASSERT(e != NULL && e->args[0] == 128 && e->args[1] == 256,
	    "aligned_alloc");
	free(p);

	p = mallocx(opaque_size(50), 0);
	e = find(from, EV_ALLOC, hook_alloc_mallocx, p);
	MP_ASSERT(e != NULL && e->args[0] == 50 && e->args[1] == 0,
	    "mallocx(50, 0)");
	/* Built on malloc, reported once, as mallocx. */
	MP_ASSERT(seen(from, EV_ALLOC, hook_alloc_malloc, p) == 0,
	    "mallocx also reported as malloc");
	dallocx(p, 0);
	e = find(from, EV_DALLOC, hook_dalloc_dallocx, p);
	MP_ASSERT(e != NULL && e->args[1] == 0, "dallocx");
	MP_ASSERT(seen(from, EV_DALLOC, hook_dalloc_free, p) == 0,
	    "dallocx also reported as free");

	p = mallocx(opaque_size(64), MALLOCX_ALIGN(64));
	e = find(from, EV_ALLOC, hook_alloc_mallocx, p);
	MP_ASSERT(e != NULL && e->args[1] == (uintptr_t)MALLOCX_ALIGN(64),
	    "mallocx with flags");
	sdallocx(p, 64, MALLOCX_ALIGN(64));
	e = find(from, EV_DALLOC, hook_dalloc_sdallocx, p);
	MP_ASSERT(e != NULL && e->args[1] == 64 &&
	    e->args[2] == (uintptr_t)MALLOCX_ALIGN(64), "sdallocx");

	/* realloc: of NULL an allocation, moving one an allocation and a
	 * free, within the class an expansion, to 0 a free. */
	p = realloc(NULL, opaque_size(24));
	e = find(from, EV_ALLOC, hook_alloc_realloc, p);
	MP_ASSERT(e != NULL && e->args[0] == 0 && e->args[1] == 24,
	    "realloc(NULL, 24)");
	MP_ASSERT(seen(from, EV_ALLOC, hook_alloc_malloc, p) == 0,
	    "realloc(NULL) also reported as malloc");
	/* Within the class the block stays (junk:alloc moves it, to junk
	 * the new one). */
	const char *junk = NULL;
	MALLCTL_READ("opt.junk", junk);
	if (strcmp(junk, "true") != 0 && strcmp(junk, "alloc") != 0) {
		q = realloc(p, opaque_size(20));
		MP_ASSERT(q == p, "realloc within the class moved");
		e = find(from, EV_EXPAND, hook_expand_realloc, p);
		MP_ASSERT(e != NULL && e->old_usize == 32 &&
		    e->new_usize == 32 && e->raw == (uintptr_t)p &&
		    e->args[1] == 20, "realloc in place");
	}
	q = realloc(p, opaque_size(5000));
	e = find(from, EV_ALLOC, hook_alloc_realloc, q);
	MP_ASSERT(e != NULL && e->args[0] == (uintptr_t)p &&
	    e->args[1] == 5000, "realloc moving: new block");
	e = find(from, EV_DALLOC, hook_dalloc_realloc, p);
	MP_ASSERT(e != NULL && e->args[1] == 5000, "realloc moving: old");
	p = realloc(q, 0);
	MP_ASSERT(p == NULL, "realloc(p, 0)");
	MP_ASSERT(find(from, EV_DALLOC, hook_dalloc_realloc, q) != NULL &&
	    seen(from, EV_DALLOC, hook_dalloc_free, q) == 0, "realloc(q, 0)");

	p = mallocx(opaque_size(1000), 0);
	q = rallocx(p, opaque_size(3000), 0);
	MP_ASSERT(find(from, EV_ALLOC, hook_alloc_rallocx, q) != NULL &&
	    find(from, EV_DALLOC, hook_dalloc_rallocx, p) != NULL, "rallocx");
	size_t u = xallocx(q, opaque_size(3000), 0, 0);
	e = find(from, EV_EXPAND, hook_expand_xallocx, q);
	MP_ASSERT(e != NULL && e->raw == u && e->args[1] == 3000,
	    "xallocx");
	dallocx(q, 0);

	uninstall(handle);
	/* Removed: nothing more. */
	unsigned after = atomic_load(&nevents);
	p = malloc(n100);
	free(p);
	MP_ASSERT(seen(after, EV_ALLOC, hook_alloc_malloc, p) == 0 &&
	    seen(after, EV_DALLOC, hook_dalloc_free, p) == 0,
	    "hook called after removal");
}

/* Many blocks of every size class that a cache bin serves: none is
 * missed (the fast paths are off while hooks are installed). */
static void test_every_call(void **state) {
	(void)state;
	void *handle = install(&all_hooks);
	enum { N = 200 };
	static void *p[N];
	unsigned from = atomic_load(&nevents);
	for (unsigned i = 0; i < N; i++)
		p[i] = malloc(opaque_size(8 + (i % 40) * 16));
	for (unsigned i = 0; i < N; i++)
		free(p[i]);
	uninstall(handle);
	unsigned missed = 0;
	for (unsigned i = 0; i < N; i++) {
		if (seen(from, EV_ALLOC, hook_alloc_malloc, p[i]) == 0 ||
		    seen(from, EV_DALLOC, hook_dalloc_free, p[i]) == 0)
			missed++;
	}
	MP_ASSERT(missed == 0, "%u of %d blocks not reported", missed, N);
}

static void *thread_body(void *arg) {
	void **out = arg;
	out[0] = malloc(opaque_size(48));
	free(out[0]);
	return NULL;
}

/* A thread started after the install is reported from its first call. */
static void test_new_thread(void **state) {
	(void)state;
	void *handle = install(&all_hooks);
	unsigned from = atomic_load(&nevents);
	void *got[1] = {NULL};
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, thread_body, got), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	const event_t *e = find(from, EV_ALLOC, hook_alloc_malloc, got[0]);
	MP_ASSERT(e != NULL && pthread_equal(e->thread, t), "thread's malloc");
	MP_ASSERT(find(from, EV_DALLOC, hook_dalloc_free, got[0]) != NULL,
	    "thread's free");
	uninstall(handle);
}

/* A thread already running when the hooks come sees them at its next
 * slow-path call or thread event: after 512 KiB in 1 KiB blocks (two
 * events at the default 256 KiB) every call of it is reported. */
static pthread_barrier_t running_barrier;

static void *running_body(void *arg) {
	void **out = arg;
	free(malloc(opaque_size(64)));          /* set up, fast paths on */
	pthread_barrier_wait(&running_barrier); /* main installs */
	pthread_barrier_wait(&running_barrier);
	for (int i = 0; i < 512; i++)
		free(malloc(opaque_size(1024)));
	out[0] = malloc(opaque_size(48));
	free(out[0]);
	return NULL;
}

static void test_running_thread(void **state) {
	(void)state;
	bool junk_free = false;
	const char *junk = NULL;
	MALLCTL_READ("opt.junk", junk);
	junk_free = strcmp(junk, "true") == 0 || strcmp(junk, "free") == 0;
	assert_int_equal(pthread_barrier_init(&running_barrier, NULL, 2), 0);
	void *got[1] = {NULL};
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, running_body, got), 0);
	pthread_barrier_wait(&running_barrier);
	void *handle = install(&all_hooks);
	unsigned from = atomic_load(&nevents);
	pthread_barrier_wait(&running_barrier);
	assert_int_equal(pthread_join(t, NULL), 0);
	pthread_barrier_destroy(&running_barrier);
	uninstall(handle);
	MP_ASSERT(find(from, EV_ALLOC, hook_alloc_malloc, got[0]) != NULL &&
	    find(from, EV_DALLOC, hook_dalloc_free, got[0]) != NULL,
	    "the running thread's malloc/free not reported (junk free: %d)",
	    junk_free);
}

/* NULL members: that kind is not reported; at most four sets. */
static void test_limits(void **state) {
	(void)state;
	hooks_t only_dalloc = {NULL, on_dalloc, NULL, NULL};
	void *h[4];
	for (int i = 0; i < 4; i++)
		h[i] = install(&only_dalloc);
	void *extra = NULL;
	size_t len = sizeof(extra);
	int r = mallctl("experimental.hooks.install", &extra, &len,
	    &only_dalloc, sizeof(only_dalloc));
	MP_ASSERT(r == EAGAIN, "fifth install: %d", r);
	unsigned from = atomic_load(&nevents);
	void *p = malloc(opaque_size(16));
	free(p);
	MP_ASSERT(seen(from, EV_ALLOC, hook_alloc_malloc, p) == 0 &&
	    seen(from, EV_DALLOC, hook_dalloc_free, p) == 4,
	    "alloc %u, dalloc %u", seen(from, EV_ALLOC, hook_alloc_malloc, p),
	    seen(from, EV_DALLOC, hook_dalloc_free, p));
	for (int i = 0; i < 4; i++)
		uninstall(h[i]);
	/* Errors: removing twice, NULL, sizes. */
	r = mallctl("experimental.hooks.remove", NULL, NULL, &h[0],
	    sizeof(h[0]));
	MP_ASSERT(r == EINVAL, "second remove: %d", r);
	void *null = NULL;
	r = mallctl("experimental.hooks.remove", NULL, NULL, &null,
	    sizeof(null));
	MP_ASSERT(r == EINVAL, "remove(NULL): %d", r);
	r = mallctl("experimental.hooks.remove", &extra, &len, NULL, 0);
	MP_ASSERT(r == EPERM, "remove read: %d", r);
	len = sizeof(extra) - 1;
	r = mallctl("experimental.hooks.install", &extra, &len, &only_dalloc,
	    sizeof(only_dalloc));
	MP_ASSERT(r == EINVAL, "install, short oldlen: %d", r);
	len = sizeof(extra);
	r = mallctl("experimental.hooks.install", &extra, &len, &only_dalloc,
	    sizeof(only_dalloc) - 1);
	MP_ASSERT(r == EINVAL, "install, short newlen: %d", r);
	r = mallctl("experimental.hooks.install", NULL, NULL, &only_dalloc,
	    sizeof(only_dalloc));
	MP_ASSERT(r == EINVAL, "install without oldp: %d", r);
	/* The limit counted the removals. */
	h[0] = install(&only_dalloc);
	uninstall(h[0]);
}

/* experimental.thread.activity_callback: called at the thread's events
 * with its counters; rw with the old value.  Runs after every hook is
 * removed: events fire only on the fast paths, which the removals turned
 * back on. */
typedef void (*activity_callback_t)(void *uctx, uint64_t allocated,
    uint64_t deallocated);
typedef struct {
	activity_callback_t callback;
	void *uctx;
} activity_callback_thunk_t;

static unsigned activity_calls;
static uint64_t activity_allocated;

static void on_activity(void *uctx, uint64_t allocated,
    uint64_t deallocated) {
	(void)deallocated;
	if (uctx == &extra_tag) {
		activity_calls++;
		activity_allocated = allocated;
	}
}

static void test_activity_callback(void **state) {
	(void)state;
	if (!fast_paths_possible())
		MP_SKIP("no thread events without the fast paths (junk, zero "
		    "or tcache:false)");
	activity_callback_thunk_t t = {on_activity, &extra_tag}, old;
	size_t len = sizeof(old);
	int r = mallctl("experimental.thread.activity_callback", &old, &len,
	    &t, sizeof(t));
	MP_ASSERT(r == 0 && old.callback == NULL, "set: %d", r);
	/* 2 MiB in 1 KiB blocks: the events come every 256 KiB. */
	for (int i = 0; i < 2048; i++)
		free(malloc(opaque_size(1024)));
	uint64_t now = 0;
	MALLCTL_READ("thread.allocated", now);
	MP_ASSERT(activity_calls >= 4 && activity_allocated > 0 &&
	    activity_allocated <= now, "%u calls, last at %" PRIu64
	    " of %" PRIu64, activity_calls, activity_allocated, now);
	activity_callback_thunk_t none = {NULL, NULL};
	len = sizeof(old);
	r = mallctl("experimental.thread.activity_callback", &old, &len,
	    &none, sizeof(none));
	MP_ASSERT(r == 0 && old.callback == on_activity &&
	    old.uctx == &extra_tag, "reset: %d", r);
	unsigned calls = activity_calls;
	for (int i = 0; i < 1024; i++)
		free(malloc(opaque_size(1024)));
	MP_ASSERT(activity_calls == calls, "called after reset");
	r = mallctl("experimental.thread.activity_callback", NULL, NULL, &t,
	    sizeof(t) - 1);
	MP_ASSERT(r == EINVAL, "short write: %d", r);
}

/* experimental.hooks.safety_check_abort: write-only, a function. */
static void fake_abort(const char *msg) {
	(void)msg;
}

static void test_safety_check_abort(void **state) {
	(void)state;
	void (*fn)(const char *) = fake_abort;
	int r = mallctl("experimental.hooks.safety_check_abort", NULL, NULL,
	    &fn, sizeof(fn));
	MP_ASSERT(r == 0, "set: %d", r);
	size_t len = sizeof(fn);
	r = mallctl("experimental.hooks.safety_check_abort", &fn, &len, NULL,
	    0);
	MP_ASSERT(r == EPERM, "read: %d", r);
	r = mallctl("experimental.hooks.safety_check_abort", NULL, NULL, &fn,
	    1);
	MP_ASSERT(r == EINVAL, "short write: %d", r);
	fn = NULL;
	r = mallctl("experimental.hooks.safety_check_abort", NULL, NULL, &fn,
	    sizeof(fn));
	MP_ASSERT(r == 0, "reset: %d", r);
}

int main(void) {
	mp_test_init(120);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_functions, teardown),
		cmocka_unit_test_teardown(test_every_call, teardown),
		cmocka_unit_test_teardown(test_new_thread, teardown),
		cmocka_unit_test_teardown(test_running_thread, teardown),
		cmocka_unit_test_teardown(test_limits, teardown),
		cmocka_unit_test_teardown(test_activity_callback, teardown),
		cmocka_unit_test_teardown(test_safety_check_abort, teardown),
	};
	return mp_run_tests(tests);
}
