/*
 * test/integration/prof_cfi_signal.c - a signal handler that allocates
 * and frees, sampled while the thread it interrupts is in the middle of
 * a chain built without frame pointers that allocates (prof_unwind:cfi,
 * every allocation a sample: prof_cfi_signal.conf).
 *
 * The main thread allocates and frees through
 *   test_signal -> sig_main_lvl1 -> sig_main_lvl2 -> cfi_lib_lvl4 ->
 *   cfi_lib_alloc -> malloc
 * (-O2 -fomit-frame-pointer; the last two in prof_cfi_lib.c), and in
 * sig_main_lvl2, before it allocates, computes a while in sig_spin
 * with SIGUSR1 unblocked; a helper thread sends it SIGUSR1 a bounded
 * number of times, each time waiting until the handler has run.  The
 * handler, sig_handler, frees the block it allocated HANDLER_LIVE
 * signals earlier and allocates one through sig_alloc.  SIGUSR1 is
 * blocked while the main thread is inside malloc or free: this
 * allocator is not async-signal-safe (a sampled allocation or free
 * holds arena 0's shared_mtx, which a handler that allocates would
 * wait for forever, as with glibc's malloc).
 *
 * The process must neither crash nor deadlock (a deadlock trips the
 * test's alarm); afterwards a dump must hold the handler's last blocks
 * under stacks that start sig_alloc, sig_handler (the walk got out of
 * the handler's frame), and the main thread's last blocks under the
 * whole chain above.  Past the handler the unwinder may stop at the
 * signal frame (its CFA is an expression, which prof_cfi.c does not
 * follow) or go through it into the interrupted code: both are fine,
 * and the test prints which it saw.
 */
#include "../test_util.h"

#define HANDLER_LIVE 16
#define MAIN_LIVE 16
/* The main thread's iterations: until the helper is done, at least
 * MAIN_MIN, at most MAIN_MAX. */
#define MAIN_MIN 1000
#define MAIN_MAX 20000000

static char tmpdir[256];

void *cfi_lib_alloc(size_t n);
void *cfi_lib_lvl4(size_t n);
void *sig_alloc(size_t n);
void sig_handler(int sig);
void *sig_main_lvl1(size_t n);
void *sig_main_lvl2(size_t n);
unsigned long sig_spin(size_t n);

static sigset_t usr1_set;

/* Work for the signal to interrupt: a bounded loop, no calls. */
MP_NOFP_SITE unsigned long sig_spin(size_t n) {
	volatile unsigned long acc = n;
	for (unsigned i = 0; i < 2000; i++)
		acc = acc * 6364136223846793005u + i;
	return acc;
}

MP_NOFP_SITE void *sig_main_lvl2(size_t n) {
	volatile char pad[40];
	pad[n % 40] = 0;
	pthread_sigmask(SIG_UNBLOCK, &usr1_set, NULL);
	pad[n % 40] = (char)(sig_spin(n) & 0);
	pthread_sigmask(SIG_BLOCK, &usr1_set, NULL);
	void *p = cfi_lib_lvl4(n + (size_t)pad[n % 40]);
	__asm__ volatile("" : : "r"(p) : "memory");
	return p;
}

MP_NOFP_SITE void *sig_main_lvl1(size_t n) {
	void *p = sig_main_lvl2(n);
	__asm__ volatile("" : : "r"(p) : "memory");
	return p;
}

MP_NOFP_SITE void *sig_alloc(size_t n) {
	volatile char pad[24];
	pad[n % 24] = 0;
	void *p = malloc(n + (size_t)pad[n % 24]);
	__asm__ volatile("" : : "r"(p) : "memory");
	return p;
}

/* Touched by the handler only (it does not nest: SIGUSR1 is blocked
 * while it runs), read by the main thread after the helper is done. */
static void *handler_ring[HANDLER_LIVE];
static atomic_uint handled;
static atomic_uint handler_null;

MP_NOFP_SITE void sig_handler(int sig) {
	(void)sig;
	int saved = errno;
	unsigned i = atomic_load_explicit(&handled, memory_order_relaxed);
	free(handler_ring[i % HANDLER_LIVE]);
	handler_ring[i % HANDLER_LIVE] = sig_alloc(200 + i % 50);
	if (handler_ring[i % HANDLER_LIVE] == NULL)
		atomic_fetch_add(&handler_null, 1);
	atomic_store_explicit(&handled, i + 1, memory_order_release);
	errno = saved;
}

typedef struct {
	pthread_t target;
	unsigned signals;
	atomic_bool done;
	bool timed_out;
} helper_arg_t;

/* Sends the signals one at a time, each once the last was handled. */
static void *helper_thread(void *arg) {
	helper_arg_t *a = arg;
	for (unsigned k = 0; k < a->signals && !a->timed_out; k++) {
		pthread_kill(a->target, SIGUSR1);
		uint64_t t0 = mp_now_ns();
		while (atomic_load_explicit(&handled, memory_order_acquire)
		    <= k) {
			if (mp_waited_too_long(t0)) {
				a->timed_out = true;
				break;
			}
			sched_yield();
		}
	}
	atomic_store_explicit(&a->done, true, memory_order_release);
	return NULL;
}

static void stack_line(char *line, size_t size, const char *tag,
    const mp_heap_stack_t *s, size_t u) {
	int len = snprintf(line, size, "# %s:", tag);
	for (size_t k = u; k < s->nframes && len > 0 && (size_t)len < size;
	    k++) {
		len += snprintf(line + len, size - (size_t)len, " %s",
		    mp_fn_name(s->frames[k]));
	}
}

