/*
 * test/integration/percpu_arena.c - percpu_arena (percpu_arena.conf:
 * percpu_arena:percpu): one arena per CPU, and a thread's arena follows
 * the CPU it runs on, as jemalloc 5.3 does.
 *
 * A thread is pinned to one CPU after another (pthread_setaffinity_np);
 * on each, a large block (above tcache_max, so it comes from the arena,
 * not the thread's cache) must come from that CPU's arena (arenas.lookup)
 * and thread.arena must read it.  Children run by mp_run_self check the
 * other settings in a process of their own: phycpu (CPU i and
 * i + ncpus/2 share arena i), disabled (today's spreading, thread.arena
 * writable and kept whatever the CPU) and narenas given with percpu
 * (the larger of the two).  Tests that need two CPUs skip on one.
 */
#include "test_util.h"

#include <sched.h>
#include <sys/wait.h>

#define LARGE ((size_t)1 << 20)
#define MAX_CPUS 64

/* The CPUs of the affinity mask at start-up (what the allocator counts). */
static cpu_set_t start_mask;
static int cpus[MAX_CPUS];
static unsigned ncpus;

static void cpus_init(void) {
	CPU_ZERO(&start_mask);
	if (sched_getaffinity(0, sizeof(start_mask), &start_mask) != 0)
		return;
	for (int c = 0; c < CPU_SETSIZE && ncpus < MAX_CPUS; c++) {
		if (CPU_ISSET(c, &start_mask))
			cpus[ncpus++] = c;
	}
}

/* What jemalloc 5.3 requires to keep per-CPU arenas on without narenas:
 * CPUs in the mask == online == configured. */
static bool cpu_count_deterministic(void) {
	return (long)CPU_COUNT(&start_mask) == sysconf(_SC_NPROCESSORS_ONLN) &&
	    (long)CPU_COUNT(&start_mask) == sysconf(_SC_NPROCESSORS_CONF);
}

/* Move the calling thread to CPU cpu; true once it runs there. */
static bool pin(int cpu) {
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (pthread_setaffinity_np(pthread_self(), sizeof(set), &set) != 0)
		return false;
	for (int i = 0; i < 1000 && sched_getcpu() != cpu; i++)
		sched_yield();
	return sched_getcpu() == cpu;
}

static void unpin(void) {
	(void)pthread_setaffinity_np(pthread_self(), sizeof(start_mask),
	    &start_mask);
}

static const char *opt_mode(void) {
	const char *mode = NULL;
	size_t sz = sizeof(mode);
	int r = mallctl("opt.percpu_arena", &mode, &sz, NULL, 0);
	MP_CHECK(r == 0 && sz == sizeof(mode) && mode != NULL,
	    "opt.percpu_arena: %d", r);
	return r == 0 && mode != NULL ? mode : "";
}

static unsigned read_unsigned(const char *name) {
	unsigned v = UINT_MAX;
	size_t sz = sizeof(v);
	int r = mallctl(name, &v, &sz, NULL, 0);
	MP_CHECK(r == 0 && sz == sizeof(v), "%s: %d", name, r);
	return v;
}

static unsigned thread_arena(void) {
	return read_unsigned("thread.arena");
}

static int thread_arena_write(unsigned ind) {
	return mallctl("thread.arena", NULL, NULL, &ind, sizeof(ind));
}

/* The arena of a fresh large block (freed again). */
static unsigned large_arena(void) {
	void *p = malloc(LARGE);
	MP_CHECK(p != NULL, "malloc(%zu)", LARGE);
	unsigned ind = UINT_MAX;
	size_t sz = sizeof(ind);
	int r = mallctl("arenas.lookup", &ind, &sz, &p, sizeof(p));
	MP_CHECK(r == 0, "arenas.lookup(%p): %d", p, r);
	free(p);
	return ind;
}

/* jemalloc 5.3's percpu_arena_choose. */
static unsigned expected_arena(int cpu, bool phycpu) {
	unsigned c = (unsigned)cpu;
	if (phycpu && c >= ncpus / 2)
		c -= ncpus / 2;
	return c;
}

/* Pinned to each CPU in turn, then back to the first: the large blocks
 * and thread.arena follow the CPU (or stay on `fixed` if not UINT_MAX). */
static void check_follows(bool phycpu, unsigned fixed) {
	for (unsigned k = 0; k <= ncpus; k++) {
		int cpu = cpus[k % ncpus];
		if (!pin(cpu)) {
			MP_CHECK(false, "cannot run on CPU %d", cpu);
			continue;
		}
		unsigned want = fixed != UINT_MAX ? fixed :
		    expected_arena(cpu, phycpu);
		unsigned got = large_arena();
		MP_CHECK(got == want, "CPU %d: large block from arena %u, "
		    "expected %u", cpu, got, want);
		got = thread_arena();
		MP_CHECK(got == want, "CPU %d: thread.arena %u, expected %u",
		    cpu, got, want);
	}
	unpin();
}

/* ---------------------------------------------------------- children */