static bool frame_in(uintptr_t ra, const void *fn) {
	uintptr_t lo, hi;
	mp_fn_range(fn, &lo, &hi);
	return mp_ra_in(ra, lo, hi);
}

static void test_no_profiler(void **state) {
	(void)state;
	const char *opt = NULL;
	size_t sz = sizeof(opt);
	assert_int_equal(mallctl("opt.prof_unwind", &opt, &sz, NULL, 0),
	    ENOENT);
}

static void test_signal(void **state) {
	(void)state;
	const char *opt = NULL;
	size_t sz = sizeof(opt);
	assert_int_equal(mallctl("opt.prof_unwind", &opt, &sz, NULL, 0), 0);
	MP_ASSERT(strcmp(opt, "cfi") == 0, "opt.prof_unwind is %s", opt);
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = sig_handler;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	assert_int_equal(sigaction(SIGUSR1, &sa, NULL), 0);
	sigemptyset(&usr1_set);
	sigaddset(&usr1_set, SIGUSR1);
	/* Unblocked only in sig_main_lvl2's sig_spin. */
	assert_int_equal(pthread_sigmask(SIG_BLOCK, &usr1_set, NULL), 0);

	static helper_arg_t h;
	h.target = pthread_self();
	h.signals = mp_slow_build() ? 300 : 2000;
	atomic_store(&h.done, false);
	h.timed_out = false;
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, helper_thread, &h), 0);
	void *ring[MAIN_LIVE] = {NULL};
	unsigned long i;
	for (i = 0; i < MAIN_MAX && (i < MAIN_MIN ||
	    !atomic_load_explicit(&h.done, memory_order_acquire)); i++) {
		free(ring[i % MAIN_LIVE]);
		ring[i % MAIN_LIVE] = sig_main_lvl1(64 + i % 300);
		MP_CHECK(ring[i % MAIN_LIVE] != NULL, "malloc");
	}
	pthread_join(t, NULL);
	unsigned nh = atomic_load(&handled);
	printf("# %u signals handled during %lu allocations of the main "
	    "thread\n", nh, i);
	MP_ASSERT(!h.timed_out && nh == h.signals, "%u of %u signals "
	    "handled", nh, h.signals);
	assert_int_equal(atomic_load(&handler_null), 0);

	char path[512];
	snprintf(path, sizeof(path), "%s/signal.heap", tmpdir);
	assert_int_equal(mp_prof_dump(path), 0);
	mp_heap_t hp;
	MP_HEAP_PARSE(path, &hp);
	uint64_t h_objs = 0, h_past = 0, m_objs = 0;
	size_t h_stacks = 0, h_maxdepth = 0;
	for (size_t k = 0; k < hp.nstacks; k++) {
		const mp_heap_stack_t *s = &hp.stacks[k];
		size_t u = mp_heap_user_frame(s);
		char line[2048];
		if (s->total.co == 0 || u >= s->nframes)
			continue;
		if (frame_in(s->frames[u], (const void *)sig_alloc)) {
			/* A handler's block. */
			h_objs += s->total.co;
			bool ok = s->nframes - u >= 2 && frame_in(
			    s->frames[u + 1], (const void *)sig_handler);
			stack_line(line, sizeof(line), "handler", s, u);
			if (h_stacks++ < 3 || !ok)
				printf("%s\n", line);
			MP_CHECK(ok, "a handler stack does not go from "
			    "sig_alloc to sig_handler (printed above)");
			size_t depth = s->nframes - u;
			h_maxdepth = depth > h_maxdepth ? depth : h_maxdepth;
			/* Frames beyond the signal frame: the interrupted
			 * code or what called it. */
			bool past = false;
			for (size_t f = u + 2; f < s->nframes; f++) {
				past |= frame_in(s->frames[f],
				    (const void *)sig_main_lvl2) ||
				    frame_in(s->frames[f],
				    (const void *)sig_spin);
			}
			if (past)
				h_past += s->total.co;
		} else if (frame_in(s->frames[u],
		    (const void *)cfi_lib_alloc)) {
			m_objs += s->total.co;
			bool ok = s->nframes - u >= 4 &&
			    frame_in(s->frames[u + 1],
			    (const void *)cfi_lib_lvl4) &&
			    frame_in(s->frames[u + 2],
			    (const void *)sig_main_lvl2) &&
			    frame_in(s->frames[u + 3],
			    (const void *)sig_main_lvl1);
			if (!ok) {
				stack_line(line, sizeof(line), "main", s, u);
				printf("%s\n", line);
			}
			MP_CHECK(ok, "a main-thread stack is not the chain "
			    "(printed above)");
		}
	}
	mp_heap_free(&hp);
	printf("# handler: %" PRIu64 " live blocks in %zu stacks, deepest "
	    "%zu frames, %" PRIu64 " of the blocks with frames past the "
	    "signal frame; main: %" PRIu64 " live blocks\n", h_objs,
	    h_stacks, h_maxdepth, h_past, m_objs);
	fflush(stdout);
	MP_ASSERT(h_objs >= 1, "no live block of the handler in the dump");
	MP_ASSERT(m_objs >= MAIN_LIVE, "%" PRIu64 " live blocks of the "
	    "main thread's chain, expected %u", m_objs, MAIN_LIVE);
	mp_free_all(ring, MAIN_LIVE);
	mp_free_all(handler_ring, HANDLER_LIVE);
	assert_int_equal(atomic_load(&mp_failures), 0);
}

int main(void) {
	mp_test_init(600);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_signal),
	};
	return mp_prof_test_main("mp_prof_cfi_signal", test_no_profiler,
	    tests);
}