static int child_phycpu(void) {
	cpus_init();
	MP_CHECK(strcmp(opt_mode(), "phycpu") == 0, "opt.percpu_arena "
	    "\"%s\"", opt_mode());
	unsigned want = ncpus > 1 ? ncpus / 2 + ncpus % 2 : 1;
	unsigned n = read_unsigned("arenas.narenas");
	MP_CHECK(n == want, "arenas.narenas %u, expected %u (%u CPUs)", n,
	    want, ncpus);
	check_follows(true, UINT_MAX);
	/* Both hyperthreads of a core (Linux numbers the second ones after
	 * all the first ones) share one arena. */
	for (unsigned k = 0; k < ncpus && ncpus % 2 == 0; k++) {
		if (cpus[k] >= (int)(ncpus / 2) || !pin(cpus[k]))
			continue;
		unsigned a = large_arena();
		if (!pin(cpus[k] + (int)(ncpus / 2)))
			continue;
		unsigned b = large_arena();
		MP_CHECK(a == b && a == (unsigned)cpus[k], "CPUs %d and %d: "
		    "arenas %u and %u", cpus[k], cpus[k] + (int)(ncpus / 2),
		    a, b);
	}
	unpin();
	return atomic_load(&mp_failures) != 0;
}

static int child_disabled(void) {
	cpus_init();
	MP_CHECK(strcmp(opt_mode(), "disabled") == 0, "opt.percpu_arena "
	    "\"%s\"", opt_mode());
	unsigned n = read_unsigned("arenas.narenas");
	unsigned want = 4 * ncpus < 4095 ? 4 * ncpus : 4095;
	MP_CHECK(n == want, "arenas.narenas %u, expected 4 per CPU: %u", n,
	    want);
	/* thread.arena is the thread's to choose, and stays whatever the
	 * CPU. */
	unsigned target = n > 1 ? 1 : 0;
	int r = thread_arena_write(target);
	MP_CHECK(r == 0, "thread.arena = %u: %d", target, r);
	check_follows(false, target);
	return atomic_load(&mp_failures) != 0;
}

/* narenas given: the larger of it and the CPU count (MP_TEST_NARENAS);
 * the automatic arenas past the per-CPU ones are the thread's to take. */
static int child_narenas(void) {
	cpus_init();
	const char *given = getenv("MP_TEST_NARENAS");
	unsigned g = given != NULL ? (unsigned)atoi(given) : 0;
	unsigned want = g > ncpus ? g : ncpus;
	unsigned n = read_unsigned("arenas.narenas");
	MP_CHECK(n == want, "narenas:%u on %u CPUs: arenas.narenas %u, "
	    "expected %u", g, ncpus, n, want);
	unsigned o = read_unsigned("opt.narenas");
	MP_CHECK(o == want, "opt.narenas %u, expected %u", o, want);
	if (n > ncpus) {
		int r = thread_arena_write(ncpus);
		MP_CHECK(r == 0, "thread.arena = %u (past the per-CPU "
		    "arenas): %d", ncpus, r);
		if (ncpus >= 2)
			check_follows(false, ncpus);
	}
	return atomic_load(&mp_failures) != 0;
}

/* Run this program as MODE with MALLOC_CONF (this build's name) conf. */
static void run_child(const char *mode, const char *conf) {
	const char *var = mp_env_conf_name();
	const char *old = getenv(var);
	char saved[256] = "";
	if (old != NULL)
		snprintf(saved, sizeof(saved), "%s", old);
	setenv(var, conf, 1);
	mp_run_self("percpu_arena", mode);
	if (old != NULL)
		setenv(var, saved, 1);
	else
		unsetenv(var);
}

/* ------------------------------------------------------------- tests */

static bool percpu_on_or_skip_reason(const char **why) {
	if (strcmp(opt_mode(), "percpu") == 0)
		return true;
	*why = "per-CPU arenas were disabled at start-up";
	return false;
}

#define REQUIRE_PERCPU() do {						\
	const char *why_ = NULL;					\
	if (!cpu_count_deterministic())					\
		MP_SKIP("CPU count not deterministic (affinity mask, "	\
		    "online and configured CPUs differ): jemalloc turns " \
		    "percpu_arena off");				\
	if (!percpu_on_or_skip_reason(&why_))				\
		MP_FAIL("opt.percpu_arena \"%s\": %s", opt_mode(), why_); \
} while (0)

static void test_read_out(void **state) {
	(void)state;
	REQUIRE_PERCPU();
	unsigned f0 = atomic_load(&mp_failures);
	unsigned n = read_unsigned("arenas.narenas");
	MP_ASSERT(n >= ncpus, "arenas.narenas %u < %u CPUs", n, ncpus);
	MP_ASSERT(n == ncpus, "arenas.narenas %u, expected one per CPU: %u",
	    n, ncpus);
	unsigned o = read_unsigned("opt.narenas");
	MP_ASSERT(o == ncpus, "opt.narenas %u, expected %u", o, ncpus);
	/* Read-only, as every opt.*. */
	const char *mode = "disabled";
	assert_int_equal(mallctl("opt.percpu_arena", NULL, NULL, &mode,
	    sizeof(mode)), EPERM);
	assert_int_equal(atomic_load(&mp_failures), f0);
}

static void test_follows_cpu(void **state) {
	(void)state;
	REQUIRE_PERCPU();
	if (ncpus < 2)
		MP_SKIP("one CPU: no other CPU to move to");
	unsigned f0 = atomic_load(&mp_failures);
	check_follows(false, UINT_MAX);
	assert_int_equal(atomic_load(&mp_failures), f0);
}

/* A thread that starts on a CPU takes that CPU's arena at its first
 * allocation. */
static void *first_arena_thread(void *arg) {
	*(unsigned *)arg = large_arena();
	return NULL;
}

static void test_new_thread(void **state) {
	(void)state;
	REQUIRE_PERCPU();
	for (unsigned k = 0; k < ncpus; k++) {
		pthread_attr_t attr;
		cpu_set_t set;
		CPU_ZERO(&set);
		CPU_SET(cpus[k], &set);
		assert_int_equal(pthread_attr_init(&attr), 0);
		assert_int_equal(pthread_attr_setaffinity_np(&attr,
		    sizeof(set), &set), 0);
		unsigned got = UINT_MAX;
		pthread_t t;
		assert_int_equal(pthread_create(&t, &attr, first_arena_thread,
		    &got), 0);
		assert_int_equal(pthread_join(t, NULL), 0);
		pthread_attr_destroy(&attr);
		MP_ASSERT(got == (unsigned)cpus[k], "new thread on CPU %d: "
		    "arena %u", cpus[k], got);
	}
}

/* In a thread of its own, as it ends on a manual arena. */
static void *thread_arena_writes(void *arg) {
	(void)arg;
	unsigned cur = thread_arena();
	int r = thread_arena_write(cur);
	MP_CHECK(r == 0, "thread.arena = its own %u: %d", cur, r);
	unsigned total = read_unsigned("arenas.narenas");
	r = thread_arena_write(total);
	MP_CHECK(r == EFAULT, "thread.arena = %u (not handed out): %d",
	    total, r);
	if (ncpus >= 2) {
		unsigned other = cur == 0 ? 1 : 0;
		r = thread_arena_write(other);
		MP_CHECK(r == EPERM, "thread.arena = per-CPU arena %u: %d "
		    "(expected EPERM)", other, r);
		MP_CHECK(thread_arena() == cur, "thread.arena moved to %u "
		    "after a refused write", thread_arena());
	}
	/* A manual arena is allowed, and the CPU is not followed on it. */
	unsigned m = UINT_MAX;
	size_t sz = sizeof(m);
	r = mallctl("arenas.create", &m, &sz, NULL, 0);
	MP_CHECK(r == 0 && m >= ncpus, "arenas.create: %d, %u", r, m);
	if (r != 0)
		return NULL;
	r = thread_arena_write(m);
	MP_CHECK(r == 0, "thread.arena = manual arena %u: %d", m, r);
	check_follows(false, m);
	/* Back to a per-CPU arena: refused as well. */
	r = thread_arena_write(0);
	MP_CHECK(r == EPERM, "thread.arena = 0 from a manual arena: %d", r);
	return NULL;
}

static void test_thread_arena_write(void **state) {
	(void)state;
	REQUIRE_PERCPU();
	unsigned f0 = atomic_load(&mp_failures);
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, thread_arena_writes, NULL),
	    0);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(atomic_load(&mp_failures), f0);
}

static void test_phycpu(void **state) {
	(void)state;
	if (!cpu_count_deterministic())
		MP_SKIP("CPU count not deterministic: jemalloc turns "
		    "percpu_arena off");
	run_child("phycpu", "percpu_arena:phycpu");
}

static void test_disabled(void **state) {
	(void)state;
	if (ncpus < 2)
		MP_SKIP("one CPU: no other CPU to move to");
	run_child("disabled", "percpu_arena:disabled");
}

static void test_narenas(void **state) {
	(void)state;
	if (!cpu_count_deterministic())
		MP_SKIP("CPU count not deterministic");
	char conf[64], n[16];
	unsigned given[] = {1, ncpus + 3};
	for (unsigned i = 0; i < 2; i++) {
		snprintf(n, sizeof(n), "%u", given[i]);
		snprintf(conf, sizeof(conf), "percpu_arena:percpu,narenas:%u",
		    given[i]);
		setenv("MP_TEST_NARENAS", n, 1);
		run_child("narenas", conf);
	}
	unsetenv("MP_TEST_NARENAS");
}

int main(int argc, char **argv) {
	if (argc == 2 && strcmp(argv[1], "phycpu") == 0)
		return child_phycpu();
	if (argc == 2 && strcmp(argv[1], "disabled") == 0)
		return child_disabled();
	if (argc == 2 && strcmp(argv[1], "narenas") == 0)
		return child_narenas();
	mp_test_init(300);
	cpus_init();
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_read_out),
		cmocka_unit_test(test_follows_cpu),
		cmocka_unit_test(test_new_thread),
		cmocka_unit_test(test_thread_arena_write),
		cmocka_unit_test(test_phycpu),
		cmocka_unit_test(test_disabled),
		cmocka_unit_test(test_narenas),
	};
	return mp_run_tests(tests);
}
